// A real OpenID Connect provider for the single sign-on tests, on 127.0.0.1 in a process of its own.
//
// node provider.js: the port, the client and the users' file come from the environment
// (OIDC_TEST_PORT, and OIDC_TEST_FD: a socket bound to that port that the test hands down, to listen on;
// OIDC_TEST_CLIENT_ID, OIDC_TEST_CLIENT_SECRET, OIDC_TEST_REDIRECT_URI,
// OIDC_TEST_POST_LOGOUT_REDIRECT_URI, OIDC_TEST_USERS). The users' file is read again at every
// sign-in, so a test changes a person's groups between two sign-ins without a restart:
//   {"dana": {"email": "dana@example.test", "groups": ["handoff-ws7-approvers"]}}
// Sign-in uses oidc-provider's development interactions (a login form); consent is implied for
// the console, a first-party client, as a company's provider is usually set up.
import { readFileSync } from 'node:fs';
import Provider from 'oidc-provider';

const env = (name) => {
  const value = process.env[name];
  if (!value) throw new Error(`${name} is required`);
  return value;
};

const port = Number(env('OIDC_TEST_PORT'));
const issuer = `http://127.0.0.1:${port}`;
const usersFile = env('OIDC_TEST_USERS');
const clientId = env('OIDC_TEST_CLIENT_ID');

const users = () => JSON.parse(readFileSync(usersFile, 'utf8'));

const configuration = {
  clients: [{
    client_id: clientId,
    client_secret: env('OIDC_TEST_CLIENT_SECRET'),
    redirect_uris: [env('OIDC_TEST_REDIRECT_URI')],
    post_logout_redirect_uris: [env('OIDC_TEST_POST_LOGOUT_REDIRECT_URI')],
    grant_types: ['authorization_code'],
    response_types: ['code'],
    token_endpoint_auth_method: 'client_secret_post',
  }],
  claims: {
    openid: ['sub'],
    email: ['email', 'email_verified'],
    profile: ['preferred_username', 'name'],
    groups: ['groups'],
  },
  scopes: ['openid', 'email', 'profile', 'groups'],
  async findAccount(ctx, sub) {
    const user = users()[sub];
    if (!user) return undefined;
    return {
      accountId: sub,
      async claims() {
        // Read again here: the groups are the ones the file holds when the tokens are issued.
        const now = users()[sub] || {};
        return {
          sub,
          preferred_username: sub,
          name: sub,
          email: now.email,
          email_verified: true,
          groups: now.groups || [],
        };
      },
    };
  },
  async loadExistingGrant(ctx) {
    const grantId = ctx.oidc.result?.consent?.grantId
      || ctx.oidc.session.grantIdFor(ctx.oidc.client.clientId);
    if (grantId) return ctx.oidc.provider.Grant.find(grantId);
    if (ctx.oidc.client.clientId !== clientId) return undefined;
    const grant = new ctx.oidc.provider.Grant({
      clientId, accountId: ctx.oidc.session.accountId,
    });
    grant.addOIDCScope('openid email profile groups');
    await grant.save();
    return grant;
  },
  features: {
    devInteractions: { enabled: true },
    rpInitiatedLogout: { enabled: true },
  },
  pkce: { required: () => true },
  ttl: { IdToken: 300, AccessToken: 300, Session: 3600, Interaction: 600, Grant: 3600 },
};

const provider = new Provider(issuer, configuration);
const listenOn = process.env.OIDC_TEST_FD ? [{ fd: Number(process.env.OIDC_TEST_FD) }] : [port, '127.0.0.1'];
provider.listen(...listenOn, () => {
  // The fixture waits for this line before it reads the discovery document.
  console.log(`oidc-provider listening on ${issuer}`);
});
