// app.mjs: the single-page app of spa_test.go, written as an application
// developer would write one with oidc-client-ts (a library nobody here
// wrote), loaded as an ES module from node_modules through the import map
// of each page. The app's own server answers /config.json with the issuer
// and the client_id; everything else is the library's: discovery, PKCE,
// the code exchange from script (CORS), userinfo, silent renewal in a
// hidden iframe (prompt=none) and RP-initiated logout.
//
// window.spa is what the test calls, and what a page's buttons call; each
// function resolves to a plain object, never throws: { error } when the
// library or fetch failed, with the library's error code when it has one.

import { UserManager, WebStorageStateStore, Log } from 'oidc-client-ts';

const config = await (await fetch('/config.json', { cache: 'no-store' })).json();
const here = location.origin;

Log.setLogger(console);
Log.setLevel(Log.WARN);

export const manager = new UserManager({
  authority: config.issuer,
  client_id: config.client_id,
  redirect_uri: `${here}/callback.html`,
  silent_redirect_uri: `${here}/silent.html`,
  post_logout_redirect_uri: `${here}/signed-out.html`,
  response_type: 'code',
  scope: 'openid email',
  loadUserInfo: true,
  automaticSilentRenew: false,
  monitorSession: false,
  silentRequestTimeoutInSeconds: 10,
  userStore: new WebStorageStateStore({ store: window.sessionStorage }),
});

const failure = (e) => ({ error: e?.error || e?.message || String(e), description: e?.error_description });

// summary is what the page shows and the test reads of a signed-in user.
const summary = (user) => user && {
  sub: user.profile.sub,
  sid: user.profile.sid,
  organization_id: user.profile.organization_id,
  email: user.profile.email,
  email_verified: user.profile.email_verified,
  access_token: user.access_token,
  id_token: user.id_token,
  expires_in: user.expires_in,
  scope: user.scope,
};

// call fetches url from script as the page's origin, and reports what the
// page may read of the answer: a browser refuses the whole answer (a
// TypeError, "Failed to fetch") when it carries no CORS grant.
async function call(url, init = {}) {
  try {
    const res = await fetch(url, { ...init, cache: 'no-store' });
    return {
      status: res.status,
      www_authenticate: res.headers.get('www-authenticate'),
      correlation_id: res.headers.get('x-correlation-id'),
      body: await res.text(),
    };
  } catch (e) {
    return failure(e);
  }
}

async function endpoints() {
  return manager.metadataService.getMetadata();
}

window.spa = {
  ready: true,
  async user() { return summary(await manager.getUser()) || { error: 'signed_out' }; },
  async signIn() { try { await manager.signinRedirect(); return {}; } catch (e) { return failure(e); } },
  async signOut(userState) { try { await manager.signoutRedirect({ state: userState }); return {}; } catch (e) { return failure(e); } },
  async renew() { try { return summary(await manager.signinSilent()); } catch (e) { return failure(e); } },
  async userinfo(token) {
    const user = await manager.getUser();
    const { userinfo_endpoint } = await endpoints();
    return call(userinfo_endpoint, { headers: { authorization: `Bearer ${token ?? user?.access_token}` } });
  },
  async memberships() {
    const user = await manager.getUser();
    return call(`${config.issuer}/api/v1/me/memberships`, { headers: { authorization: `Bearer ${user?.access_token}` } });
  },
  // post sends a form to one of the provider's endpoints (introspection,
  // revocation) as a page would.
  async post(endpoint, fields) {
    const m = await endpoints();
    return call(m[endpoint], { method: 'POST', body: new URLSearchParams(fields) });
  },
};

// render shows the signed-in person on the page.
export async function render() {
  const user = await manager.getUser();
  const status = document.getElementById('status');
  if (!user) {
    status.textContent = 'Signed out';
    return;
  }
  status.textContent = `Signed in as ${user.profile.email}`;
  document.getElementById('claims').textContent = JSON.stringify({
    sub: user.profile.sub, organization_id: user.profile.organization_id, sid: user.profile.sid,
    email: user.profile.email, email_verified: user.profile.email_verified, scope: user.scope,
  }, null, 2);
  const info = await window.spa.userinfo();
  document.getElementById('userinfo').textContent = info.error
    ? `userinfo from script failed: ${info.error}`
    : `${info.status} (X-Correlation-ID ${info.correlation_id})\n${JSON.stringify(JSON.parse(info.body), null, 2)}`;
}
