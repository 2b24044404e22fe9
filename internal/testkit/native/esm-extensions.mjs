// esm-extensions.mjs: a module resolution hook (node:module register) that
// lets Node load @openid/appauth 1.4.0 as it is published. The package
// says "type": "module", but its built files import each other without
// the ".js" extension ('./authorization_request'), which Node's ES module
// loader refuses (its own scripts run under tsx, which resolves them).
// The hook retries such a relative import with ".js"; it changes nothing
// else, and nothing of the library's code.

export async function resolve(specifier, context, next) {
  try {
    return await next(specifier, context);
  } catch (err) {
    if (err?.code === 'ERR_MODULE_NOT_FOUND' && /^\.\.?\//.test(specifier) && !specifier.endsWith('.js')) {
      return next(`${specifier}.js`, context);
    }
    throw err;
  }
}
