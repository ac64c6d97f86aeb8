// panva's oidc-provider on a loopback port, for the interoperability tests.
//
// Usage: node provider.mjs SETTINGS.json. The settings (written by
// tests/support/providers/node.py) name the client, the token lifetime and the
// signing key. The provider listens on a free port of 127.0.0.1 and prints one JSON
// line per event on stdout: {"event":"listening","issuer":...} once, then
// {"event":"token","grant_type":...,"status":...,"refresh_token":true|false} for
// every token request, so a test can count refresh grants. No secret is printed.
//
// Two clients: settings.client_id, and settings.dpop_client_id, registered with
// dpop_bound_access_tokens (RFC 9449 10.2), which must present a DPoP proof at every
// token request. DPoP is on (the package's default) with nonces (nonceSecret), and
// every proof must carry the provider's current nonce (requireNonce). Two more for
// service accounts, allowed the client credentials grant only (the clientCredentials
// feature): settings.kiosk_id with settings.kiosk_secret (client_secret_basic), and
// `${kiosk_id}-jwt` with the public keys settings.kiosk_jwks (private_key_jwt); their
// tokens live settings.client_credentials_ttl seconds.
//
// Sign-in uses the package's own development interactions (any login, any password,
// then a consent page), which a scripted browser completes with two form posts. Both
// clients may also sign in with a device code (RFC 8628, the deviceFlow feature): its
// confirmation page, then the same login and consent. The package names no polling
// interval (clients then wait 5 s, RFC 8628 3.2); this one asks for 1 s, so that the
// tests' device sign-ins take a second or two.
//
// Test controls: when the file named by settings.pause_flag exists, the next
// refresh stops the process (SIGSTOP) once its answer is computed and before it is
// sent, as a stalled host would, until the test sends SIGCONT; when the file named by
// settings.break_flag exists, the next refresh is answered as it says (see
// breakAnswer), and the file removed; and POST /admin/revoke (sub=..., with
// settings.admin_token as a Bearer token) revokes every grant of that account with its
// tokens, with the calls the package's own grant revocation makes. A refresh token
// sent again after it was rotated (the package revokes the grant then) is printed as
// {"event":"token",...,"reuse":true}. GET /admin/sync?id=ID prints {"event":"sync","id":ID},
// so a test that has read that line has read every line printed before it.
//
// settings.dpop_nonces false: the provider gives no DPoP nonces (none demanded, none
// offered), so each proof's iat alone must be within its window of the provider's clock.
import { timingSafeEqual } from 'node:crypto';
import { existsSync, readFileSync, unlinkSync } from 'node:fs';
import { createServer } from 'node:http';
import { Readable } from 'node:stream';

import Provider from 'oidc-provider';

const settings = JSON.parse(readFileSync(process.argv[2], 'utf8'));
const say = (record) => process.stdout.write(`${JSON.stringify(record)}\n`);

// Step-up (RFC 9470): the acr values it offers (settings.acr_values); an access
// token carries its sign-in's acr, which token introspection tells a resource server.
const acrOfToken = async (ctx) => {
  const { AuthorizationCode: code, RefreshToken: refresh } = ctx?.oidc?.entities ?? {};
  const acr = (code ?? refresh)?.acr;
  return acr ? { acr } : undefined;
};

const server = createServer();
await new Promise((resolve) => { server.listen(0, '127.0.0.1', resolve); });
const issuer = `http://127.0.0.1:${server.address().port}`;

const client = {
  client_id: settings.client_id,
  application_type: 'native', // RFC 8252: any port of a loopback redirect URI
  token_endpoint_auth_method: 'none',
  grant_types: ['authorization_code', 'refresh_token', 'urn:ietf:params:oauth:grant-type:device_code'],
  response_types: ['code'],
  redirect_uris: settings.redirect_uris,
};
const provider = new Provider(issuer, {
  clients: [
    client,
    { ...client, client_id: settings.dpop_client_id, dpop_bound_access_tokens: true },
    {
      client_id: settings.kiosk_id,
      client_secret: settings.kiosk_secret,
      token_endpoint_auth_method: 'client_secret_basic',
      grant_types: ['client_credentials'],
      response_types: [],
      redirect_uris: [],
    },
    {
      client_id: `${settings.kiosk_id}-jwt`,
      jwks: settings.kiosk_jwks,
      token_endpoint_auth_method: 'private_key_jwt',
      grant_types: ['client_credentials'],
      response_types: [],
      redirect_uris: [],
    },
  ],
  jwks: { keys: [settings.signing_key] },
  cookies: { keys: [settings.cookie_key] },
  ttl: { AccessToken: settings.access_token_ttl, ClientCredentials: settings.client_credentials_ttl },
  // Every ID token says how and when the person signed in (acr, auth_time), as
  // Keycloak's do; oidc-provider's own default tells acr only when asked for.
  claims: { openid: ['sub', 'acr', 'auth_time'], profile: ['name'], email: ['email', 'email_verified'] },
  features: {
    revocation: { enabled: true },
    deviceFlow: { enabled: true },
    introspection: { enabled: true },
    clientCredentials: { enabled: true },
    dPoP: settings.dpop_nonces === false ? { enabled: true } : {
      enabled: true,
      nonceSecret: Buffer.from(settings.dpop_nonce_secret, 'base64url'),
      requireNonce: () => true,
    },
  },
  acrValues: settings.acr_values,
  extraTokenClaims: acrOfToken,
  async findAccount(_ctx, sub) {
    return {
      accountId: sub,
      async claims() {
        return { sub, name: `Test ${sub}`, email: `${sub}@example.com`, email_verified: true };
      },
    };
  },
});

// The development login signs the person in at the first acr the request's acr_values
// ask for that it offers, else at the first it offers: the stronger method "chosen".
const finishInteraction = provider.interactionFinished.bind(provider);
provider.interactionFinished = async (req, res, result, options) => {
  if (result?.login) {
    const { params } = await provider.interactionDetails(req, res);
    const asked = String(params.acr_values ?? '').split(' ');
    result.login.acr = asked.find((acr) => settings.acr_values.includes(acr)) ?? settings.acr_values[0];
  }
  return finishInteraction(req, res, result, options);
};

// The test's one-off answer to the next refresh (settings.break_flag holds its name):
// "not_json" cuts the real answer half-way, still application/json; "html" is a
// captive portal's page, answered before the request reaches the provider (see the
// request handler); "trickle:SECONDS" sends the real answer a byte at a time over that
// long; "stall" sends half of it and then nothing more, keeping the connection open.
const peekFlag = (path) => (existsSync(path) ? readFileSync(path, 'utf8').trim() : '');
const takeFlag = (path) => {
  const how = peekFlag(path);
  if (how) unlinkSync(path);
  return how;
};
const sleep = (ms) => new Promise((resolve) => { setTimeout(resolve, ms); });
async function* trickled(bytes, seconds, stall) {
  for (let i = 0; i < bytes.length; i += 1) {
    if (stall && i === Math.floor(bytes.length / 2)) await new Promise(() => {}); // never
    if (seconds) await sleep((seconds * 1000) / bytes.length);
    yield bytes.subarray(i, i + 1);
  }
}
function breakAnswer(ctx, how) {
  const text = Buffer.from(JSON.stringify(ctx.body));
  if (how === 'not_json') {
    ctx.body = text.subarray(0, Math.floor(text.length / 2)).toString();
  } else if (how.startsWith('trickle:') || how === 'stall') {
    ctx.body = Readable.from(trickled(text, Number(how.split(':')[1] ?? 0), how === 'stall'));
  }
  ctx.type = 'application/json; charset=utf-8';
  say({ event: 'broken', how });
}

provider.on('grant.success', (ctx) => {
  say({
    event: 'token',
    grant_type: ctx.oidc.params.grant_type,
    status: ctx.status,
    refresh_token: Boolean(ctx.body?.refresh_token),
  });
  if (ctx.oidc.params.grant_type !== 'refresh_token') return;
  const how = takeFlag(settings.break_flag);
  if (how) breakAnswer(ctx, how);
  if (existsSync(settings.pause_flag)) {
    unlinkSync(settings.pause_flag);
    say({ event: 'paused' });
    process.kill(process.pid, 'SIGSTOP'); // the answer is sent once the test resumes us
  }
});
provider.on('grant.error', (ctx, error) => {
  say({
    event: 'token',
    grant_type: ctx.oidc.params?.grant_type,
    status: error.statusCode,
    error: error.error,
    reuse: error.error_detail === 'refresh token already used',
  });
});
provider.on('server_error', (_ctx, error) => { process.stderr.write(`${error.stack}\n`); });

// The grants of each account, so the admin can revoke them all.
const grantsOf = new Map();
provider.on('grant.saved', (grant) => {
  if (!grantsOf.has(grant.accountId)) grantsOf.set(grant.accountId, new Set());
  grantsOf.get(grant.accountId).add(grant.jti);
});

async function revokeAccount(sub) {
  const grants = grantsOf.get(sub) ?? new Set();
  grantsOf.delete(sub);
  for (const grantId of grants) {
    await Promise.all([provider.AccessToken, provider.RefreshToken, provider.AuthorizationCode]
      .map((model) => model.revokeByGrantId(grantId)));
    await provider.Grant.adapter.destroy(grantId);
  }
  return grants.size;
}

function isAdmin(req) {
  const given = Buffer.from(req.headers.authorization ?? '');
  const expected = Buffer.from(`Bearer ${settings.admin_token}`);
  return given.length === expected.length && timingSafeEqual(given, expected);
}

async function admin(req, res) {
  if (req.method !== 'POST') return res.writeHead(405).end();
  if (!isAdmin(req)) return res.writeHead(401).end();
  let body = '';
  for await (const chunk of req) body += chunk;
  const sub = new URLSearchParams(body).get('sub');
  if (!sub) return res.writeHead(400).end();
  const grants = await revokeAccount(sub);
  say({ event: 'revoked', grants });
  return res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ grants }));
}

provider.use(async (ctx, next) => {
  await next();
  if (ctx.path === '/device/auth' && ctx.status === 200 && ctx.body?.device_code) ctx.body.interval = 1;
});

const PORTAL_PAGE = '<html><body>Welcome to Hotel Wi-Fi: accept the terms to continue</body></html>';
const serveProvider = provider.callback();
server.on('request', (req, res) => {
  const path = new URL(req.url, issuer).pathname;
  if (path === '/token' && req.method === 'POST' && peekFlag(settings.break_flag) === 'html') {
    takeFlag(settings.break_flag); // a middlebox answers: the provider never sees the request
    say({ event: 'broken', how: 'html' });
    res.writeHead(200, { 'content-type': 'text/html; charset=utf-8' }).end(PORTAL_PAGE);
  } else if (path === '/admin/sync') { // a line after every line printed before it
    say({ event: 'sync', id: new URL(req.url, issuer).searchParams.get('id') });
    res.writeHead(204).end();
  } else if (path === '/admin/revoke') {
    admin(req, res).catch((error) => { process.stderr.write(`${error.stack}\n`); res.writeHead(500).end(); });
  } else {
    serveProvider(req, res);
  }
});
say({ event: 'listening', issuer });
