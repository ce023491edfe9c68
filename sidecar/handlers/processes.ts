// The proc.* kinds: live processes in a service's container (sidecar/processes/table.ts). Input,
// resize and signal of one process run in its lane, in the order they arrived (lane.ts).

import type { ProcessTable } from '../processes/table.ts';
import type { Handlers } from '../runner.ts';

export function processHandlers(table: ProcessTable): Handlers {
  return {
    'proc.start': (cmd) => table.start(cmd.envId, cmd.payload),
    'proc.input': async (cmd) => {
      await table.control(cmd.envId, cmd.payload.pid, false, (hurry) =>
        table.input(cmd.envId, cmd.payload, hurry),
      );
      return {};
    },
    'proc.signal': async (cmd) => {
      await table.control(cmd.envId, cmd.payload.pid, true, () => table.signal(cmd.envId, cmd.payload));
      return {};
    },
    'proc.resize': async (cmd) => {
      await table.control(cmd.envId, cmd.payload.pid, false, () => table.resize(cmd.envId, cmd.payload));
      return {};
    },
    'proc.list': async (cmd) => ({ processes: table.list(cmd.envId, cmd.payload.pid) }),
    'proc.attach': async (cmd) => ({ process: table.attach(cmd.envId, cmd.payload) }),
    'proc.detach': async (cmd) => {
      table.detach(cmd.payload.follow);
      return {};
    },
  };
}
