// Hosts and targets: the sidecars and driver hosts of the team, and a join token whose install
// command is ready to copy onto a new machine.
import { useState } from 'preact/hooks';
import { api } from '../api.ts';
import { CopyField, ErrorNote, Loading, Page, Status, Table, useAction, useLoad, When } from '../ui.tsx';

function caps(c: Record<string, unknown>): string {
  const parts = [c.os && c.arch ? `${c.os}/${c.arch}` : '', c.cpus ? `${c.cpus} CPU` : ''];
  if (c.memory_mb) parts.push(`${Math.round(Number(c.memory_mb) / 1024)} GiB`);
  if (c.storage) parts.push(`storage ${c.storage}`);
  return parts.filter(Boolean).join(', ') || '—';
}

/** Downloads the CLI's single executable for this machine's architecture from this control plane. */
export const cliInstallLine = (origin: string): string =>
  `curl -fsSL ${origin}/svc-linux-$(uname -m | sed 's/x86_64/amd64/;s/aarch64/arm64/') -o svc && chmod +x svc && sudo mv svc /usr/local/bin/`;

export function HostsPage() {
  const got = useLoad(async () => {
    const [h, t, c] = await Promise.all([api.hosts(), api.targets(), api.clouds()]);
    return { hosts: h.hosts, targets: t.targets, clouds: c.clouds };
  }, []);
  const [cloud, setCloud] = useState('');
  const [join, setJoin] = useState<{ command: string; expires_in_sec: number } | null>(null);
  const [error, attempt] = useAction();
  const mint = (e: SubmitEvent) => {
    e.preventDefault();
    void attempt(async () => {
      setJoin(await api.joinToken(cloud || undefined));
    });
  };
  const data = got.data;
  return (
    <Page title="Hosts and targets">
      <ErrorNote error={got.error} />
      {!data && !got.error && <Loading what="hosts" />}
      <section aria-labelledby="join">
        <h2 id="join">Add a machine</h2>
        <p>
          Run the command as root on a Linux machine with Docker: it installs the sidecar, which joins this
          team.
        </p>
        <form onSubmit={mint}>
          {data && data.clouds.length > 0 && (
            <label>
              Cloud (optional)
              <select value={cloud} onChange={(e) => setCloud(e.currentTarget.value)}>
                <option value="">none</option>
                {data.clouds.map((c) => (
                  <option key={c.ID} value={c.ID}>
                    {c.Name} ({c.Provider})
                  </option>
                ))}
              </select>
            </label>
          )}
          <button type="submit">Create join token</button>
        </form>
        <ErrorNote error={error} />
        {join && (
          <>
            <CopyField label="Join command" value={join.command} multiline />
            <p>The token works for {Math.round(join.expires_in_sec / 60)} minutes.</p>
          </>
        )}
      </section>
      <section aria-labelledby="cli">
        <h2 id="cli">Get the svc CLI</h2>
        <p>A single executable for Linux (amd64 or arm64), no Node needed; then run svc login.</p>
        <CopyField label="Install command" value={cliInstallLine(location.origin)} multiline />
      </section>
      {data && (
        <>
          {data.hosts.length === 0 ? (
            <p>No hosts yet: add a machine above.</p>
          ) : (
            <Table caption="Hosts" columns={['Name', 'Kind', 'Status', 'Capabilities', 'Last seen']}>
              {data.hosts.map((h) => (
                <tr key={h.ID}>
                  <th scope="row">
                    {h.Name || h.ID} <small>{h.ID}</small>
                  </th>
                  <td>{data.targets.find((t) => t.ID === h.ID)?.kind ?? 'sidecar'}</td>
                  <td>
                    <Status value={h.Status} />
                  </td>
                  <td>{caps(h.Capabilities)}</td>
                  <td>
                    <When at={h.LastSeenAt} />
                  </td>
                </tr>
              ))}
            </Table>
          )}
          <Table caption="Targets for placement" columns={['Name', 'Kind', 'Provider', 'Connected']}>
            {data.targets.map((t) => (
              <tr key={t.ID}>
                <th scope="row">{t.Name || t.ID}</th>
                <td>{t.kind}</td>
                <td>{t.provider ?? '—'}</td>
                <td>{t.connected ? 'yes' : 'no'}</td>
              </tr>
            ))}
          </Table>
        </>
      )}
    </Page>
  );
}
