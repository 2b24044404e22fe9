// app.mjs: a native app (RFC 8252) signing a person in with AppAuth-JS
// (@openid/appauth), a native-app library nobody here wrote. native_test.go
// starts the nodes, registers the app and plays the person's browser; this
// script prints "ok <check>" per check passed and exits non-zero at the
// first one that fails.
//
// 1. Loopback redirect (RFC 8252 7.3). The client is registered with
//    http://127.0.0.1/callback, no port. The app picks a free port at run
//    time, and AppAuth's NodeBasedHandler listens there and opens the
//    system browser at the authorization URL (the `opener` package runs
//    xdg-open; the test puts its own xdg-open first on PATH, which hands
//    the URL to headless Chromium). The code arrives at the port, and
//    AppAuth's token request sends the same redirect_uri, port included,
//    with the PKCE verifier and no secret.
// 2. Private-use scheme (RFC 8252 7.1): com.example.app:/callback. An
//    operating system hands such a redirect to the app that claimed the
//    scheme; here the app prints the authorization URL ("open <url>") and
//    reads the redirect the browser was sent to from stdin, then redeems
//    the code with that redirect_uri.
//
// Environment: OIDCD_ISSUER, OIDCD_CLIENT_ID.

import assert from 'node:assert/strict';
import net from 'node:net';
import readline from 'node:readline';
import { register } from 'node:module';

register('./esm-extensions.mjs', import.meta.url);
const {
  AuthorizationNotifier, AuthorizationRequest, AuthorizationServiceConfiguration,
  BaseTokenRequestHandler, GRANT_TYPE_AUTHORIZATION_CODE, TokenRequest,
} = await import('@openid/appauth');
const { NodeBasedHandler, NodeCrypto, NodeRequestor } = await import('@openid/appauth/built/src/node_support/index.js');

const issuer = process.env.OIDCD_ISSUER;
const clientId = process.env.OIDCD_CLIENT_ID;
const ok = (name) => console.log(`ok ${name}`);
const requestor = new NodeRequestor();
const crypto = new NodeCrypto();

// freePort asks the kernel for a free loopback port.
function freePort() {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.once('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const { port } = srv.address();
      srv.close(() => resolve(port));
    });
  });
}

// claims reads a JWT's payload. AppAuth-JS does not check ID tokens; an
// app verifies the signature with a JOSE library before trusting it.
const claims = (jwt) => JSON.parse(Buffer.from(jwt.split('.')[1], 'base64url').toString());

// redeem exchanges the code with AppAuth's token request, then reads
// userinfo through AppAuth's requestor, and checks what came back.
async function redeem(configuration, request, code, label) {
  const tokens = await new BaseTokenRequestHandler(requestor).performTokenRequest(configuration, new TokenRequest({
    client_id: clientId,
    redirect_uri: request.redirectUri,
    grant_type: GRANT_TYPE_AUTHORIZATION_CODE,
    code,
    extras: { code_verifier: request.internal.code_verifier },
  }));
  assert.ok(tokens.accessToken, 'an access token');
  const id = claims(tokens.idToken);
  assert.equal(id.iss, issuer);
  assert.ok(id.aud.includes(clientId), `aud ${id.aud} holds the client`);
  assert.equal(id.nonce, request.extras.nonce);
  ok(`token exchange (${label})`);
  const info = await requestor.xhr({
    url: configuration.userInfoEndpoint, method: 'GET', dataType: 'json',
    headers: { Authorization: `Bearer ${tokens.accessToken}` },
  });
  assert.equal(info.sub, id.sub);
  ok(`userinfo (${label}) ${info.email}`);
  return id;
}

const configuration = await AuthorizationServiceConfiguration.fetchFromIssuer(issuer, requestor);
ok('discovery');

// 1. Loopback on a port chosen now.
const port = await freePort();
const loopback = new AuthorizationRequest({
  client_id: clientId,
  redirect_uri: `http://127.0.0.1:${port}/callback`,
  scope: 'openid email',
  response_type: AuthorizationRequest.RESPONSE_TYPE_CODE,
  extras: { nonce: crypto.generateRandom(16) },
}, crypto);
const notifier = new AuthorizationNotifier();
const answered = new Promise((resolve) => notifier.setAuthorizationListener((req, res, err) => resolve({ req, res, err })));
const handler = new NodeBasedHandler(port);
handler.setAuthorizationNotifier(notifier);
console.log(`loopback port ${port}`);
handler.performAuthorizationRequest(configuration, loopback);
const { res, err } = await answered;
assert.equal(err, null, `authorization error ${JSON.stringify(err)}`);
assert.equal(res.state, loopback.state, 'state comes back');
ok(`code at the loopback port ${port}`);
const first = await redeem(configuration, loopback, res.code, 'loopback');

// 2. A private-use scheme, handed over by "the operating system" (stdin).
const scheme = new AuthorizationRequest({
  client_id: clientId,
  redirect_uri: 'com.example.app:/callback',
  scope: 'openid email',
  response_type: AuthorizationRequest.RESPONSE_TYPE_CODE,
  extras: { nonce: crypto.generateRandom(16) },
}, crypto);
await scheme.setupCodeVerifier();
console.log(`open ${handler.buildRequestUrl(configuration, scheme)}`);
const lines = readline.createInterface({ input: process.stdin });
const [line] = await lines[Symbol.asyncIterator]().next().then((r) => [r.value]);
lines.close();
const back = new URL(line.trim());
assert.equal(`${back.protocol}${back.pathname}`, 'com.example.app:/callback');
assert.equal(back.searchParams.get('state'), scheme.state, 'state comes back');
assert.ok(back.searchParams.get('code'), 'a code');
ok('code at com.example.app:/callback');
const second = await redeem(configuration, scheme, back.searchParams.get('code'), 'private-use scheme');
assert.equal(second.sub, first.sub);
console.log('done');
