// The console's sign-in state: the session token and the chosen team, in localStorage so a CLI's
// device link opened in a new tab is already signed in. The token never goes in a URL; the one
// exception, the `#token=` fragment the code-host sign-in ends at, is taken and wiped from the
// address bar and history before anything renders (takeFragmentToken).

const TOKEN = 'svc.session';
const TEAM = 'svc.team';

type Listener = () => void;
const listeners = new Set<Listener>();

function read(key: string): string {
  try {
    return localStorage.getItem(key) ?? '';
  } catch {
    return '';
  }
}

function write(key: string, value: string): void {
  if (value) localStorage.setItem(key, value);
  else localStorage.removeItem(key);
  for (const l of listeners) l();
}

export const session = {
  token: () => read(TOKEN),
  team: () => read(TEAM),
  signIn(token: string): void {
    write(TOKEN, token);
  },
  setTeam(teamId: string): void {
    write(TEAM, teamId);
  },
  signOut(): void {
    localStorage.removeItem(TEAM);
    write(TOKEN, '');
  },
  subscribe(l: Listener): () => void {
    listeners.add(l);
    return () => listeners.delete(l);
  },
};

// Another tab signing in or out changes this one too.
window.addEventListener('storage', (e) => {
  if (e.key === TOKEN || e.key === TEAM) for (const l of listeners) l();
});

/** Moves `#token=dst_…` into storage and removes it from the URL and the history entry at once. */
export function takeFragmentToken(): void {
  const hash = window.location.hash;
  if (!hash.startsWith('#token=')) return;
  history.replaceState(history.state, '', window.location.pathname + window.location.search);
  const token = decodeURIComponent(hash.slice('#token='.length));
  if (/^dst_[A-Za-z0-9_-]{1,200}$/.test(token)) session.signIn(token);
}
