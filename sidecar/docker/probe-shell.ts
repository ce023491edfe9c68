// The egress probe as a bash script: the same TCP connects as PROBE_SOURCE (egress.ts), from the
// same network namespace (nsenter), for ~10 ms of host CPU instead of a Node process's ~40 ms,
// which was a tenth of a whole sandbox lifecycle's. Each target is connected to by a forked
// subshell through bash's /dev/tcp; a watchdog kills what has not answered within the timeout,
// and a target with no line is a timeout. The self-check is a connect to a loopback port: an
// answer (connected, or refused by the kernel's reset) shows the namespace has a working stack.
// Used when the host has bash; the Node probe otherwise.
import { access, constants } from 'node:fs/promises';

/** A loopback port the self-check connects to: refused or accepted, either shows a working stack. */
export const SELF_TARGET = '127.0.0.1:1';

/**
 * argv after the script: [timeout seconds, target...]. Prints `ok <target>` or `no <target>` for
 * each target that answered, bash's own `…/dev/tcp/<host>/<port>: <reason>` line before each
 * `no`, and `end` last. Each connect is its own forked subshell, with no child of its own: the
 * watchdog's kill ends a connect still waiting, and nothing outlives the script. The watchdog is
 * itself ended by KILL (bash runs a TERM trap only once its `read` returns: up to the timeout).
 */
export const SHELL_PROBE = `export LC_ALL=C
T=$1; shift
pids=()
for t in "$@"; do
  h=\${t%:*}; h=\${h#[}; h=\${h%]}
  { { exec 3<>"/dev/tcp/$h/\${t##*:}"; } && echo "ok $t" || echo "no $t"; } 2>&1 & pids+=($!)
done
( read -r -t "$T" <> <(:); kill "\${pids[@]}" ) >/dev/null 2>&1 & w=$!; disown $w
wait "\${pids[@]}" 2>/dev/null
kill -KILL $w 2>/dev/null
echo end
`;

const BASH = ['/bin/bash', '/usr/bin/bash'];

/** The host's bash, or null (the Node probe is used then). */
export async function findBash(): Promise<string | null> {
  for (const path of BASH) {
    try {
      await access(path, constants.X_OK);
      return path;
    } catch {}
  }
  return null;
}

export interface ShellReport {
  selfcheck: string;
  results: { target: string; ok: boolean; error: string }[];
}

/**
 * The script's output as the Node probe reports it. Null when it did not run to its end (killed,
 * or not this script): that proves nothing.
 */
export function parseShellReport(stdout: string, targets: string[]): ShellReport | null {
  const lines = stdout.split('\n');
  if (lines.at(-1) === '') lines.pop();
  if (lines.at(-1) !== 'end') return null;
  const seen = new Map<string, boolean>();
  // bash names the address it could not connect to as host/port, the brackets of IPv6 dropped.
  const reasons = new Map<string, string>();
  for (const line of lines.slice(0, -1)) {
    if (line.startsWith('ok ') || line.startsWith('no ')) {
      seen.set(line.slice(3), line.startsWith('ok '));
      continue;
    }
    const at = line.indexOf('/dev/tcp/');
    const colon = line.indexOf(': ', at);
    if (at < 0 || colon < 0) continue;
    const address = line.slice(at + '/dev/tcp/'.length, colon);
    const slash = address.lastIndexOf('/');
    reasons.set(`${address.slice(0, slash)}:${address.slice(slash + 1)}`, line.slice(colon + 2));
  }
  const result = (target: string) => {
    const ok = seen.get(target);
    if (ok === undefined) return { target, ok: false, error: 'timeout' };
    const i = target.lastIndexOf(':');
    const bare = `${target.slice(0, i).replace(/^\[|\]$/g, '')}:${target.slice(i + 1)}`;
    return { target, ok, error: ok ? '' : (reasons.get(bare) ?? 'failed') };
  };
  const self = result(SELF_TARGET);
  return {
    selfcheck: self.ok || self.error === 'Connection refused' ? 'ok' : self.error,
    results: targets.map(result),
  };
}
