// A real OAuth 2.1 / OpenID Connect authorization server for the resource-server tests:
// npm `oidc-provider` (a certified OpenID Provider), on loopback, issuing access tokens by the
// client credentials grant for its resources (RFC 8707 resource indicators): JWTs (RFC 9068)
// for `resource`, opaque ones for `opaqueResource` (read by introspection, RFC 7662, which
// the MCP server asks as the client `resourceServer`); tokens can be revoked (RFC 7009).
//
//   node oidc_provider.mjs <node_modules> <config.json>
//
// config.json: {"port", "jwks": {"keys": [private JWKs]}, "resource", "opaqueResource",
// "scopes": [...], "clients": [{"client_id", "client_secret", "scope"}], "resourceServer":
// {"client_id", "client_secret"}, "accessTokenTtl"}. The test writes it
// (and holds the private keys, so it can also sign tokens the provider never would). Prints
// "ready <issuer>" on stdout once listening; everything else goes to stderr. Nothing here is
// shipped in a generated project.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';

const [modules, configPath] = process.argv.slice(2);
const config = JSON.parse(readFileSync(configPath, 'utf8'));
const entry = JSON.parse(readFileSync(join(modules, 'oidc-provider', 'package.json'), 'utf8'));
const main = typeof entry.exports === 'string' ? entry.exports : entry.main ?? 'lib/index.js';
const { default: Provider, errors } = await import(
  pathToFileURL(join(modules, 'oidc-provider', main)).href
);

const issuer = `http://127.0.0.1:${config.port}`;
const clients = [...config.clients];
if (config.resourceServer) clients.push({ ...config.resourceServer });
const formats = { [config.resource]: 'jwt' };
if (config.opaqueResource) formats[config.opaqueResource] = 'opaque';
const provider = new Provider(issuer, {
  clients: clients.map((client) => ({
    client_id: client.client_id,
    client_secret: client.client_secret,
    grant_types: ['client_credentials'],
    redirect_uris: [],
    response_types: [],
    ...(client.scope ? { scope: client.scope } : {}),
  })),
  jwks: config.jwks,
  scopes: config.scopes,
  // RFC 7662 makes `sub` optional and oidc-provider leaves it out of a client credentials
  // token's introspection; the MCP server needs a subject for every token (the client here).
  extraTokenClaims: (_ctx, token) => (token.kind === 'ClientCredentials' ? { sub: token.clientId } : undefined),
  features: {
    devInteractions: { enabled: false },
    clientCredentials: { enabled: true },
    introspection: { enabled: true },
    revocation: { enabled: true },
    resourceIndicators: {
      enabled: true,
      defaultResource: () => config.resource,
      useGrantedResource: () => true,
      getResourceServerInfo: (_ctx, resourceIndicator) => {
        const format = formats[resourceIndicator];
        if (format === undefined) {
          throw new errors.InvalidTarget(`unknown resource ${resourceIndicator}`);
        }
        return {
          scope: config.scopes.join(' '),
          audience: resourceIndicator,
          accessTokenTTL: config.accessTokenTtl ?? 600,
          accessTokenFormat: format,
          ...(format === 'jwt' ? { jwt: { sign: { alg: 'RS256' } } } : {}),
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
