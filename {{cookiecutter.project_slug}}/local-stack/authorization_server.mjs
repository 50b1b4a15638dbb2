// The local stack's authorization server: npm `oidc-provider` (a certified OpenID Provider) on
// loopback, so that this MCP server's OAuth can be tried on one machine: a host registers
// itself (RFC 7591), signs its user in (authorization code with PKCE), asks for a token for
// this server (RFC 8707 resource indicators) and gets a JWT access token (RFC 9068); a script
// can use the client credentials grant instead. start.py runs it; nothing else needs it.
//
// NOT FOR PRODUCTION: its sign-in page is oidc-provider's development one, which lets anyone
// who reaches it sign in under any name. It listens on 127.0.0.1 only.
//
//   node authorization_server.mjs <config.json>
//
// config.json (start.py writes it, mode 0600): {"port", "resource", "scopes": [...],
// "clients": [{"client_id", "client_secret", "scope"}], "opaque": false}. With "opaque" the
// access tokens are opaque strings, which the MCP server reads by introspection (RFC 7662). Prints "ready <issuer>" on stdout
// once listening; everything else goes to stderr.
import { generateKeyPairSync } from 'node:crypto';
import { readFileSync } from 'node:fs';

import Provider, { errors } from 'oidc-provider';

const config = JSON.parse(readFileSync(process.argv[2], 'utf8'));
// A new signing key every start: oidc-provider's built-in development keys are public, and a
// token signed with them would verify here for anyone.
const { privateKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
const signingKey = { ...privateKey.export({ format: 'jwk' }), kid: `local-${Date.now()}`, use: 'sig', alg: 'RS256' };
const issuer = `http://127.0.0.1:${config.port}`;

const provider = new Provider(issuer, {
  jwks: { keys: [signingKey] },
  scopes: ['openid', 'offline_access', ...config.scopes],
  clients: config.clients.map((client) => ({
    client_id: client.client_id,
    client_secret: client.client_secret,
    grant_types: ['client_credentials'],
    redirect_uris: [],
    response_types: [],
    ...(client.scope ? { scope: client.scope } : {}),
  })),
  // OAuth 2.1: every authorization code request carries PKCE.
  pkce: { required: () => true },
  // RFC 7662 makes `sub` optional and oidc-provider leaves it out of a client credentials
  // token's introspection; the MCP server needs a subject for every token (the client here).
  extraTokenClaims: (_ctx, token) => (token.kind === 'ClientCredentials' ? { sub: token.clientId } : undefined),
  features: {
    devInteractions: { enabled: true },
    registration: { enabled: true },
    clientCredentials: { enabled: true },
    introspection: { enabled: true },
    revocation: { enabled: true },
    resourceIndicators: {
      enabled: true,
      defaultResource: () => config.resource,
      useGrantedResource: () => true,
      getResourceServerInfo: (_ctx, resourceIndicator) => {
        if (resourceIndicator !== config.resource) {
          throw new errors.InvalidTarget(`this authorization server knows only ${config.resource}`);
        }
        return {
          scope: config.scopes.join(' '),
          audience: config.resource,
          accessTokenTTL: 3600,
          ...(config.opaque ? { accessTokenFormat: 'opaque' } : { accessTokenFormat: 'jwt', jwt: { sign: { alg: 'RS256' } } }),
        };
      },
    },
  },
});
provider.on('server_error', (_ctx, error) => process.stderr.write(`server_error: ${error}\n`));
const server = provider.listen(config.port, '127.0.0.1', () => {
  process.stdout.write(`ready ${issuer}\n`);
});
for (const signal of ['SIGTERM', 'SIGINT']) {
  process.on(signal, () => server.close(() => process.exit(0)));
}
