// Collection of project contexts: an upload is deleted, row and files, once it is older
// than the grace period (SVC_UPLOADS_GRACE, default 24 h), no deploy has named it for that long,
// and no version of an environment that still exists was deployed with it. A deploy in flight
// names its upload when it is parsed (used_at), before its version exists, so the grace period
// keeps it; a deploy that names an upload while it is being collected finds it gone (404) or keeps
// it (the row is deleted only if it is still stale). Files left without a row (a crash between
// the two deletions, an interrupted upload or repository download) go after the same grace period.
// The sweep runs every SVC_UPLOADS_SWEEP_EVERY seconds (default 3600; 0 turns it off), on one
// control-plane replica at a time: a pass holds the lease `uploads.sweep` (cluster/leases.ts) and
// gives it up when it ends; a replica that finds it held skips its pass, and a holder that died
// mid-pass is replaced once the lease lapses.
import { readdir, rm, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { guard } from '../../shared/faults.ts';
import type { Lease } from '../cluster/leases.ts';
import type { Db } from '../db/types.ts';
import { uploadInUse } from '../envs/store.ts';
import { deleteStaleUpload, knownUploads, staleUploads } from './store.ts';
import { archivePath, indexPath, UPLOAD_PREFIX } from './uploads.ts';

/** The sweep's lease; a pass (at most SWEEP_BATCH uploads) ends well within SWEEP_LEASE_MS. */
export const SWEEP_LEASE = 'uploads.sweep';
export const SWEEP_LEASE_MS = 10 * 60_000;

/** Uploads looked at per sweep; the next sweep takes the rest. */
const SWEEP_BATCH = 500;

interface SweepResult {
  /** Uploads deleted (row and files). */
  deleted: string[];
  /** Old uploads kept because a live version uses them. */
  kept: number;
  /** Files removed that had no row (or were left half-written). */
  orphans: number;
}

export async function sweepUploads(
  db: Db,
  dir: string,
  graceMs: number,
  at = Date.now(),
): Promise<SweepResult> {
  const before = new Date(at - graceMs).toISOString();
  const out: SweepResult = { deleted: [], kept: 0, orphans: 0 };
  for (const id of await staleUploads(db, before, SWEEP_BATCH)) {
    if (await uploadInUse(db, id)) {
      out.kept++;
      continue;
    }
    if (!(await deleteStaleUpload(db, id, before))) continue;
    await rm(archivePath(dir, id), { force: true });
    await rm(indexPath(dir, id), { force: true });
    out.deleted.push(id);
  }
  out.orphans = await removeOrphans(db, dir, at - graceMs);
  return out;
}

/** Files of the uploads directory older than `cutoff` with no row behind them. */
async function removeOrphans(db: Db, dir: string, cutoff: number): Promise<number> {
  const names = await readdir(dir).catch(() => [] as string[]);
  const old: string[] = [];
  for (const name of names) {
    const st = await stat(join(dir, name)).catch(() => null);
    if (st?.isFile() && st.mtimeMs < cutoff) old.push(name);
  }
  const idOf = (name: string) => (name.startsWith(UPLOAD_PREFIX) ? name.slice(0, name.indexOf('.')) : '');
  const ids = [...new Set(old.map(idOf).filter(Boolean))];
  const known = new Set<string>();
  for (let i = 0; i < ids.length; i += 200)
    for (const id of await knownUploads(db, ids.slice(i, i + 200))) known.add(id);
  let removed = 0;
  for (const name of old) {
    const temp = name.endsWith('.part') || name.endsWith('.download');
    const id = idOf(name);
    if (!temp && (!id || known.has(id))) continue;
    await rm(join(dir, name), { force: true });
    removed++;
  }
  return removed;
}

export interface SweepLog {
  info(o: object, m: string): void;
  warn(o: object, m: string): void;
}

/** Runs the sweep every `everyMs` (never two at once); logs what it removed. */
export class UploadSweeper {
  #timer: NodeJS.Timeout | null = null;
  #running: Promise<void> | null = null;
  readonly #db: Db;
  readonly #dir: string;
  readonly #graceMs: number;
  readonly #log: SweepLog;
  readonly #lease: Lease | null;
  /** Passes this replica ran (it held the lease), and passes it skipped (another held it). */
  passes = 0;
  skipped = 0;

  /** `lease`: the sweep's (SWEEP_LEASE); null runs every pass here (a lone process, tests). */
  constructor(db: Db, dir: string, graceMs: number, log: SweepLog, lease: Lease | null = null) {
    this.#db = db;
    this.#dir = dir;
    this.#graceMs = graceMs;
    this.#log = log;
    this.#lease = lease;
  }

  start(everyMs: number): void {
    if (everyMs <= 0 || this.#timer) return;
    this.#timer = setInterval(
      guard('uploads: sweep', () => void this.run()),
      everyMs,
    );
    this.#timer.unref();
  }

  /** One pass now, when no other replica runs one. */
  run(): Promise<void> {
    this.#running ??= this.#pass()
      .then((r) => {
        if (!r) return;
        if (r.deleted.length || r.orphans)
          this.#log.info(
            { deleted: r.deleted.length, kept: r.kept, orphans: r.orphans },
            'uploads collected',
          );
      })
      .catch((err: Error) => this.#log.warn({ err: err.message }, 'collecting uploads failed'))
      .finally(() => {
        this.#running = null;
      });
    return this.#running;
  }

  async #pass(): Promise<SweepResult | null> {
    if (this.#lease && !(await this.#lease.held())) {
      this.skipped++;
      return null;
    }
    try {
      this.passes++;
      return await sweepUploads(this.#db, this.#dir, this.#graceMs);
    } finally {
      await this.#lease?.release();
    }
  }

  async stop(): Promise<void> {
    if (this.#timer) clearInterval(this.#timer);
    this.#timer = null;
    await this.#running;
  }
}
