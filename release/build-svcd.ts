// Builds the sidecar as one self-contained executable (Node single-executable application):
//   node release/build-svcd.ts [--out bin] [--arch amd64|arm64] [--version V]
// writes <out>/svcd-linux-<arch> (default: this machine's architecture), which the control plane
// serves at /svcd (SVC_RELEASES_DIR, default bin) so the join command's download works.
// `npm run build:release` builds every artifact (both programs, both architectures, the npm package).
import { resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { buildExecutable, buildVersion, hostArch, RELEASE_ARCHES, type ReleaseArch } from './sea.ts';

const { values } = parseArgs({
  options: { out: { type: 'string', default: 'bin' }, version: { type: 'string' }, arch: { type: 'string' } },
});
const arch = (values.arch ?? hostArch()) as ReleaseArch;
if (!RELEASE_ARCHES.includes(arch)) throw new Error(`--arch must be amd64 or arm64, got '${arch}'`);
const started = Date.now();
const version = buildVersion(values.version);
const target = await buildExecutable('svcd', 'sidecar/main.ts', arch, resolve(values.out as string), version);
process.stdout.write(
  `built ${target} (svcd ${version}) in ${((Date.now() - started) / 1000).toFixed(1)} s\n`,
);
