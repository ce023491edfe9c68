// API keys of the team: listed without material; a new key is shown once, to copy; revoke.
import { useState } from 'preact/hooks';
import { api } from '../api.ts';
import { CopyField, ErrorNote, Loading, Page, Table, useAction, useLoad, When } from '../ui.tsx';

export function KeysPage() {
  const got = useLoad(() => api.keys(), []);
  const [name, setName] = useState('');
  const [created, setCreated] = useState<{ name: string; key: string } | null>(null);
  const [error, attempt] = useAction();
  const create = (e: SubmitEvent) => {
    e.preventDefault();
    void attempt(async () => {
      const r = await api.createKey(name.trim());
      setCreated({ name: r.key.Name, key: r.api_key });
      setName('');
      got.reload();
    });
  };
  const revoke = (id: string) => {
    void attempt(async () => {
      await api.revokeKey(id);
      got.reload();
    });
  };
  const keys = got.data?.keys;
  return (
    <Page title="API keys">
      <ErrorNote error={got.error} />
      <form onSubmit={create} aria-labelledby="new-key">
        <h2 id="new-key">Create a key</h2>
        <label>
          Key name
          <input
            maxLength={100}
            placeholder="key"
            value={name}
            onInput={(e) => setName(e.currentTarget.value)}
          />
        </label>
        <button type="submit">Create key</button>
      </form>
      <ErrorNote error={error} />
      {created && (
        <section aria-labelledby="new-key-shown" class="once">
          <h2 id="new-key-shown">New key {created.name}</h2>
          <p>Copy it now: it is shown only this once.</p>
          <CopyField label="New API key" value={created.key} />
          <button type="button" onClick={() => setCreated(null)}>
            I have copied it
          </button>
        </section>
      )}
      {!keys && !got.error && <Loading what="keys" />}
      {keys && (
        <Table caption="Keys of this team" columns={['Name', 'ID', 'Created', 'Last used', 'State']}>
          {keys.map((k) => (
            <tr key={k.ID}>
              <th scope="row">{k.Name}</th>
              <td>
                <code>{k.ID}</code>
              </td>
              <td>
                <When at={k.CreatedAt} />
              </td>
              <td>
                <When at={k.LastUsedAt} />
              </td>
              <td>
                {k.RevokedAt ? (
                  <>
                    revoked <When at={k.RevokedAt} />
                  </>
                ) : (
                  <button
                    type="button"
                    onClick={() => revoke(k.ID)}
                    aria-label={`Revoke key ${k.Name} (${k.ID})`}
                  >
                    Revoke
                  </button>
                )}
              </td>
            </tr>
          ))}
        </Table>
      )}
    </Page>
  );
}
