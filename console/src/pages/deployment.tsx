// One deployment: every phase with its status, duration and evidence, following the deployment
// live. The event stream says when it started and finished (and what its commands report);
// phases move between those without an event, so while it runs the page also re-reads it every
// two seconds.
import { useEffect } from 'preact/hooks';
import { Link, useSearch } from 'wouter-preact';
import { api } from '../api.ts';
import { useLive } from '../live.ts';
import { duration, ErrorNote, Evidence, Loading, Page, Status, Table, useLoad, When } from '../ui.tsx';

const REREAD_MS = 2000;

export function DeploymentPage() {
  const id = new URLSearchParams(useSearch()).get('id') ?? '';
  const dep = useLoad(() => api.deployment(id), [id]);
  const d = dep.data?.deployment;
  const running = d !== undefined && !d.FinishedAt;
  useLive(id ? `dep:${id}` : undefined, { onEvent: dep.reload, onOpen: dep.reload });
  useEffect(() => {
    if (!running) return;
    const t = setInterval(dep.reload, REREAD_MS);
    return () => clearInterval(t);
  }, [running, dep.reload]);
  if (!id) return <Page title="Deployment">No deployment id in the address (?id=).</Page>;
  return (
    <Page title={`Deployment ${id}`}>
      <ErrorNote error={dep.error} />
      {!dep.data && !dep.error && <Loading what="the deployment" />}
      {d && dep.data && (
        <>
          <dl class="facts">
            <dt>Kind</dt>
            <dd>{d.Kind}</dd>
            <dt>Status</dt>
            <dd aria-live="polite" data-testid="deployment-status">
              <Status value={d.Status} />
            </dd>
            <dt>Environment</dt>
            <dd>
              <Link href={`/env/?id=${encodeURIComponent(d.EnvID)}`}>{d.EnvID}</Link>
            </dd>
            <dt>Started</dt>
            <dd>
              <When at={d.CreatedAt} />
            </dd>
            <dt>Took</dt>
            <dd>{duration(d.CreatedAt, d.FinishedAt)}</dd>
            {d.Error && (
              <>
                <dt>Error</dt>
                <dd class="error">{d.Error}</dd>
              </>
            )}
          </dl>
          <Table caption="Phases" columns={['Phase', 'Status', 'Duration', 'Evidence']}>
            {dep.data.phases.map((p) => (
              <tr key={p.Seq}>
                <th scope="row">{p.Name}</th>
                <td>
                  <Status value={p.Status} />
                  {p.Error && <div class="error">{p.Error}</div>}
                </td>
                <td>{duration(p.StartedAt, p.FinishedAt)}</td>
                <td>
                  <Evidence value={p.Evidence} />
                </td>
              </tr>
            ))}
          </Table>
        </>
      )}
    </Page>
  );
}
