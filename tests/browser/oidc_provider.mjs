// A real OpenID provider for the sign-in tests: npm's oidc-provider (8.x, a certified
// implementation) on loopback, with a confidential client for Gantry, the device flow on,
// and people whose groups a test may change while it runs (so a removal is seen at the next
// refresh). Its development sign-in pages take any password; the login names the person.
//
// In a test: `const idp = await startProvider({...})`. As a process (for other test
// programs): node oidc_provider.mjs CONFIG.json, which writes {"issuer": ...} to
// CONFIG.json's `ready_file` and serves until killed.
import http from 'node:http';
import { generateKeyPairSync, randomBytes } from 'node:crypto';
import { readFileSync, writeFileSync, renameSync } from 'node:fs';
import Provider from 'oidc-provider';

// people: [{name, groups: [...], email?}]; redirectUris: Gantry's /auth/callback URL(s).
export async function startProvider({ people, clientId = 'gantry', clientSecret, redirectUris = [], port = 0,
  accessTtl = 3600 }) {
  const accounts = new Map(people.map((p) => [p.name, { ...p }]));
  const { privateKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
  const signing = { ...privateKey.export({ format: 'jwk' }), kid: `k-${randomBytes(4).toString('hex')}`, use: 'sig', alg: 'RS256' };
  const server = http.createServer();
  await new Promise((r) => server.listen(port, '127.0.0.1', r));
  const issuer = `http://127.0.0.1:${server.address().port}`;
  const provider = new Provider(issuer, {
    clients: [{
      client_id: clientId,
      client_secret: clientSecret,
      redirect_uris: redirectUris,
      post_logout_redirect_uris: redirectUris.map((u) => new URL(u).origin + '/'),
      grant_types: ['authorization_code', 'refresh_token', 'urn:ietf:params:oauth:grant-type:device_code'],
      response_types: ['code'],
      token_endpoint_auth_method: 'client_secret_basic',
    }],
    jwks: { keys: [signing] },
    features: {
      devInteractions: { enabled: true },
      deviceFlow: { enabled: true },
      revocation: { enabled: true },
      rpInitiatedLogout: { enabled: true },
    },
    scopes: ['openid', 'offline_access', 'profile', 'email', 'groups'],
    claims: { openid: ['sub'], profile: ['preferred_username', 'name'], email: ['email'], groups: ['groups'] },
    // The ID token carries every claim its scopes ask for (groups included), not only userinfo.
    conformIdTokenClaims: false,
    issueRefreshToken: async (ctx, client) => client.grantTypeAllowed('refresh_token'),
    ttl: { AccessToken: accessTtl, IdToken: 3600, RefreshToken: 86400, DeviceCode: 600, Interaction: 600, Session: 86400, Grant: 86400 },
    cookies: { keys: [randomBytes(16).toString('hex')] },
    async findAccount(ctx, id) {
      const person = accounts.get(id);
      if (!person) return undefined;
      return {
        accountId: id,
        async claims() {
          return { sub: id, preferred_username: id, name: id, email: person.email || `${id}@example.org`, groups: [...person.groups] };
        },
      };
    },
  });
  // The default "consent" asks again for scopes like offline_access each time; these tests
  // grant what the client asks.
  provider.proxy = false;
  const callback = provider.callback();
  server.on('request', (req, res) => {
    // Test control (loopback only): POST /test/groups/NAME with a JSON list of groups.
    const m = req.url.match(/^\/test\/groups\/([A-Za-z0-9_.-]+)$/);
    if (m && req.method === 'POST') {
      let body = '';
      req.on('data', (c) => { body += c; });
      req.on('end', () => {
        const person = accounts.get(m[1]);
        if (person) person.groups = JSON.parse(body);
        res.writeHead(person ? 204 : 404).end();
      });
      return;
    }
    callback(req, res);
  });
  return {
    issuer,
    provider,
    setGroups(name, groups) { accounts.get(name).groups = groups; },
    async stop() { await new Promise((r) => server.close(r)); },
  };
}

if (process.argv[1] && process.argv[1].endsWith('oidc_provider.mjs') && process.argv[2]) {
  const config = JSON.parse(readFileSync(process.argv[2], 'utf8'));
  const idp = await startProvider({ people: config.people, clientSecret: config.client_secret,
    redirectUris: config.redirect_uris, clientId: config.client_id || 'gantry', port: config.port || 0 });
  writeFileSync(config.ready_file + '.tmp', JSON.stringify({ issuer: idp.issuer }));
  renameSync(config.ready_file + '.tmp', config.ready_file);
}
