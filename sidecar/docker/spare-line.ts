// The shell text of a spare exec (see spare.ts): the script the spare starts with and
// the one line that hands it a command. Only POSIX sh and its builtins (dash, bash, busybox ash).
//
// The script prints READY, reads one line from stdin and evals it. The line re-creates the argv
// exactly as positional parameters (`set -- 'a' 'b'`: inside single quotes every byte but the
// quote itself is literal, so a quote is written `'\''` and a newline, which would end the line,
// is `'"$svc_n"'`, a variable holding one newline set by the script), then:
//
// - does the lookup runc does before it execs (a name with a slash must exist, be no directory
//   and be executable; a bare name must be an executable file in a $PATH directory), and when it
//   fails prints Docker's own message on stdout and exits 126, as a plain exec through the Engine
//   API does (checked on this machine's runc 1.1: `OCI runtime exec failed: exec failed: unable
//   to start container process: exec: "<argv0>": <reason>: unknown` + CRLF, exit 126);
// - restores the environment a plain exec gets: the shell exports PWD (dash, ash) and SHLVL (ash,
//   bash) and the script's own variables are visible to it, so each of those names is unset, or
//   set back to the container's own value when its config has one;
// - for a live process (processes/on-spare.ts), before all of that: `cd -P` to its working directory
//   (when that fails it prints NOGO and exits, so the caller runs the command the plain way and
//   Docker gives its own message), and `export` of its variables, so the lookup sees their $PATH,
//   as runc's does after its chdir and with the exec's environment in place;
// - prints GO and `exec "$@"`: the command replaces the shell, so its output, the end of the
//   stream, its exit code and its pid are the exec's. No GO on the stream means the line never
//   ran (the spare was killed first), so the caller may run the command the plain way instead.

/** The first byte a spare prints: it is listening for its command. */
export const READY = 0x06;
/** The byte a spare prints right before the command starts (or before Docker's refusal). */
export const GO = 0x07;

/** The byte a spare prints when its line declines (a working directory it cannot enter): nothing ran. */
export const NOGO = 0x15;

/**
 * Variables of svc's own shell code (a spare's, and a terminal's sizing wrapper's: processes/tty.ts),
 * plus the ones shells add, kept out of the command's environment.
 */
const OWN_VARS = ['svc_n', 'svc_l', 'svc_m', 'svc_p', 'svc_d', 'svc_w', 'svc_s', 'svc_i'];
const SHELL_VARS = ['PWD', 'OLDPWD', 'SHLVL'];

/** The `sh -c` script of a spare. The literal newline makes `svc_n` without a subshell. */
export const SPARE_SCRIPT = `svc_n='\n'; printf '\\00${READY.toString(8)}'; IFS= read -r svc_l || exit 0; eval "$svc_l"`;

/** Names a POSIX shell keeps in the environment it passes on; dash and ash drop any other. */
const SHELL_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;

/** One argument, single-quoted so that the shell reads back exactly these characters. */
export function shellQuote(arg: string): string {
  let out = "'";
  for (const ch of arg) {
    if (ch === "'") out += "'\\''";
    else if (ch === '\n') out += `'"$svc_n"'`;
    else out += ch;
  }
  return `${out}'`;
}

/**
 * What the line does before it execs, for a container whose config environment is `env`
 * (`NAME=value` entries), or null when a spare cannot give that container's commands the same
 * environment (a name the shell would drop).
 */
export function restoreFor(env: string[]): string | null {
  const values = new Map<string, string>();
  for (const entry of env) {
    const eq = entry.indexOf('=');
    const name = eq < 0 ? entry : entry.slice(0, eq);
    if (!SHELL_NAME.test(name)) return null;
    values.set(name, eq < 0 ? '' : entry.slice(eq + 1));
  }
  return [...SHELL_VARS, ...OWN_VARS]
    .map((name) => {
      const v = values.get(name);
      return v === undefined ? `unset ${name}` : `export ${name}=${shellQuote(v)}`;
    })
    .join('; ');
}

/**
 * runc's lookup (Go's exec.LookPath) of `$1` and its messages, each between `mark` and `eol`
 * (printf text); `$PATH` in svc_m is literal text.
 */
export const lookup = (mark: string, eol: string) =>
  [
    'svc_m=; case $1 in',
    '*/*) if [ ! -e "$1" ]; then svc_m="stat $1: no such file or directory";',
    'elif [ -d "$1" ] || [ ! -x "$1" ]; then svc_m=\'permission denied\'; fi;;',
    '*) svc_m=\'executable file not found in $PATH\'; svc_p="$PATH:";',
    // biome-ignore lint/suspicious/noTemplateCurlyInString: shell parameter expansion
    'while [ -n "$svc_p" ]; do svc_d=${svc_p%%:*}; svc_p=${svc_p#*:};',
    // biome-ignore lint/suspicious/noTemplateCurlyInString: shell parameter expansion
    'if [ -f "${svc_d:-.}/$1" ] && [ -x "${svc_d:-.}/$1" ]; then svc_m=; break; fi; done;;',
    'esac;',
    `if [ -n "$svc_m" ]; then printf '${mark}OCI runtime exec failed: exec failed: unable to start container process: exec: "%s": %s: unknown${eol}' "$1" "$svc_m"; exit 126; fi`,
  ].join(' ');
const LOOKUP = lookup(`\\00${GO.toString(8)}`, '\\r\\n');

/**
 * The line that makes a spare run `argv` (one line: no newline inside, one at the end); `setup`
 * (liveSetup) goes before the lookup.
 */
export function spareLine(argv: string[], restore: string, setup = ''): string {
  return `set -- ${argv.map(shellQuote).join(' ')}; ${setup}${LOOKUP}; ${restore}; printf '\\00${GO.toString(8)}'; exec "$@"\n`;
}

/**
 * What a live process's line does before the lookup: enter `cwd` (absolute, or '' for the
 * container's own) and export `env`. Null when the line cannot say it: a relative directory
 * (Docker refuses it with its own message), a NUL, a name the shell would drop, or one of the
 * line's own names (`svc_n` spells the newlines of the values after it).
 */
export function liveSetup(cwd: string, env: Record<string, string>): string | null {
  const parts: string[] = [];
  if (cwd) {
    if (!cwd.startsWith('/') || cwd.includes('\0')) return null;
    parts.push(`cd -P ${shellQuote(cwd)} 2>/dev/null || { printf '\\0${NOGO.toString(8)}'; exit 0; }; `);
  }
  for (const [name, value] of Object.entries(env)) {
    if (!SHELL_NAME.test(name) || OWN_VARS.includes(name) || value.includes('\0')) return null;
    parts.push(`export ${name}=${shellQuote(value)}; `);
  }
  return parts.join('');
}
