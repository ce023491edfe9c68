// The console's frame: a skip link, the banner with the main navigation, the team switch and sign
// out, and the page in <main>. Pages live under /app/ (wouter's base); page state that identifies
// an object is in the query (`?id=`, `?name=`, `?user_code=`), as the spec's links have it.
import { useEffect, useRef, useState } from 'preact/hooks';
import { Link, Route, Router, Switch, useLocation } from 'wouter-preact';
import { api, type Me } from './api.ts';
import { CloudsPage } from './pages/clouds.tsx';
import { DeploymentPage } from './pages/deployment.tsx';
import { DevicePage } from './pages/device.tsx';
import { EnvPage } from './pages/env.tsx';
import { HostsPage } from './pages/hosts.tsx';
import { KeysPage } from './pages/keys.tsx';
import { ProjectPage } from './pages/project.tsx';
import { ProjectsPage } from './pages/projects.tsx';
import { SignIn } from './pages/sign-in.tsx';
import { session } from './session.ts';
import { ErrorNote, Page, TeamOptions } from './ui.tsx';

function useSession(): { token: string; team: string } {
  const [s, set] = useState({ token: session.token(), team: session.team() });
  useEffect(() => session.subscribe(() => set({ token: session.token(), team: session.team() })), []);
  return s;
}

function NavLink({ href, children }: { href: string; children: string }) {
  const [location] = useLocation();
  const current = location === href || (href !== '/' && location.startsWith(href));
  return (
    <Link href={href} aria-current={current ? 'page' : undefined}>
      {children}
    </Link>
  );
}

function TeamSwitch({ me }: { me: Me }) {
  if (me.teams.length < 2) return <span class="team">Team: {me.team.Name}</span>;
  return (
    <label class="team">
      Team
      <select value={me.team.ID} onChange={(e) => session.setTeam(e.currentTarget.value)}>
        <TeamOptions teams={me.teams} />
      </select>
    </label>
  );
}

function Banner({ me }: { me: Me | undefined }) {
  return (
    <header class="banner">
      <Link href="/" class="brand">
        svc console
      </Link>
      {me && (
        <>
          <nav aria-label="Main">
            <NavLink href="/">Projects</NavLink>
            <NavLink href="/hosts/">Hosts and targets</NavLink>
            <NavLink href="/clouds/">Clouds</NavLink>
            <NavLink href="/keys/">API keys</NavLink>
          </nav>
          <TeamSwitch me={me} />
          <span class="who">{me.user?.Email}</span>
          <button type="button" onClick={() => session.signOut()}>
            Sign out
          </button>
        </>
      )}
    </header>
  );
}

function Pages({ me }: { me: Me }) {
  return (
    <Switch>
      <Route path="/">
        <ProjectsPage />
      </Route>
      <Route path="/project/">
        <ProjectPage />
      </Route>
      <Route path="/env/">
        <EnvPage />
      </Route>
      <Route path="/deployment/">
        <DeploymentPage />
      </Route>
      <Route path="/device/">
        <DevicePage me={me} />
      </Route>
      <Route path="/hosts/">
        <HostsPage />
      </Route>
      <Route path="/clouds/">
        <CloudsPage />
      </Route>
      <Route path="/keys/">
        <KeysPage />
      </Route>
      <Route>
        <Page title="Page not found">
          <p>
            There is no such page. <Link href="/">Go to your projects.</Link>
          </p>
        </Page>
      </Route>
    </Switch>
  );
}

/** After an in-app navigation, focus moves to <main> so assistive technology reads the new page. */
function useFocusOnNavigation(): void {
  const [location] = useLocation();
  const first = useRef(true);
  useEffect(() => {
    if (first.current) {
      first.current = false;
      return;
    }
    document.getElementById('main')?.focus({ preventScroll: false });
  }, [location]);
}

function Signed({ token, team }: { token: string; team: string }) {
  useFocusOnNavigation();
  const [me, setMe] = useState<Me | undefined>(undefined);
  const [error, setError] = useState('');
  useEffect(() => {
    setMe(undefined);
    api.me().then(setMe, (err: Error) => setError(err.message));
  }, [token, team]);
  return (
    <>
      <Banner me={me} />
      <main id="main" tabIndex={-1}>
        <ErrorNote error={error} />
        {/* A team switch remounts the pages, so nothing of the previous team stays on screen. */}
        {me && <Pages key={me.team.ID} me={me} />}
      </main>
    </>
  );
}

export function App() {
  const { token, team } = useSession();
  return (
    <Router base="/app">
      <a class="skip" href="#main">
        Skip to content
      </a>
      {token ? (
        <Signed token={token} team={team} />
      ) : (
        <>
          <Banner me={undefined} />
          <main id="main" tabIndex={-1}>
            <SignIn />
          </main>
        </>
      )}
    </Router>
  );
}
