// One deployment: every phase with its status, duration and evidence, and its events, following
// the deployment live. The event stream (dep:<id>) brings each event as it is written and the page
// re-reads the deployment on each; phases also move between events, so while the deployment runs
// the page re-reads it every two seconds as well.
import { useCallback, useEffect, useState } from 'preact/hooks';
import { Link, useSearch } from 'wouter-preact';
import { api, type Event } from '../api.ts';
import { useLive } from '../live.ts';
import { duration, ErrorNote, Evidence, Loading, Page, Status, Table, useLoad, When } from '../ui.tsx';

const REREAD_MS = 2000;

export function DeploymentPage() {
  const id = new URLSearchParams(useSearch()).get('id') ?? '';
  const dep = useLoad(() => api.deployment(id), [id]);
  const d = dep.data?.deployment;
  const running = d !== undefined && !d.FinishedAt;
  const [events, setEvents] = useState<Event[]>([]);
  const add = useCallback((more: Event[]) => {
    setEvents((had) => {
      const known = new Set(had.map((e) => e.ID));
      const all = [...had, ...more.filter((e) => !known.has(e.ID))];
      return all.sort((a, b) => (a.ID < b.ID ? -1 : 1));
    });
  }, []);
  useLive(id ? `dep:${id}` : undefined, {
    onEvent: (e) => {
      add([e]);
      dep.reload();
    },
    // On every (re)connect: re-read the deployment and the events so far; the stream brings the rest.
    onOpen: () => {
      dep.reload();
      api.events(`dep:${id}`).then(
        (r) => add(r.events),
        () => {},
      );
    },
  });
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
            <dd aria-live="polite">
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
          <section aria-labelledby="events-title">
            <h2 id="events-title">Events</h2>
            <ol aria-label="Events" class="events">
              {events.map((e) => (
                <li key={e.ID}>
                  <When at={e.At} /> <strong>{e.Kind}</strong> <code>{JSON.stringify(e.Body)}</code>
                </li>
              ))}
            </ol>
          </section>
        </>
      )}
    </Page>
  );
}
