// When svcd runs as a single executable (the release binary served at /svcd), there is no
// separate `node` to run the egress probe with: the binary runs it itself with a hidden verb.
import { createRequire } from 'node:module';
import { PROBE_SOURCE } from './docker/egress.ts';

export const PROBE_VERB = '__egress-probe';

// require, not import(): the release bundle is CommonJS, where a dynamic import of a builtin
// from inside the embedded script is not available.
export async function isSingleExecutable(): Promise<boolean> {
  try {
    return (createRequire(process.execPath)('node:sea') as { isSea(): boolean }).isSea();
  } catch {
    return false;
  }
}

/** The probe command for ProbeOptions: `node -e` from a checkout, the binary's own verb when packaged. */
export async function probeCommand(): Promise<string[] | undefined> {
  return (await isSingleExecutable()) ? [process.execPath, PROBE_VERB] : undefined;
}

/** `svcd __egress-probe <targets json> <timeout ms>`: runs PROBE_SOURCE as `node -e` would. */
export function runProbeVerb(args: string[]): void {
  process.argv = [process.execPath, args[0] ?? '[]', args[1] ?? '4000'];
  new Function('require', PROBE_SOURCE)(createRequire(process.execPath));
}
