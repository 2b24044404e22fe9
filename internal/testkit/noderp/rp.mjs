// rp.mjs: one relying party's whole life against an oidcd issuer, written
// with libraries nobody here wrote: openid-client (discovery, PKCE, the code
// grant and its ID-token checks, userinfo, introspection, revocation,
// end-session), oauth4webapi (the same grant at a lower level) and jose
// (the back-channel logout token). noderp_test.go starts the nodes and
// runs it; it prints "ok <check>" per check passed and exits non-zero at
// the first one that fails.
//
// Environment: OIDCD_ISSUER, OIDCD_CLIENT_ID, OIDCD_CLIENT_SECRET (none for
// a public client), OIDCD_AUTH (basic, post, public, oauth4webapi),
// OIDCD_REDIRECT_URI, OIDCD_EMAIL, OIDCD_PASSWORD, OIDCD_BC_PORT (when set,
// the back-channel logout endpoint listens there at /bc).
//
// Two shapes oidcd's interface fixes stay as they are, and no check here
// relies on the libraries accepting them: the 429 answer is the JSON error
// envelope (docs/application-developers.md, "Errors"), whose "error" is
// an object (not RFC 6749's string), and the access token is a JWT with an
// empty "aud" (only oidcd checks it, at userinfo and introspection; these
// libraries treat it as opaque).

import assert from 'node:assert/strict';
import http from 'node:http';
import * as client from 'openid-client';
import * as oauth from 'oauth4webapi';
import * as jose from 'jose';

const env = process.env;
const issuer = new URL(env.OIDCD_ISSUER);
const clientId = env.OIDCD_CLIENT_ID;
const secret = env.OIDCD_CLIENT_SECRET || undefined;
const mode = env.OIDCD_AUTH;
const cb = env.OIDCD_REDIRECT_URI;

const ok = (name) => console.log(`ok ${name}`);

// ---- a browser: cookies, manual redirects, the pages' forms ----

class Browser {
  cookies = new Map();

  async request(url, init = {}) {
    const headers = new Headers(init.headers);
    if (this.cookies.size) {
      headers.set('cookie', [...this.cookies].map(([k, v]) => `${k}=${v}`).join('; '));
    }
    const res = await fetch(url, { ...init, headers, redirect: 'manual' });
    for (const c of res.headers.getSetCookie()) {
      const [pair] = c.split(';');
      const i = pair.indexOf('=');
      const name = pair.slice(0, i).trim();
      const value = pair.slice(i + 1).trim();
      if (/max-age=0|expires=thu, 01 jan 1970/i.test(c) || value === '') this.cookies.delete(name);
      else this.cookies.set(name, value);
    }
    return res;
  }

  // follow GETs redirects until a page, or a redirect to the app's
  // callback, whose URL is returned as { callback }.
  async follow(url, res) {
    for (let i = 0; i < 10; i++) {
      if (res.status < 300 || res.status > 399) {
        return { url, status: res.status, html: await res.text() };
      }
      const next = new URL(res.headers.get('location'), url);
      if (next.href.startsWith(cb)) return { callback: next };
      url = next;
      res = await this.request(url);
    }
    throw new Error(`too many redirects from ${url}`);
  }

  async get(url) {
    return this.follow(new URL(url), await this.request(url));
  }

  // submit posts the form of page that holds the button name=value, with
  // fields, and follows where it leads.
  async submit(page, fields, name, value) {
    const form = findForm(page.html, name, value);
    const body = new URLSearchParams(form.hidden);
    for (const [k, v] of Object.entries(fields)) body.set(k, v);
    body.set(name, value);
    const target = new URL(form.action, page.url);
    const res = await this.request(target, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body,
    });
    return this.follow(target, res);
  }
}

const unescape = (s) =>
  s.replace(/&quot;/g, '"').replace(/&#34;/g, '"').replace(/&#39;/g, "'").replace(/&lt;/g, '<').replace(/&gt;/g, '>').replace(/&amp;/g, '&');

function attr(tag, name) {
  const m = new RegExp(`\\b${name}="([^"]*)"`).exec(tag);
  return m ? unescape(m[1]) : undefined;
}

function findForm(html, name, value) {
  for (const m of html.matchAll(/<form\b([^>]*)>([\s\S]*?)<\/form>/g)) {
    if (attr(m[1], 'method') !== 'post') continue;
    const buttons = [...m[2].matchAll(/<button\b[^>]*>/g)].map((b) => b[0]);
    if (!buttons.some((b) => attr(b, 'name') === name && attr(b, 'value') === value)) continue;
    const hidden = {};
    for (const h of m[2].matchAll(/<input\b[^>]*>/g)) {
      if (attr(h[0], 'type') === 'hidden') hidden[attr(h[0], 'name')] = attr(h[0], 'value') ?? '';
    }
    return { action: attr(m[1], 'action'), hidden };
  }
  throw new Error(`no form with the button ${name}=${value} in:\n${html}`);
}

// signIn drives the browser from the authorization URL to the callback:
// the password page, then consent or the organization picker if shown.
async function signIn(browser, authUrl) {
  let page = await browser.get(authUrl);
  for (let i = 0; i < 5 && !page.callback; i++) {
    if (page.html.includes('name="password"')) {
      page = await browser.submit(page, { email: env.OIDCD_EMAIL, password: env.OIDCD_PASSWORD }, 'method', 'password');
    } else if (page.html.includes('value="allow"')) {
      page = await browser.submit(page, {}, 'decision', 'allow');
    } else {
      throw new Error(`unexpected page ${page.status} at ${page.url}:\n${page.html}`);
    }
  }
  assert.ok(page.callback, 'the sign-in did not come back to the app');
  return page.callback;
}

// ---- the back-channel logout endpoint ----

function backchannel(port, jwksUri, expectedIssuer) {
  let resolve;
  const received = new Promise((r) => (resolve = r));
  const jwks = jose.createRemoteJWKSet(new URL(jwksUri));
  const server = http.createServer(async (req, res) => {
    let body = '';
    for await (const chunk of req) body += chunk;
    try {
      assert.equal(req.method, 'POST');
      assert.match(req.headers['content-type'] ?? '', /^application\/x-www-form-urlencoded/);
      const token = new URLSearchParams(body).get('logout_token');
      const { payload, protectedHeader } = await jose.jwtVerify(token, jwks, {
        issuer: expectedIssuer,
        audience: clientId,
        typ: 'logout+jwt',
        algorithms: ['RS256'],
        requiredClaims: ['iat', 'jti', 'events'],
      });
      assert.equal(protectedHeader.alg, 'RS256');
      assert.deepEqual(payload.events, { 'http://schemas.openid.net/event/backchannel-logout': {} });
      assert.equal(payload.nonce, undefined, 'a logout token must not hold a nonce');
      res.writeHead(200).end();
      resolve(payload);
    } catch (e) {
      res.writeHead(400).end();
      resolve(Promise.reject(e));
    }
  });
  server.listen(Number(port), '127.0.0.1');
  return { received, close: () => server.close() };
}

function timeout(p, ms, what) {
  return Promise.race([p, new Promise((_, rej) => setTimeout(() => rej(new Error(`no ${what} within ${ms} ms`)), ms))]);
}

// ---- with openid-client ----

async function withOpenIDClient() {
  const auth = { basic: client.ClientSecretBasic, post: client.ClientSecretPost, public: client.None }[mode](secret);
  const config = await client.discovery(issuer, clientId, secret, auth, { execute: [client.allowInsecureRequests] });
  const meta = config.serverMetadata();
  assert.equal(meta.issuer, issuer.href.replace(/\/$/, ''));
  assert.ok(meta.code_challenge_methods_supported.includes('S256'));
  assert.equal(meta.authorization_response_iss_parameter_supported, true);
  ok('discovery');
  const bc = env.OIDCD_BC_PORT ? backchannel(env.OIDCD_BC_PORT, meta.jwks_uri, meta.issuer) : undefined;

  const verifier = client.randomPKCECodeVerifier();
  const state = client.randomState();
  const nonce = client.randomNonce();
  const authUrl = client.buildAuthorizationUrl(config, {
    redirect_uri: cb,
    scope: mode === 'public' ? 'openid email' : 'openid email profile',
    code_challenge: await client.calculatePKCECodeChallenge(verifier),
    code_challenge_method: 'S256',
    state,
    nonce,
  });
  const browser = new Browser();
  const callback = await signIn(browser, authUrl);
  // openid-client checks the iss parameter (RFC 9207), state, the code
  // exchange, and the ID token: signature, iss, aud, exp, iat, nonce.
  const tokens = await client.authorizationCodeGrant(config, callback, {
    pkceCodeVerifier: verifier,
    expectedState: state,
    expectedNonce: nonce,
    idTokenExpected: true,
  });
  assert.equal(tokens.token_type.toLowerCase(), 'bearer');
  assert.equal(tokens.refresh_token, undefined, 'no refresh token is ever issued');
  const claims = tokens.claims();
  // The ID token carries who and where (sub, sid, organization_id), never
  // the address: that is userinfo's, with the email scope.
  assert.equal(claims.email, undefined);
  assert.ok(claims.sid && claims.organization_id && claims.auth_time && claims.acr);
  assert.ok(Array.isArray(claims.aud) && claims.aud.includes(clientId));
  ok(`code grant and ID token (${mode})`);

  const info = await client.fetchUserInfo(config, tokens.access_token, claims.sub);
  assert.equal(info.sub, claims.sub);
  assert.equal(info.email, env.OIDCD_EMAIL);
  ok('userinfo');

  if (mode !== 'public') {
    const active = await client.tokenIntrospection(config, tokens.access_token);
    assert.equal(active.active, true);
    assert.equal(active.sub, claims.sub);
    assert.equal(active.client_id, clientId);
    ok('introspection');
    await client.tokenRevocation(config, tokens.access_token);
    const after = await client.tokenIntrospection(config, tokens.access_token);
    assert.deepEqual(after, { active: false });
    await assert.rejects(client.fetchUserInfo(config, tokens.access_token, claims.sub));
    ok('revocation');
  }

  // End-session: back to the app with its state, the session gone, and
  // (when registered) the logout token at the back channel.
  const endState = client.randomState();
  const endUrl = client.buildEndSessionUrl(config, { id_token_hint: tokens.id_token, post_logout_redirect_uri: cb, state: endState });
  const out = await browser.get(endUrl);
  assert.ok(out.callback, `end-session did not redirect to the app (status ${out.status})`);
  assert.equal(out.callback.searchParams.get('state'), endState);
  ok('end-session');
  if (bc) {
    const lt = await timeout(bc.received, 10000, 'back-channel logout token');
    assert.equal(lt.sid, claims.sid);
    assert.equal(lt.sub, claims.sub);
    assert.equal(lt.iss, meta.issuer);
    bc.close();
    ok('back-channel logout token (jose)');
  }
  // A new authorization request now shows the sign-in page again.
  const again = await browser.get(
    client.buildAuthorizationUrl(config, {
      redirect_uri: cb,
      scope: 'openid',
      code_challenge: await client.calculatePKCECodeChallenge(client.randomPKCECodeVerifier()),
      code_challenge_method: 'S256',
      state: client.randomState(),
    }),
  );
  assert.ok(again.html?.includes('name="password"'), 'signed out, yet not asked to sign in');
  ok('signed out');
}

// ---- with oauth4webapi ----

async function withOAuth4WebAPI() {
  const opts = { [oauth.allowInsecureRequests]: true };
  const as = await oauth.processDiscoveryResponse(issuer, await oauth.discoveryRequest(issuer, { ...opts, algorithm: 'oidc' }));
  ok('discovery');
  const c = { client_id: clientId };
  const auth = oauth.ClientSecretBasic(secret);
  const verifier = oauth.generateRandomCodeVerifier();
  const state = oauth.generateRandomState();
  const nonce = oauth.generateRandomNonce();
  const authUrl = new URL(as.authorization_endpoint);
  authUrl.search = new URLSearchParams({
    client_id: clientId,
    redirect_uri: cb,
    response_type: 'code',
    scope: 'openid email',
    code_challenge: await oauth.calculatePKCECodeChallenge(verifier),
    code_challenge_method: 'S256',
    state,
    nonce,
  });
  const callback = await signIn(new Browser(), authUrl);
  const params = oauth.validateAuthResponse(as, c, callback, state);
  const res = await oauth.authorizationCodeGrantRequest(as, c, auth, params, cb, verifier, opts);
  const result = await oauth.processAuthorizationCodeResponse(as, c, res, { expectedNonce: nonce, requireIdToken: true });
  const claims = oauth.getValidatedIdTokenClaims(result);
  assert.ok(claims.sid && claims.organization_id);
  ok('code grant and ID token (oauth4webapi)');
  const ui = await oauth.processUserInfoResponse(as, c, claims.sub, await oauth.userInfoRequest(as, c, result.access_token, opts));
  assert.equal(ui.email, env.OIDCD_EMAIL);
  ok('userinfo');
  const intro = await oauth.processIntrospectionResponse(as, c, await oauth.introspectionRequest(as, c, auth, result.access_token, opts));
  assert.equal(intro.active, true);
  ok('introspection');
  await oauth.processRevocationResponse(await oauth.revocationRequest(as, c, auth, result.access_token, opts));
  ok('revocation');
}

try {
  if (mode === 'oauth4webapi') await withOAuth4WebAPI();
  else await withOpenIDClient();
  console.log('done');
} catch (e) {
  console.error(e?.stack ?? e);
  if (e?.cause) console.error('cause:', e.cause);
  process.exit(1);
}
