// An environment: status, endpoints, its versions with their fork lineage (what it was forked
// from, up the chain, in one answer of GET /v1/envs/{env}/lineage, and the forks made from each version), its deployments, and the actions
// that start a deployment (snapshot, fork, rollback, destroy), a terminal and a file browser in
// its services (terminal.tsx, files.tsx). Follows env:<id> live.
import { useState } from 'preact/hooks';
import { Link, useLocation, useSearch } from 'wouter-preact';
import { type Ancestor, api, type Deployment, type Environment, type Started, type Version } from '../api.ts';
import { FilesPanel } from '../files.tsx';
import { useLive } from '../live.ts';
import { TerminalPanel } from '../terminal.tsx';
import { duration, ErrorNote, Loading, Page, Status, Table, useAction, useLoad, When } from '../ui.tsx';

interface EnvData {
  env: Environment;
  connected: boolean;
  versions: Version[];
  deployments: Deployment[];
  siblings: Environment[];
  ancestors: Ancestor[];
}

async function loadEnv(id: string): Promise<EnvData> {
  const [{ environment: env, connected }, { versions }, { deployments }, { ancestors }] = await Promise.all([
    api.env(id),
    api.versions(id),
    api.envDeployments(id),
    api.lineage(id),
  ]);
  const { environments: siblings } = await api.projectEnvs(env.ProjectID);
  return { env, connected, versions, deployments, siblings, ancestors };
}

/** "2", or for a fork still on its source's snapshot "1 of alpha". */
function currentVersion({ env, versions, ancestors }: EnvData): string {
  const own = versions.find((v) => v.ID === env.CurrentVersionID);
  if (own) return String(own.Number);
  const from = ancestors[0];
  if (from?.version.ID === env.CurrentVersionID) return `${from.version.Number} of ${from.environment.Name}`;
  return env.CurrentVersionID || '—';
}

/** The services of the version the environment runs (its own, or for a fork its source's). */
function servicesOf({ env, versions, ancestors }: EnvData): string[] {
  const version =
    versions.find((v) => v.ID === env.CurrentVersionID) ??
    ancestors.find((a) => a.version.ID === env.CurrentVersionID)?.version;
  const spec = version?.Spec as { services?: { name?: unknown }[] } | undefined;
  const names = (Array.isArray(spec?.services) ? spec.services : []).map((s) => s?.name);
  return names.filter((n): n is string => typeof n === 'string');
}

const envLink = (e: Environment) => `/env/?id=${encodeURIComponent(e.ID)}`;

function Lineage({ data }: { data: EnvData }) {
  if (data.ancestors.length === 0) {
    return <p>{data.env.ParentVersionID ? 'Forked from a version that is gone.' : 'Not a fork.'}</p>;
  }
  return (
    <ol class="lineage" aria-label="Forked from">
      {data.ancestors.map((a) => (
        <li key={a.environment.ID}>
          Forked from version {a.version.Number} of{' '}
          <Link href={envLink(a.environment)}>{a.environment.Name}</Link>
        </li>
      ))}
    </ol>
  );
}

export function EnvPage() {
  const id = new URLSearchParams(useSearch()).get('id') ?? '';
  const got = useLoad(() => loadEnv(id), [id]);
  useLive(id ? `env:${id}` : undefined, { onEvent: got.reload, onOpen: got.reload });
  const [, navigate] = useLocation();
  const [forkName, setForkName] = useState('');
  const [confirming, setConfirming] = useState(false);
  const [error, attempt] = useAction();
  const act = (start: () => Promise<Started | { deployment: Deployment }>) =>
    attempt(async () => {
      const r = await start();
      navigate(`/deployment/?id=${encodeURIComponent(r.deployment.ID)}`);
    });
  const data = got.data;
  if (!data) {
    return (
      <Page title="Environment">
        <ErrorNote error={got.error} />
        {!got.error && <Loading what="the environment" />}
      </Page>
    );
  }
  const { env } = data;
  const forksOf = (v: Version) => data.siblings.filter((e) => e.ParentVersionID === v.ID && e.ID !== env.ID);
  const endpoints = Object.entries(env.Endpoints);
  const services = servicesOf(data);
  const live = services.length > 0 && env.Status !== 'destroyed';
  return (
    <Page title={`Environment ${env.Name}`}>
      <ErrorNote error={got.error} />
      <dl class="facts">
        <dt>Status</dt>
        <dd>
          <Status value={env.Status} />
        </dd>
        <dt>Stage</dt>
        <dd>{env.Stage}</dd>
        <dt>Host</dt>
        <dd>
          {env.HostID || '—'} ({data.connected ? 'connected' : 'not connected'})
        </dd>
        <dt>Current version</dt>
        <dd>{currentVersion(data)}</dd>
        <dt>Project</dt>
        <dd>
          <Link href={`/project/?name=${encodeURIComponent(env.ProjectID)}`}>{env.ProjectID}</Link>
        </dd>
      </dl>
      <section aria-labelledby="endpoints">
        <h2 id="endpoints">Endpoints</h2>
        {endpoints.length === 0 ? (
          <p>No published endpoints.</p>
        ) : (
          <ul>
            {endpoints.map(([k, v]) => (
              <li key={k}>
                {k}: <code>{v}</code>
              </li>
            ))}
          </ul>
        )}
      </section>
      {live && <TerminalPanel key={`t-${env.ID}`} envId={env.ID} services={services} />}
      {live && <FilesPanel key={`f-${env.ID}`} envId={env.ID} services={services} />}
      <section aria-labelledby="lineage">
        <h2 id="lineage">Lineage</h2>
        <Lineage data={data} />
      </section>
      <section aria-labelledby="versions">
        <h2 id="versions">Versions</h2>
        {data.versions.length === 0 ? (
          <p>No versions of its own yet.</p>
        ) : (
          <Table
            caption={`Versions of ${env.Name}`}
            columns={['Version', 'Healthy', 'Created', 'Forks', 'Actions']}
          >
            {data.versions.map((v) => (
              <tr key={v.ID}>
                <th scope="row">
                  {v.Number}
                  {v.ID === env.CurrentVersionID ? ' (current)' : ''}
                </th>
                <td>{v.Healthy ? 'yes' : 'no'}</td>
                <td>
                  <When at={v.CreatedAt} />
                </td>
                <td>
                  {forksOf(v).map((f) => (
                    <Link key={f.ID} href={envLink(f)} class="chip">
                      {f.Name}
                    </Link>
                  ))}
                </td>
                <td>
                  {v.Healthy && v.Snapshot && v.ID !== env.CurrentVersionID && (
                    <button type="button" onClick={() => act(() => api.rollback(env.ID, v.ID))}>
                      Roll back to version {v.Number}
                    </button>
                  )}
                </td>
              </tr>
            ))}
          </Table>
        )}
      </section>
      <section aria-labelledby="actions">
        <h2 id="actions">Actions</h2>
        <ErrorNote error={error} />
        <button type="button" onClick={() => act(() => api.snapshot(env.ID))}>
          Snapshot
        </button>
        <form
          onSubmit={(e) => {
            e.preventDefault();
            void act(() => api.fork(env.ID, forkName.trim() ? { name: forkName.trim() } : {}));
          }}
        >
          <label>
            Fork name (optional)
            <input maxLength={63} value={forkName} onInput={(e) => setForkName(e.currentTarget.value)} />
          </label>
          <button type="submit">Fork</button>
        </form>
        {confirming ? (
          <fieldset>
            <legend>Confirm destroy</legend>
            Destroy {env.Name} and its data on the host?{' '}
            <button type="button" class="danger" onClick={() => act(() => api.destroy(env.ID))}>
              Destroy {env.Name}
            </button>
            <button type="button" onClick={() => setConfirming(false)}>
              Cancel
            </button>
          </fieldset>
        ) : (
          <button type="button" class="danger" onClick={() => setConfirming(true)}>
            Destroy environment
          </button>
        )}
      </section>
      <section aria-labelledby="deployments">
        <h2 id="deployments">Deployments</h2>
        <Table
          caption={`Deployments of ${env.Name}, newest first`}
          columns={['Deployment', 'Kind', 'Status', 'Started', 'Took']}
        >
          {data.deployments.map((d) => (
            <tr key={d.ID}>
              <th scope="row">
                <Link href={`/deployment/?id=${encodeURIComponent(d.ID)}`}>{d.ID}</Link>
              </th>
              <td>{d.Kind}</td>
              <td>
                <Status value={d.Status} />
              </td>
              <td>
                <When at={d.CreatedAt} />
              </td>
              <td>{duration(d.CreatedAt, d.FinishedAt)}</td>
            </tr>
          ))}
        </Table>
      </section>
    </Page>
  );
}
