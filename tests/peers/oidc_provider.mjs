// A real OAuth 2.1 / OpenID Connect authorization server for the resource-server tests:
// npm `oidc-provider` (a certified OpenID Provider), on loopback, issuing JWT access tokens
// (RFC 9068) for one resource (RFC 8707 resource indicators) by the client credentials grant.
//
//   node oidc_provider.mjs <node_modules> <config.json>
//
// config.json: {"port", "jwks": {"keys": [private JWKs]}, "resource", "scopes": [...],
// "clients": [{"client_id", "client_secret", "scope"}], "accessTokenTtl"}. The test writes it
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
const provider = new Provider(issuer, {
  clients: config.clients.map((client) => ({
    client_id: client.client_id,
    client_secret: client.client_secret,
    grant_types: ['client_credentials'],
    redirect_uris: [],
    response_types: [],
    scope: client.scope,
  })),
  jwks: config.jwks,
  scopes: config.scopes,
  features: {
    devInteractions: { enabled: false },
    clientCredentials: { enabled: true },
    introspection: { enabled: true },
    resourceIndicators: {
      enabled: true,
      defaultResource: () => config.resource,
      useGrantedResource: () => true,
      getResourceServerInfo: (_ctx, resourceIndicator) => {
        if (resourceIndicator !== config.resource) {
          throw new errors.InvalidTarget(`unknown resource ${resourceIndicator}`);
        }
        return {
          scope: config.scopes.join(' '),
          audience: config.resource,
          accessTokenTTL: config.accessTokenTtl ?? 600,
          accessTokenFormat: 'jwt',
          jwt: { sign: { alg: 'RS256' } },
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
