// Approving a CLI sign-in (`svc login`): the code from the link (or typed), the team the new API
// key belongs to, and Approve. A wrong, used or expired code is refused by the server and the
// page says so; nothing is approved.
import { useState } from 'preact/hooks';
import { useSearch } from 'wouter-preact';
import { api, type Me } from '../api.ts';
import { ErrorNote, Page, TeamOptions } from '../ui.tsx';

export function DevicePage({ me }: { me: Me }) {
  const fromLink = new URLSearchParams(useSearch()).get('user_code') ?? '';
  const [code, setCode] = useState(fromLink.slice(0, 32));
  const [team, setTeam] = useState(me.team.ID);
  const [name, setName] = useState('cli');
  const [error, setError] = useState('');
  const [done, setDone] = useState('');
  const [busy, setBusy] = useState(false);
  const approve = async (e: SubmitEvent) => {
    e.preventDefault();
    setError('');
    setBusy(true);
    try {
      await api.approveDevice(code.trim(), team, name.trim() || undefined);
      const teamName = me.teams.find((t) => t.ID === team)?.Name ?? team;
      setDone(`Approved: the CLI now receives an API key for team ${teamName}. You can close this page.`);
    } catch (err) {
      setError(`Not approved: ${(err as Error).message}`);
    } finally {
      setBusy(false);
    }
  };
  return (
    <Page title="Approve a CLI sign-in">
      <p>
        <code>svc login</code> printed a code. Approving it creates an API key for the team you choose and
        hands it to that CLI once. Approve only a code you started yourself.
      </p>
      {done ? (
        <p role="status" class="ok">
          {done}
        </p>
      ) : (
        <form onSubmit={approve}>
          <label>
            Code
            <input
              required
              maxLength={32}
              autoComplete="off"
              placeholder="XXXX-XXXX"
              class="code"
              value={code}
              onInput={(e) => setCode(e.currentTarget.value)}
            />
          </label>
          <label>
            Team
            <select value={team} onChange={(e) => setTeam(e.currentTarget.value)}>
              <TeamOptions teams={me.teams} />
            </select>
          </label>
          <label>
            Key name
            <input maxLength={100} value={name} onInput={(e) => setName(e.currentTarget.value)} />
          </label>
          <button type="submit" disabled={busy}>
            Approve
          </button>
          <ErrorNote error={error} />
        </form>
      )}
    </Page>
  );
}
