// upstream.mjs runs one oidc-provider (panva's OpenID Certified provider,
// which nobody here wrote) as the upstream OpenID provider of oidcd's
// federation tests: a real implementation of the protocol to federate with,
// so that a misreading of the specifications that oidcd's own provider and
// relying party share cannot pass unnoticed.
//
//	node upstream.mjs config.json   (or "-" to read the configuration on stdin)
//
// The configuration is JSON (oidcprovider.go writes it):
//
//	{
//	  "port": 12345,                 // listens on 127.0.0.1:<port>; the issuer is http://127.0.0.1:<port>
//	  "alg": "RS256",                // ID token signing: "RS256" (default), "ES256" or "PS256"
//	  "no_iss_param": false,         // true: no RFC 9207 iss in authorization responses
//	  "test_token": "...",           // the bearer token of POST /test/end-sessions
//	  "clients": [{"client_id": "...", "client_secret": "...", "redirect_uris": ["..."],
//	               "post_logout_redirect_uris": ["..."], "backchannel_logout_uri": "...",
//	               "token_endpoint_auth_method": "client_secret_basic"}],
//	  "accounts": [{"sub": "...", "password": "...", "email": "...", "email_verified": true,
//	                "name": "...", "groups": ["..."], "amr": ["pwd"]}]
//	}
//
// It prints exactly one line on stdout, "READY <issuer>", once it listens,
// and exits on SIGTERM or SIGINT. Everything else (oidc-provider's notices,
// errors, the test hook's deliveries) goes to stderr, which the Go side
// shows when a test fails.
//
// The sign-in page is ours, not oidc-provider's devInteractions, so that
// tests know its fields: GET /interaction/<uid> shows a form posting to
// /interaction/<uid>/login with inputs name="login" (the account's sub or
// email) and name="password" and a button id="submit"; a wrong password
// shows the form again with id="error". Consent is approved without a page.
// The end-session confirmation page has a button id="logout".
import { generateKeyPairSync, randomUUID, timingSafeEqual } from 'node:crypto';
import { readFileSync } from 'node:fs';
import * as http from 'node:http';

import Provider from 'oidc-provider';

const config = JSON.parse(readFileSync(process.argv[2] === undefined || process.argv[2] === '-' ? 0 : process.argv[2], 'utf8'));
const issuer = `http://127.0.0.1:${config.port}`;
const alg = config.alg || 'RS256';

function log(...args) {
  console.error('upstream:', ...args);
}

// signingKey makes a fresh private JWK for alg, so that no two runs share
// a key and a test cannot come to depend on one.
function signingKey(name) {
  let pair;
  switch (name) {
    case 'RS256':
    case 'PS256':
      pair = generateKeyPairSync('rsa', { modulusLength: 2048 });
      break;
    case 'ES256':
      pair = generateKeyPairSync('ec', { namedCurve: 'P-256' });
      break;
    default:
      throw new Error(`unsupported alg ${name}: want RS256, ES256 or PS256`);
  }
  return { ...pair.privateKey.export({ format: 'jwk' }), kid: randomUUID(), alg: name, use: 'sig' };
}

const accounts = new Map((config.accounts || []).map((a) => [a.sub, a]));

function findLogin(login) {
  for (const a of accounts.values()) {
    if (a.sub === login || (a.email && a.email === login)) {
      return a;
    }
  }
  return undefined;
}

function samePassword(a, b) {
  const x = Buffer.from(String(a));
  const y = Buffer.from(String(b));
  return x.length === y.length && timingSafeEqual(x, y);
}

// Store is an in-memory adapter like oidc-provider's own, which it warns is
// for development only, with one thing more: the test hook can list the
// sessions of an account, which the library's adapter interface cannot.
const store = new Map(); // "<model>:<id>" -> {payload, expiresAt}

class Store {
  constructor(model) {
    this.model = model;
  }

  static live(key) {
    const e = store.get(key);
    if (!e) {
      return undefined;
    }
    if (e.expiresAt && e.expiresAt <= Date.now()) {
      store.delete(key);
      return undefined;
    }
    return e.payload;
  }

  async upsert(id, payload, expiresIn) {
    store.set(`${this.model}:${id}`, { payload, expiresAt: expiresIn ? Date.now() + expiresIn * 1000 : 0 });
  }

  async find(id) {
    return Store.live(`${this.model}:${id}`);
  }

  async findByUid(uid) {
    for (const key of store.keys()) {
      const p = key.startsWith(`${this.model}:`) && Store.live(key);
      if (p && p.uid === uid) {
        return p;
      }
    }
    return undefined;
  }

  async findByUserCode(userCode) {
    for (const key of store.keys()) {
      const p = key.startsWith(`${this.model}:`) && Store.live(key);
      if (p && p.userCode === userCode) {
        return p;
      }
    }
    return undefined;
  }

  async consume(id) {
    const p = Store.live(`${this.model}:${id}`);
    if (p) {
      p.consumed = Math.floor(Date.now() / 1000);
    }
  }

  async destroy(id) {
    store.delete(`${this.model}:${id}`);
  }

  async revokeByGrantId(grantId) {
    for (const [key, e] of store) {
      if (key.startsWith(`${this.model}:`) && e.payload.grantId === grantId) {
        store.delete(key);
      }
    }
  }

  // sessionsOf lists the ids of the live sessions of an account.
  static sessionsOf(sub) {
    const out = [];
    for (const key of store.keys()) {
      const p = key.startsWith('Session:') && Store.live(key);
      if (p && p.accountId === sub) {
        out.push(key.slice('Session:'.length));
      }
    }
    return out;
  }
}

function esc(s) {
  return String(s).replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
}

function page(title, body) {
  return `<!DOCTYPE html>
<html lang="en">
<head><meta charset="utf-8"><title>${esc(title)}</title><meta name="viewport" content="width=device-width, initial-scale=1"></head>
<body>
<main>
<h1>${esc(title)}</h1>
${body}
</main>
</body>
</html>`;
}

function loginPage(uid, login, error) {
  return page('Sign in to the upstream provider', `${error ? `<p id="error" role="alert">${esc(error)}</p>\n` : ''}<form method="post" action="/interaction/${esc(uid)}/login" autocomplete="off">
<label for="login">Login</label>
<input id="login" name="login" type="text" autocomplete="username" required value="${esc(login || '')}">
<label for="password">Password</label>
<input id="password" name="password" type="password" autocomplete="current-password" required>
<button type="submit" id="submit">Sign in</button>
</form>`);
}

const clients = (config.clients || []).map((c) => {
  const out = {
    client_id: c.client_id,
    client_secret: c.client_secret,
    redirect_uris: c.redirect_uris || [],
    post_logout_redirect_uris: c.post_logout_redirect_uris || [],
    token_endpoint_auth_method: c.token_endpoint_auth_method || 'client_secret_basic',
    id_token_signed_response_alg: alg,
  };
  if (c.backchannel_logout_uri) {
    out.backchannel_logout_uri = c.backchannel_logout_uri;
    out.backchannel_logout_session_required = true;
  }
  return out;
});

const provider = new Provider(issuer, {
  adapter: Store,
  clients,
  jwks: { keys: [signingKey(alg)] },
  findAccount(ctx, sub) {
    const a = accounts.get(sub);
    if (!a) {
      return undefined;
    }
    return {
      accountId: sub,
      async claims() {
        return {
          sub,
          email: a.email,
          email_verified: a.email_verified,
          name: a.name,
          groups: a.groups || [],
        };
      },
    };
  },
  // groups is a scope of its own, as at Okta and Dex: an app that wants
  // the account's groups asks for scope "groups". amr belongs to scope
  // openid so that every ID token carries it: oidc-provider otherwise puts
  // amr in only when the claims parameter asks for it.
  claims: {
    openid: ['sub', 'amr'],
    email: ['email', 'email_verified'],
    profile: ['name'],
    groups: ['groups'],
  },
  scopes: ['openid', 'email', 'profile', 'groups'],
  // The ID token from the token endpoint carries the account's claims, as
  // Google's and most providers' do; oidc-provider's default, conforming
  // to OpenID Connect Core 5.4, puts them only in userinfo whenever an
  // access token is issued too.
  conformIdTokenClaims: false,
  // Every client must send a PKCE challenge (oidc-provider knows only
  // S256), not only public ones.
  pkce: { required: () => true },
  interactions: { url: (ctx, interaction) => `/interaction/${interaction.uid}` },
  features: {
    devInteractions: { enabled: false },
    backchannelLogout: { enabled: true },
    rpInitiatedLogout: {
      enabled: true,
      // The buttons go inside oidc-provider's form (its own page puts
      // them outside, with form=), so that a test's HTML form parser
      // finds them as a browser submits them.
      async logoutSource(ctx, form) {
        ctx.body = page('Sign out of the upstream provider', form.replace('</form>', `
<button type="submit" id="logout" name="logout" value="yes">Sign out</button>
<button type="submit" id="stay">Stay signed in</button>
</form>`));
      },
      async postLogoutSuccessSource(ctx) {
        ctx.body = page('Signed out', '<p id="signed-out">You are signed out of the upstream provider.</p>');
      },
    },
  },
  async renderError(ctx, out) {
    ctx.type = 'html';
    ctx.body = page('Error', Object.entries(out).map(([k, v]) => `<p class="error" data-key="${esc(k)}">${esc(k)}: ${esc(v)}</p>`).join('\n'));
  },
  // oidc-provider refuses to send back-channel logout tokens (and any
  // other outgoing request) to special-use addresses such as 127.0.0.1,
  // where every test's relying party listens: the SSRF guard is its fetch
  // dispatcher, so this fetch drops it.
  fetch(url, options) {
    const { dispatcher, ...rest } = options;
    return globalThis.fetch(url, rest);
  },
});

if (config.no_iss_param) {
  // oidc-provider 8 and later always add RFC 9207's iss to authorization
  // responses (the issAuthResp feature is gone); a provider that does not
  // is simulated by taking it out of the redirect and the discovery
  // document.
  provider.use(async (ctx, next) => {
    await next();
    const route = ctx.oidc?.route;
    if (route === 'discovery' && ctx.body) {
      ctx.body.authorization_response_iss_parameter_supported = false;
    }
    const location = ctx.response.get('location');
    if ((route === 'authorization' || route === 'resume') && location) {
      const u = new URL(location, issuer);
      const h = new URLSearchParams(u.hash.slice(1));
      if (u.searchParams.has('iss') || h.has('iss')) {
        u.searchParams.delete('iss');
        h.delete('iss');
        u.hash = h.toString();
        ctx.response.set('location', u.href);
      }
    }
  });
}

for (const ev of ['server_error', 'authorization.error', 'grant.error', 'backchannel.error', 'end_session.error', 'userinfo.error']) {
  provider.on(ev, (ctx, err) => log(ev, err?.name, err?.message, err?.error_description || ''));
}

async function readForm(req) {
  const chunks = [];
  for await (const c of req) {
    chunks.push(c);
  }
  return new URLSearchParams(Buffer.concat(chunks).toString('utf8'));
}

function send(res, status, type, body) {
  res.writeHead(status, { 'content-type': type, 'cache-control': 'no-store' });
  res.end(body);
}

// consent approves what the request asks for, so no test needs a consent
// page: the upstream is the people's own provider, and oidcd its app.
async function consent(req, res, details) {
  const { prompt: { details: missing }, params, session: { accountId } } = details;
  const grant = details.grantId
    ? await provider.Grant.find(details.grantId)
    : new provider.Grant({ accountId, clientId: params.client_id });
  if (missing.missingOIDCScope) {
    grant.addOIDCScope(missing.missingOIDCScope.join(' '));
  }
  if (missing.missingOIDCClaims) {
    grant.addOIDCClaims(missing.missingOIDCClaims);
  }
  if (missing.missingResourceScopes) {
    for (const [indicator, scopes] of Object.entries(missing.missingResourceScopes)) {
      grant.addResourceScope(indicator, scopes.join(' '));
    }
  }
  const grantId = await grant.save();
  await provider.interactionFinished(req, res, { consent: details.grantId ? {} : { grantId } }, { mergeWithLastSubmission: true });
}

async function interaction(req, res, uid, action) {
  const details = await provider.interactionDetails(req, res);
  if (details.uid !== uid) {
    send(res, 400, 'text/plain', 'interaction mismatch\n');
    return;
  }
  if (req.method === 'GET' && !action) {
    if (details.prompt.name === 'consent') {
      await consent(req, res, details);
      return;
    }
    send(res, 200, 'text/html; charset=utf-8', loginPage(uid, details.params.login_hint));
    return;
  }
  if (req.method === 'POST' && action === 'login' && details.prompt.name === 'login') {
    const form = await readForm(req);
    const login = form.get('login') || '';
    const account = findLogin(login);
    if (!account || !samePassword(account.password, form.get('password') || '')) {
      log('sign-in refused for', JSON.stringify(login));
      send(res, 200, 'text/html; charset=utf-8', loginPage(uid, login, 'Wrong login or password.'));
      return;
    }
    await provider.interactionFinished(req, res, {
      login: { accountId: account.sub, amr: account.amr && account.amr.length ? account.amr : undefined },
    }, { mergeWithLastSubmission: false });
    return;
  }
  send(res, 405, 'text/plain', 'method not allowed\n');
}

// endSessions is the test hook: it ends every session of an account as a
// sign-out at the provider would, sending each client the account signed
// in to with a back-channel logout URI a logout token through the
// library's own Client#backchannelLogout (so the token is oidc-provider's,
// with the session's sid for that client), revokes the grants and
// destroys the sessions. It answers what it sent.
async function endSessions(sub) {
  const sent = [];
  const errors = [];
  const ids = Store.sessionsOf(sub);
  for (const id of ids) {
    const session = await provider.Session.find(id);
    if (!session) {
      continue;
    }
    for (const clientId of Object.keys(session.authorizations || {})) {
      const client = await provider.Client.find(clientId);
      const sid = session.sidFor(clientId);
      if (client?.backchannelLogoutUri) {
        try {
          await client.backchannelLogout(sub, sid);
          sent.push({ client_id: clientId, sid, uri: client.backchannelLogoutUri });
          log('back-channel logout token sent to', clientId, client.backchannelLogoutUri, 'sid', sid);
        } catch (err) {
          errors.push({ client_id: clientId, sid, error: err.message });
          log('back-channel logout to', clientId, 'failed:', err.message);
        }
      }
      const grantId = session.grantIdFor(clientId);
      if (grantId) {
        await Promise.all([provider.AccessToken, provider.AuthorizationCode, provider.RefreshToken]
          .map((model) => model.revokeByGrantId(grantId)));
        await (await provider.Grant.find(grantId))?.destroy();
      }
    }
    await session.destroy();
  }
  return { sessions: ids.length, sent, errors };
}

const oidc = provider.callback();

const server = http.createServer(async (req, res) => {
  const url = new URL(req.url, issuer);
  try {
    const m = url.pathname.match(/^\/interaction\/([^/]+)(?:\/([a-z]+))?$/);
    if (m) {
      await interaction(req, res, m[1], m[2]);
      return;
    }
    if (url.pathname === '/test/end-sessions') {
      const auth = req.headers.authorization || '';
      if (!config.test_token || !samePassword(auth, `Bearer ${config.test_token}`)) {
        send(res, 401, 'text/plain', 'unauthorized\n');
        return;
      }
      if (req.method !== 'POST') {
        send(res, 405, 'text/plain', 'method not allowed\n');
        return;
      }
      const sub = url.searchParams.get('sub') || (await readForm(req)).get('sub');
      if (!sub) {
        send(res, 400, 'text/plain', 'sub is required\n');
        return;
      }
      send(res, 200, 'application/json', JSON.stringify(await endSessions(sub)));
      return;
    }
    oidc(req, res);
  } catch (err) {
    log('error at', req.method, url.pathname, err?.name, err?.message);
    if (!res.headersSent) {
      send(res, err?.statusCode || 500, 'text/html; charset=utf-8', page('Error', `<p class="error">${esc(err?.name)}: ${esc(err?.message)}</p>`));
    } else {
      res.end();
    }
  }
});

function stop() {
  server.close(() => process.exit(0));
  server.closeAllConnections();
  setTimeout(() => process.exit(0), 1000).unref();
}
process.on('SIGTERM', stop);
process.on('SIGINT', stop);

server.listen(config.port, '127.0.0.1', () => {
  process.stdout.write(`READY ${issuer}\n`);
});
