// Under --dev, when the releases directory holds no CLI build, /svc-linux-* serves the CLI as one
// JavaScript file for Node >= 20 (the program of the npm package, release/npm-package.ts), bundled
// from cli/ at the first request. So in a fresh clone `curl …/svc-linux-amd64 -o svc && chmod +x svc`
// gives a working `./svc` with no build step; `npm run build:release` puts the single executables
// (no Node needed) in its place.
import { bundle } from './bundle.ts';

/**
 * The bundle wrapped so that it runs whatever module type the folder it is saved in declares: a
 * file without an extension under `"type": "module"` is loaded as an ES module, where `require`,
 * `module`, `exports` and `__dirname` do not exist, so they are made from `node:module` there.
 */
export function portableScript(cjs: string): string {
  return `#!/usr/bin/env node
// svc, the command-line client (Node >= 20), as served by svc-server --dev.
(function (program) {
  if (typeof require === 'function') return program(require, module, exports, __filename, __dirname);
  const file = process.argv[1];
  import('node:module').then(({ createRequire }) => {
    const m = { exports: {} };
    program(createRequire(file), m, m.exports, file, file.replace(/\\/[^/]*$/, '') || '/');
  });
})(function (require, module, exports, __filename, __dirname) {
${cjs}
});
`;
}

/** The served CLI, bundled once per server on first use; a failed bundle is tried again next time. */
export class DevCli {
  private built: Promise<Buffer> | null = null;
  private readonly version: string;

  constructor(version: string) {
    this.version = version;
  }

  script(): Promise<Buffer> {
    this.built ??= bundle({ entry: 'cli/main.ts', version: this.version, target: 'node20' }).then(
      (code) => Buffer.from(portableScript(code.toString('utf8'))),
      (err: Error) => {
        this.built = null;
        throw err;
      },
    );
    return this.built;
  }
}
