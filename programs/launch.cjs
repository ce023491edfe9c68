// Runs one of this checkout's TypeScript programs on the Node the checkout pins (the node@24
// devDependency), whatever `node` started the launcher. npm links package.json's bins to the
// launchers, and a bin run from another folder (`npx --prefix <checkout> svc`) is started by the
// first `node` on PATH, often an older one that cannot run .ts sources at all. Plain CommonJS in
// plain syntax, so any Node from 16 on starts it and at least says what is missing.
'use strict';
const childProcess = require('node:child_process');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const url = require('node:url');

const NEEDED_MAJOR = 24;
/** Signals passed on to the program, as an exec would have let it receive them. */
const FORWARDED = ['SIGTERM', 'SIGHUP', 'SIGINT', 'SIGQUIT', 'SIGUSR2'];
/** What a terminal sends to its whole foreground process group, the program included. */
const FROM_TERMINAL = ['SIGINT', 'SIGQUIT'];

function realpathOrNull(p) {
  try {
    return fs.realpathSync(p);
  } catch (_e) {
    return null;
  }
}

/** The pinned Node binary, looked up from the launcher's real location (bins are symlinks). */
function pinnedNode(root) {
  const candidates = [path.join(root, 'node_modules', 'node', 'bin', 'node')];
  try {
    // Where npm placed the package when it is not directly under the checkout (a hoisted install).
    candidates.push(
      path.join(path.dirname(require.resolve('node/package.json', { paths: [root] })), 'bin', 'node'),
    );
  } catch (_e) {}
  for (let i = 0; i < candidates.length; i++) {
    try {
      fs.accessSync(candidates[i], fs.constants.X_OK);
      return fs.realpathSync(candidates[i]);
    } catch (_e) {}
  }
  return null;
}

/**
 * Whether this process is in its terminal's foreground process group: then a Ctrl-C reached the
 * program as well, and passing it on would deliver it twice (a second SIGINT ends a program that
 * is still shutting down after the first). Linux's /proc tells; elsewhere it is assumed not.
 */
function inTerminalForeground() {
  try {
    const stat = fs.readFileSync('/proc/self/stat', 'utf8');
    // Fields after the command name, which is in parentheses and may hold anything.
    const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    const pgrp = Number(f[2]);
    const ttyNr = Number(f[4]);
    const tpgid = Number(f[5]);
    return ttyNr !== 0 && tpgid === pgrp;
  } catch (_e) {
    return false;
  }
}

/** Ends this process the way the program ended: the same exit code, or death by the same signal. */
function endLike(code, signal) {
  if (signal) {
    process.removeAllListeners(signal);
    try {
      process.kill(process.pid, signal);
    } catch (_e) {}
    // A signal this process ignores (SIGPIPE in Node) leaves it alive: exit as a shell reports it.
    process.exit(128 + (os.constants.signals[signal] || 0));
  }
  process.exit(code === null ? 1 : code);
}

function spawnOn(node, script, name) {
  const child = childProcess.spawn(node, [script].concat(process.argv.slice(2)), { stdio: 'inherit' });
  FORWARDED.forEach((signal) => {
    process.on(signal, () => {
      if (FROM_TERMINAL.indexOf(signal) >= 0 && inTerminalForeground()) return;
      try {
        child.kill(signal);
      } catch (_e) {}
    });
  });
  child.on('error', (err) => {
    process.stderr.write(name + ': cannot start ' + node + ': ' + err.message + '\n');
    process.exit(1);
  });
  child.on('exit', endLike);
}

/** Runs `program` (a .ts file beside this launcher, or an absolute path) with this process's arguments. */
module.exports = function launch(program) {
  const root = path.resolve(fs.realpathSync(__dirname), '..');
  const script = path.resolve(root, 'programs', program);
  const name = path.basename(program).replace(/\.ts$/, '');
  const node = pinnedNode(root);
  const here = realpathOrNull(process.execPath);
  const major = Number(process.versions.node.split('.')[0]);
  if (node ? node === here : major >= NEEDED_MAJOR) {
    // Already the right Node (npx in the checkout puts it first on PATH): run the program here.
    import(url.pathToFileURL(script).href).catch((err) => {
      process.stderr.write(String(err instanceof Error ? err.stack : err) + '\n');
      process.exit(1);
    });
    return;
  }
  if (!node) {
    process.stderr.write(
      name +
        ': needs Node ' +
        NEEDED_MAJOR +
        ' or later, and this is Node ' +
        process.version +
        '; run `npm ci` in ' +
        root +
        ' to get the Node it pins\n',
    );
    process.exit(1);
  }
  spawnOn(node, script, name);
};
