// Clouds: the team's provider credentials (secrets masked by the server) and a form to add one.
import { useState } from 'preact/hooks';
import { api } from '../api.ts';
import { ErrorNote, Loading, Page, Table, useAction, useLoad, When } from '../ui.tsx';

const PROVIDERS = ['manual', 'cloudvm', 'sandbox-a', 'sandbox-b'];

export function CloudsPage() {
  const got = useLoad(() => api.clouds(), []);
  const [provider, setProvider] = useState('manual');
  const [name, setName] = useState('');
  const [token, setToken] = useState('');
  const [error, attempt] = useAction();
  const add = (e: SubmitEvent) => {
    e.preventDefault();
    void attempt(async () => {
      await api.createCloud(provider, name.trim(), provider === 'manual' ? {} : { token });
      setName('');
      setToken('');
      got.reload();
    });
  };
  const clouds = got.data?.clouds;
  return (
    <Page title="Clouds">
      <ErrorNote error={got.error} />
      {!clouds && !got.error && <Loading what="clouds" />}
      {clouds && clouds.length === 0 && <p>No clouds yet.</p>}
      {clouds && clouds.length > 0 && (
        <Table caption="Clouds of this team" columns={['Name', 'Provider', 'Configuration', 'Created']}>
          {clouds.map((c) => (
            <tr key={c.ID}>
              <th scope="row">{c.Name}</th>
              <td>{c.Provider}</td>
              <td>
                <code>{JSON.stringify(c.Config)}</code>
              </td>
              <td>
                <When at={c.CreatedAt} />
              </td>
            </tr>
          ))}
        </Table>
      )}
      <form onSubmit={add} aria-labelledby="new-cloud">
        <h2 id="new-cloud">Add a cloud</h2>
        <label>
          Provider
          <select value={provider} onChange={(e) => setProvider(e.currentTarget.value)}>
            {PROVIDERS.map((p) => (
              <option key={p} value={p}>
                {p}
              </option>
            ))}
          </select>
        </label>
        <label>
          Cloud name (optional)
          <input maxLength={63} value={name} onInput={(e) => setName(e.currentTarget.value)} />
        </label>
        {provider !== 'manual' && (
          <label>
            API token
            <input
              type="password"
              required
              autoComplete="off"
              value={token}
              onInput={(e) => setToken(e.currentTarget.value)}
            />
          </label>
        )}
        <button type="submit">Add cloud</button>
        <ErrorNote error={error} />
      </form>
    </Page>
  );
}
