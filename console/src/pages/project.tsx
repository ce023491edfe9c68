// A project: its environments (forks say what they were forked from) and a deploy form.
import { useState } from 'preact/hooks';
import { Link, useLocation, useSearch } from 'wouter-preact';
import { api } from '../api.ts';
import { ErrorNote, Loading, Page, Status, Table, useAction, useLoad, When } from '../ui.tsx';

export function ProjectPage() {
  const name = new URLSearchParams(useSearch()).get('name') ?? '';
  const envs = useLoad(() => api.projectEnvs(name), [name]);
  const templates = useLoad(() => api.templates(), []);
  const [, navigate] = useLocation();
  const [env, setEnv] = useState('alpha');
  const [compose, setCompose] = useState('');
  const [error, attempt] = useAction();
  const deploy = (e: SubmitEvent) => {
    e.preventDefault();
    void attempt(async () => {
      const r = await api.deploy(name, env.trim() || 'alpha', compose);
      navigate(`/deployment/?id=${encodeURIComponent(r.deployment.ID)}`);
    });
  };
  const list = envs.data?.environments;
  return (
    <Page title={`Project ${name}`}>
      <ErrorNote error={envs.error} />
      {!list && !envs.error && <Loading what="environments" />}
      {list && (
        <Table caption="Environments" columns={['Name', 'Stage', 'Status', 'Host', 'Created']}>
          {list.map((e) => (
            <tr key={e.ID}>
              <th scope="row">
                <Link href={`/env/?id=${encodeURIComponent(e.ID)}`}>{e.Name}</Link>
              </th>
              <td>{e.Stage}</td>
              <td>
                <Status value={e.Status} />
              </td>
              <td>{e.HostID || '—'}</td>
              <td>
                <When at={e.CreatedAt} />
              </td>
            </tr>
          ))}
        </Table>
      )}
      <form onSubmit={deploy} aria-labelledby="deploy-title">
        <h2 id="deploy-title">Deploy</h2>
        <label>
          Environment
          <input required maxLength={63} value={env} onInput={(e) => setEnv(e.currentTarget.value)} />
        </label>
        {templates.data && templates.data.templates.length > 0 && (
          <label>
            Start from a template (optional)
            <select
              value=""
              onChange={(e) => {
                const t = templates.data?.templates.find((x) => x.name === e.currentTarget.value);
                if (t) setCompose(t.compose);
              }}
            >
              <option value="">choose a template…</option>
              {templates.data.templates.map((t) => (
                <option key={t.name} value={t.name}>
                  {t.name}: {t.description}
                </option>
              ))}
            </select>
          </label>
        )}
        <label>
          Compose file
          <textarea
            required
            rows={12}
            spellcheck={false}
            value={compose}
            onInput={(e) => setCompose(e.currentTarget.value)}
          />
        </label>
        <button type="submit">Deploy</button>
        <ErrorNote error={error} />
      </form>
    </Page>
  );
}
