// Where a live process's exec comes from: the container's spare exec (docker/spare.ts) when the
// process can run there, else a plain Engine API exec (start.ts). A spare skips the exec create,
// runc's start and the container inspect a plain start makes, so a warm-pool claim's first command
// pays a pipe write. A spare runs as the container's default user, directory and environment, with
// a pipe for stdin, so a process takes one when:
// - it has no terminal (a spare's exec has none);
// - its user is unset or the container's default user (the same string: `root` for a container
//   whose default is unset goes the plain way, as runc may set other groups for a named user);
// - its directory is absolute and its variables are names the shell keeps (the line `cd`s and
//   `export`s before the lookup, spare-line.ts); a directory the shell cannot enter makes the line
//   decline, so Docker gives its own message on the plain start;
// - the container is not a gVisor one: svcd signals a process there through gVisor's task table,
//   found by the task that appears while its exec starts, and a spare's task was there before.
// With stdin wanted the spare's own stdin pipe is the process's: the shell reads its line one byte
// at a time and the start returns only after GO, so every input byte reaches the command.
// The start waits for the spare's answer: GO (the process is the spare's exec: its pid, output,
// end and exit code are the command's) or nothing ran (declined, or the spare died), and then the
// process starts the plain way, once. The next spare is started once the process ended or had a
// moment to start, whichever comes first, so its exec start does not compete with a short command.
import type { Duplex } from 'node:stream';
import type Docker from 'dockerode';
import type { Payloads } from '../../protocol/commands.ts';
import { guard } from '../../shared/faults.ts';
import type { DockerEngine } from '../docker/engine.ts';
import { DockerError, dockerMessage } from '../docker/errors.ts';
import { streamEnded } from '../docker/exec.ts';
import { Demuxer } from '../docker/mux.ts';
import { MAX_SPARE_LINE } from '../docker/spare.ts';
import { liveSetup, spareLine } from '../docker/spare-line.ts';
import { type SandboxTask, type SandboxTasks, startExec } from './start.ts';

/** How long a start waits for a spare to answer its line before the process counts as started. */
export const SPARE_ANSWER_WAIT_MS = 5000;
/** How long after a start on a spare the next spare starts, unless the process ended sooner. */
export const SPARE_REFILL_DELAY_MS = 250;

/** A live process's started exec. */
export interface Opened {
  exec: Docker.Exec;
  stream: Duplex;
  /** Under gVisor, the process in the sandbox (start.ts). */
  task: SandboxTask | null;
  /** Settles when the output ends; rejects when the stream failed. */
  ended: Promise<void>;
  /** Where the output goes from now on; a terminal's is all stdout. */
  pipe(sink: (kind: 'stdout' | 'stderr', data: Buffer) => void): void;
  /** Whether it runs on a spare exec (tests and diagnostics). */
  onSpare: boolean;
}

/** Starts `o`'s exec in its service's container: on the container's spare when it can, else plainly. */
export async function openProcess(engine: DockerEngine, tasks: SandboxTasks, o: Payloads['proc.start']) {
  // The last listing's container, proven by a ready spare in it (its stream ends with the container).
  const hint = engine.hinted(o.service);
  if (hint) {
    const onSpare = await startOnSpare(engine, hint, o);
    if (onSpare) return onSpare;
  }
  const c = await engine.find(o.service);
  if (c.state !== 'running')
    throw new DockerError(`start in service '${o.service}': its container is ${c.state}`);
  if (c.id !== hint) {
    engine.spares.dropStale(engine.project, o.service, c.id);
    const onSpare = await startOnSpare(engine, c.id, o);
    if (onSpare) return onSpare;
  }
  try {
    const { exec, stream, task } = await startExec(tasks, engine.docker.getContainer(c.id), o);
    return plain(exec, stream, task, Boolean(o.tty));
  } catch (err) {
    throw new DockerError(`start in service '${o.service}': ${dockerMessage(err)}`);
  }
}

function plain(exec: Docker.Exec, stream: Duplex, task: SandboxTask | null, tty: boolean): Opened {
  return {
    exec,
    stream,
    task,
    ended: streamEnded(stream),
    pipe(sink) {
      if (tty) stream.on('data', (chunk: Buffer) => sink('stdout', chunk));
      else {
        const demux = new Demuxer((type, payload) => sink(type === 2 ? 'stderr' : 'stdout', payload));
        stream.on('data', (chunk: Buffer) => demux.write(chunk));
      }
    },
    onSpare: false,
  };
}

/** `o` started on the spare of container `id`; null when it has none it can use, or nothing ran there. */
async function startOnSpare(
  engine: DockerEngine,
  id: string,
  o: Payloads['proc.start'],
): Promise<Opened | null> {
  if (o.tty || o.cmd.some((a) => a.includes('\0'))) return null;
  const setup = liveSetup(o.cwd, o.env);
  if (setup === null) return null;
  let line = '';
  const spare = engine.spares.take(id, (s) => {
    if (s.sandboxed || (o.user && o.user !== s.user)) return false;
    const restore = s.restoreWith(o.env);
    if (restore === null) return false;
    line = spareLine(o.cmd, restore, setup);
    return Buffer.byteLength(line) <= MAX_SPARE_LINE;
  });
  if (!spare) return null;
  const went = await spare.launch(line, o.stdin, SPARE_ANSWER_WAIT_MS);
  const { exec, stream } = spare;
  if (spare.went || spare.declined) {
    let done = false;
    const refill = guard('spare exec: the next one', () => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      void engine.spares.prepare(engine.docker, engine.project, o.service, id);
    });
    const timer = setTimeout(refill, SPARE_REFILL_DELAY_MS);
    spare.ended.then(refill, refill);
  }
  if (!went || !exec || !stream) return null;
  return {
    exec,
    stream,
    task: null,
    ended: spare.ended,
    pipe: (sink) => spare.pipe((type, payload) => sink(type === 2 ? 'stderr' : 'stdout', payload)),
    onSpare: true,
  };
}
