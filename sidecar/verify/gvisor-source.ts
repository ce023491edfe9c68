// Where a collected path lives on the host when the agent runs under gVisor. The host process of a
// gVisor container is its sandbox, whose root is not the agent's, so files are read where gVisor's
// gofer keeps them: a volume or bind under its host directory (Docker's mount source), anything
// else under the container's root file system (Docker's overlay `MergedDir`). Both are host paths
// the container cannot change; below them every component is pinned as under runc (copy.ts).
// gVisor keeps /tmp and /dev/shm in its own memory when no mount is there: the host cannot read
// them, so such a path is refused rather than reported missing.
import type Docker from 'dockerode';
import type { Source } from './copy.ts';
import { Refusal } from './limits.ts';
import { pinRoot } from './pinned.ts';

const IN_MEMORY = ['/tmp', '/dev', '/proc', '/sys'];

const within = (path: string, dir: string) => path === dir || path.startsWith(dir === '/' ? '/' : `${dir}/`);

export function gvisorSource(info: Docker.ContainerInspectInfo): Source {
  const merged = (info.GraphDriver?.Data as Record<string, string> | undefined)?.MergedDir;
  const mounts = (info.Mounts ?? [])
    .filter((m) => m.Source?.startsWith('/') && m.Destination?.startsWith('/'))
    .sort((a, b) => b.Destination.length - a.Destination.length);
  return async (path) => {
    const mount = mounts.find((m) => within(path, m.Destination));
    if (mount) return { root: await pinRoot(mount.Source), inner: path.slice(mount.Destination.length) };
    if (IN_MEMORY.some((dir) => within(path, dir)))
      throw new Refusal(path, "kept in gVisor's memory, which the host cannot read");
    if (!merged?.startsWith('/'))
      throw new Error(`the container has no root file system directory on the host to collect ${path} from`);
    return { root: await pinRoot(merged), inner: path };
  };
}
