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

/** argv after the script: [timeout seconds, target...]; prints `ok <target>` or `no <target> <why>`. */
export const SHELL_PROBE = `export LC_ALL=C
T=$1; shift
one() {
  local m
  if m=$( { exec 3<>"/dev/tcp/$1/$2"; } 2>&1 ); then echo "ok $3"; else m=\${m##*: }; echo "no $3 \${m//$'\\n'/ }"; fi
}
pids=()
for t in "$@"; do
  h=\${t%:*}; h=\${h#[}; h=\${h%]}
  one "$h" "\${t##*:}" "$t" & pids+=($!)
done
( sleep "$T" & s=$!; trap 'kill $s 2>/dev/null; exit 0' TERM; wait $s; kill "\${pids[@]}" 2>/dev/null ) & w=$!
wait "\${pids[@]}" 2>/dev/null
kill $w 2>/dev/null
wait $w 2>/dev/null
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
  const seen = new Map<string, { ok: boolean; error: string }>();
  for (const line of lines.slice(0, -1)) {
    const [verdict, target, ...why] = line.split(' ');
    if ((verdict !== 'ok' && verdict !== 'no') || !target) return null;
    seen.set(target, { ok: verdict === 'ok', error: verdict === 'ok' ? '' : why.join(' ') || 'failed' });
  }
  const self = seen.get(SELF_TARGET);
  const answered = self && (self.ok || self.error === 'Connection refused');
  return {
    selfcheck: answered ? 'ok' : (self?.error ?? 'timeout'),
    results: targets.map((target) => ({ target, ...(seen.get(target) ?? { ok: false, error: 'timeout' }) })),
  };
}
