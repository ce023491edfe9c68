// A test-only hook, armed only with SVC_TEST_HOOKS=1 (never set in production): it lets the fault
// suite (test/hardening/faults*.test.ts) stop one command at a known point in its middle — its
// handler has done its work, its result is neither stored nor sent — and inject a fault there
// without sleeps. `<data>/test-hold` names the command kind to hold once (or a point inside a
// handler, such as `env.snapshot:frozen`); it logs `test hook: holding <point> <id>`; SIGUSR2
// lets every held command go on.
import { readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';

export type Hold = (kind: string, id: string) => Promise<void>;

export function testHold(dataDir: string, log: (msg: string) => void): Hold | undefined {
  if (process.env.SVC_TEST_HOOKS !== '1') return undefined;
  const file = join(dataDir, 'test-hold');
  let waiting: (() => void)[] = [];
  process.on('SIGUSR2', () => {
    const go = waiting;
    waiting = [];
    for (const release of go) release();
  });
  return async (kind, id) => {
    let want = '';
    try {
      want = readFileSync(file, 'utf8').trim();
    } catch {
      return;
    }
    if (want !== kind) return;
    rmSync(file, { force: true });
    log(`test hook: holding ${kind} ${id}`);
    await new Promise<void>((release) => waiting.push(release));
    log(`test hook: released ${kind} ${id}`);
  };
}
