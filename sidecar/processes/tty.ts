// A terminal's size before its command's first instruction. Docker 20.10 ignores an exec's
// ConsoleSize, so svcd sets the size by a resize once the exec has started (start.ts), and a command
// that reads the size as it starts (`stty size`, a full-screen program drawing its first screen)
// could run before that resize and see 0×0. So where the container has /bin/sh, a terminal's
// command starts as a few lines of POSIX sh that wait until `stty size` reports the size svcd sets,
// then `exec` the command: the same process, so its pid, signals, exit code and output are the
// command's, `ps` shows the command, and nothing reaches the terminal meanwhile (no input is sent
// to it, so nothing is echoed; stty's output is captured, its errors discarded). Before the exec the
// shell does what a spare exec does (docker/spare-line.ts): runc's lookup of the command, with
// Docker's own message and exit code 126 when it fails, and the environment a plain exec gets.
//
// The wait is bounded (a failed resize leaves the terminal 0×0: the command then starts anyway,
// as it did before), and where the size cannot be read (no `stty` in the image) it execs at once.
// These start the command directly, as before (its first instruction may then run before the
// resize): an image without /bin/sh; an environment the shell could not pass on unchanged (a name
// it would drop); a command whose name the shell's `exec` could take for an option.
import type Docker from 'dockerode';
import { MODE_DIR, statPath } from '../docker/archive.ts';
import { lookup, restoreFor } from '../docker/spare-line.ts';

/** The shell the wrapper runs in: POSIX sh is at this path in every image that has one. */
export const TTY_SHELL = '/bin/sh';

/** Polls of the size, ~10 ms apart: longer than svcd retries the resize (start.ts). */
const POLLS = 400;

// $1 $2: the size to wait for; the rest: the command. `sleep 0.01` where fractions are not
// understood fails at once: the poll count still bounds the wait.
const WAIT =
  'svc_w="$1 $2"; shift 2; svc_i=0; ' +
  `while [ "$svc_i" -lt ${POLLS} ]; do ` +
  'svc_s=$(stty size 2>/dev/null) || break; [ "$svc_s" = "$svc_w" ] && break; ' +
  'svc_i=$((svc_i + 1)); sleep 0.01 2>/dev/null; ' +
  'done';

/**
 * What a terminal's exec runs: `cmd` inside the sizing wrapper when the container has /bin/sh,
 * else `cmd`. `env`: the exec's environment, the container's (`NAME=value`) then the process's own.
 */
export async function sizedCommand(
  container: Docker.Container,
  service: string,
  cmd: string[],
  env: string[],
  tty: { rows: number; cols: number },
): Promise<string[]> {
  const restore = restoreFor(env);
  if (cmd[0]?.startsWith('-') || restore === null) return cmd;
  const shell = await statPath(container, service, TTY_SHELL).catch(() => null);
  if (!shell || (shell.mode & MODE_DIR) !== 0) return cmd;
  // Docker's message ends in CRLF, which the terminal makes of a newline.
  const script = `${WAIT}; ${lookup('', '\\n')}; ${restore}; exec "$@"`;
  return [TTY_SHELL, '-c', script, 'sh', String(tty.rows), String(tty.cols), ...cmd];
}
