// panva's oidc-provider on a loopback port, for the interoperability tests.
//
// Usage: node provider.mjs SETTINGS.json. The settings (written by
// tests/support/providers/node.py) name the client, the token lifetime and the
// signing key. The provider listens on a free port of 127.0.0.1 and prints one JSON
// line per event on stdout: {"event":"listening","issuer":...} once, then
// {"event":"token","grant_type":...,"status":...,"refresh_token":true|false} for
// every token request, so a test can count refresh grants. No secret is printed.
//
// Sign-in uses the package's own development interactions (any login, any password,
// then a consent page), which a scripted browser completes with two form posts.
import { readFileSync } from 'node:fs';
import { createServer } from 'node:http';

import Provider from 'oidc-provider';

const settings = JSON.parse(readFileSync(process.argv[2], 'utf8'));
const say = (record) => process.stdout.write(`${JSON.stringify(record)}\n`);

const server = createServer();
await new Promise((resolve) => { server.listen(0, '127.0.0.1', resolve); });
const issuer = `http://127.0.0.1:${server.address().port}`;

const provider = new Provider(issuer, {
  clients: [{
    client_id: settings.client_id,
    application_type: 'native', // RFC 8252: any port of a loopback redirect URI
    token_endpoint_auth_method: 'none',
    grant_types: ['authorization_code', 'refresh_token'],
    response_types: ['code'],
    redirect_uris: settings.redirect_uris,
  }],
  jwks: { keys: [settings.signing_key] },
  cookies: { keys: [settings.cookie_key] },
  ttl: { AccessToken: settings.access_token_ttl },
  claims: { profile: ['name'], email: ['email', 'email_verified'] },
  features: { revocation: { enabled: true } },
  async findAccount(_ctx, sub) {
    return {
      accountId: sub,
      async claims() {
        return { sub, name: `Test ${sub}`, email: `${sub}@example.com`, email_verified: true };
      },
    };
  },
});

provider.on('grant.success', (ctx) => {
  say({
    event: 'token',
    grant_type: ctx.oidc.params.grant_type,
    status: ctx.status,
    refresh_token: Boolean(ctx.body?.refresh_token),
  });
});
provider.on('grant.error', (ctx, error) => {
  say({ event: 'token', grant_type: ctx.oidc.params?.grant_type, status: error.statusCode, error: error.error });
});
provider.on('server_error', (_ctx, error) => { process.stderr.write(`${error.stack}\n`); });

server.on('request', provider.callback());
say({ event: 'listening', issuer });
