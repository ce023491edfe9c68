// The agent's processes at freeze time, for the grading record: a daemon the agent left running
// shows up here. Read with the engine's `top` (ps on the host over the container's cgroup), which
// works on a paused container.
import type Docker from 'dockerode';

export const MAX_PROCESSES = 200;

/** `<pid> <user> <command line>` per process, at most MAX_PROCESSES. */
export async function processList(docker: Docker, containerId: string): Promise<string[]> {
  try {
    const top = (await docker.getContainer(containerId).top({ ps_args: '-o pid,user,args' })) as {
      Titles: string[];
      Processes: string[][];
    };
    return (top.Processes ?? []).slice(0, MAX_PROCESSES).map((row) => row.join(' ').slice(0, 500));
  } catch (err) {
    return [`(process list unavailable: ${(err as Error).message.slice(0, 200)})`];
  }
}
