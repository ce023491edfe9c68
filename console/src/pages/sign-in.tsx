// Sign-in: the code host (when configured) and, on a local server with SVC_DEV_LOGIN=1, the dev
// login. Either way the session lands in storage and the page the user asked for renders.
import { useState } from 'preact/hooks';
import { useSearch } from 'wouter-preact';
import { api } from '../api.ts';
import { session } from '../session.ts';
import { ErrorNote, Loading, Page, useAction, useLoad } from '../ui.tsx';

export function SignIn() {
  const config = useLoad(() => api.config(), []);
  const search = useSearch();
  const userCode = new URLSearchParams(search).get('user_code');
  const [email, setEmail] = useState('');
  const [name, setName] = useState('');
  const [error, attempt] = useAction();
  const devLogin = (e: SubmitEvent) => {
    e.preventDefault();
    void attempt(async () => {
      session.signIn((await api.devLogin(email.trim(), name.trim() || undefined)).token);
    });
  };
  // Back to this very page (a device approval keeps its code) after the code host.
  const back = window.location.origin + window.location.pathname + window.location.search;
  return (
    <Page title="Sign in to svc">
      {userCode && <p>Sign in to approve the CLI sign-in with code {userCode}.</p>}
      <ErrorNote error={config.error} />
      {!config.data && !config.error && <Loading what="sign-in options" />}
      {config.data?.codehost_sign_in && (
        <p>
          <a class="button" href={`/auth/codehost/start?return=${encodeURIComponent(back)}`}>
            Sign in with your code host
          </a>
        </p>
      )}
      {config.data?.dev_login && (
        <form onSubmit={devLogin} aria-labelledby="dev-login-title">
          <h2 id="dev-login-title">Local dev login</h2>
          <p>This server runs with SVC_DEV_LOGIN=1: any email signs in. For local use only.</p>
          <label>
            Email
            <input
              type="email"
              required
              autoComplete="email"
              value={email}
              onInput={(e) => setEmail(e.currentTarget.value)}
            />
          </label>
          <label>
            Name (optional)
            <input autoComplete="name" value={name} onInput={(e) => setName(e.currentTarget.value)} />
          </label>
          <button type="submit">Dev login</button>
          <ErrorNote error={error} />
        </form>
      )}
      {config.data && !config.data.dev_login && !config.data.codehost_sign_in && (
        <p>
          This server offers no sign-in: configure SVC_CODEHOST_CLIENT_ID and SVC_CODEHOST_CLIENT_SECRET, or
          set SVC_DEV_LOGIN=1 on a local server.
        </p>
      )}
    </Page>
  );
}
