// Where an image sandbox's create → first exec goes, phase by phase: the client's two requests,
// the deployment's phases and the gaps between them (the engine), each command row against the
// phase that sent it (the dispatcher and the stream), and the host's own steps from the `timings`
// evidence of `prepare` (env.create) and `snapshot` (env.snapshot). Older sidecars report no
// timings: those rows are then simply missing.
import type { Db } from '../../server/db/types.ts';

export type Profile = Record<string, number>;

interface PhaseRow {
  name: string;
  status: string;
  evidence: string | null;
  started_at: string | null;
  finished_at: string | null;
}

const ms = (a: string | null, b: string | null) => (a && b ? Date.parse(b) - Date.parse(a) : Number.NaN);

async function commandMs(db: Db, envId: string, kind: string): Promise<number> {
  const row = await db.get<{ created_at: string; finished_at: string }>(
    'SELECT created_at, finished_at FROM commands WHERE env_id = ? AND kind = ? ORDER BY created_at ASC, id ASC LIMIT 1',
    [envId, kind],
  );
  return row ? ms(row.created_at, row.finished_at) : Number.NaN;
}

/**
 * One run's profile. `t` holds the client's wall clock (Date.now()) at: POST sent, POST answered,
 * exec answered.
 */
export async function sandboxProfile(
  db: Db,
  depId: string,
  envId: string,
  t: { post: number; created: number; exec: number },
): Promise<Profile> {
  const dep = await db.get<{ created_at: string; finished_at: string }>(
    'SELECT created_at, finished_at FROM deployments WHERE id = ?',
    [depId],
  );
  const phases = await db.all<PhaseRow>(
    'SELECT name, status, evidence, started_at, finished_at FROM phases WHERE deployment_id = ? ORDER BY seq',
    [depId],
  );
  const p: Profile = {
    total: t.exec - t.post,
    'client: POST /v1/sandboxes': t.created - t.post,
    'client: first exec (POST exec)': t.exec - t.created,
    'cp: request → deployment row': dep ? Date.parse(dep.created_at) - t.post : Number.NaN,
    'cp: deployment finished → 201 sent': dep ? t.created - Date.parse(dep.finished_at) : Number.NaN,
  };
  let gaps = 0;
  let last = dep?.created_at ?? null;
  for (const ph of phases) {
    if (!ph.started_at) continue;
    gaps += ms(last, ph.started_at);
    last = ph.finished_at;
    p[`phase ${ph.name}${ph.status === 'skipped' ? ' (skipped)' : ''}`] = ms(ph.started_at, ph.finished_at);
    const ev = ph.evidence ? (JSON.parse(ph.evidence) as { timings?: Record<string, number> }) : {};
    for (const [k, v] of Object.entries(ev.timings ?? {})) p[`  ${ph.name} on host: ${k}`] = v;
  }
  p['cp: engine gaps between phases'] = gaps + (dep ? ms(last, dep.finished_at) : 0);
  const create = await commandMs(db, envId, 'env.create');
  const snap = await commandMs(db, envId, 'env.snapshot');
  const prepare = p['phase prepare'];
  const snapshot = p['phase snapshot'];
  p['  prepare: env.create row created → finished'] = create;
  p['  prepare: control plane around the command'] = prepare - create;
  p['  snapshot: env.snapshot row created → finished'] = snap;
  p['  snapshot: control plane around the command'] = snapshot - snap;
  p['  first exec: env.exec row created → finished'] = await commandMs(db, envId, 'env.exec');
  return p;
}
