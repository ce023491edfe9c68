// The team's projects, and a form to create one (which also creates its `alpha` environment).
import { useState } from 'preact/hooks';
import { Link, useLocation } from 'wouter-preact';
import { api } from '../api.ts';
import { ErrorNote, Loading, Page, Table, useAction, useLoad, When } from '../ui.tsx';

export function ProjectsPage() {
  const list = useLoad(() => api.projects(), []);
  const [, navigate] = useLocation();
  const [name, setName] = useState('');
  const [kind, setKind] = useState('rl-environment');
  const [error, attempt] = useAction();
  const create = (e: SubmitEvent) => {
    e.preventDefault();
    void attempt(async () => {
      const r = await api.createProject(name.trim(), kind);
      navigate(`/project/?name=${encodeURIComponent(r.project.Name)}`);
    });
  };
  const projects = list.data?.projects;
  return (
    <Page title="Projects">
      <ErrorNote error={list.error} />
      {!projects && !list.error && <Loading what="projects" />}
      {projects && projects.length === 0 && <p>No projects yet. Create one below.</p>}
      {projects && projects.length > 0 && (
        <Table caption="Projects of this team" columns={['Name', 'Kind', 'Source', 'Created']}>
          {projects.map((p) => (
            <tr key={p.ID}>
              <th scope="row">
                <Link href={`/project/?name=${encodeURIComponent(p.Name)}`}>{p.Name}</Link>
              </th>
              <td>{p.Kind}</td>
              <td>{p.Source || '—'}</td>
              <td>
                <When at={p.CreatedAt} />
              </td>
            </tr>
          ))}
        </Table>
      )}
      <form onSubmit={create} aria-labelledby="new-project">
        <h2 id="new-project">New project</h2>
        <label>
          Project name
          <input required maxLength={63} value={name} onInput={(e) => setName(e.currentTarget.value)} />
        </label>
        <label>
          Kind
          <select value={kind} onChange={(e) => setKind(e.currentTarget.value)}>
            <option value="rl-environment">rl-environment</option>
            <option value="agent">agent</option>
          </select>
        </label>
        <button type="submit">Create project</button>
        <ErrorNote error={error} />
      </form>
    </Page>
  );
}
