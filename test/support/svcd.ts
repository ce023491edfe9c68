// The argv that runs the source svcd's `join` against a test server, shared by the e2e harness,
// the sidecar protocol tests and the benchmarks.
import { join } from 'node:path';

/** `programs/svcd.ts join <credential flags> --state … --data …`. */
function joinArgs(credential: string[], stateDir: string, dataDir: string): string[] {
  return [
    'programs/svcd.ts',
    'join',
    ...credential,
    '--state',
    join(stateDir, 'host.json'),
    '--data',
    dataDir,
  ];
}

/** `programs/svcd.ts join …` with the state file in `stateDir` and data in `dataDir` (default `<stateDir>/data`). */
export function svcdJoinArgs(
  server: string,
  token: string,
  stateDir: string,
  dataDir = join(stateDir, 'data'),
): string[] {
  return joinArgs(['--server', server, '--token', token], stateDir, dataDir);
}

/** `programs/svcd.ts join --env-file <file> …`: how a provisioned machine's join.env is used. */
export function svcdEnvFileArgs(
  envFile: string,
  stateDir: string,
  dataDir = join(stateDir, 'data'),
): string[] {
  return joinArgs(['--env-file', envFile], stateDir, dataDir);
}
