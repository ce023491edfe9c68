// Whether this engine can bound a container's writable layer (compose `storage_opt: {size}`):
// only overlay2 on an XFS mounted with project quotas can. Read from the engine's driver and the
// mount options of its root directory (svcd runs on the same host), once per process.
import type Docker from 'dockerode';
import { mountOf } from '../storage/quota.ts';

let known: Promise<boolean> | undefined;

export function engineBoundsLayers(docker: Docker): Promise<boolean> {
  known ??= (async () => {
    try {
      const info = await docker.info();
      if (info.Driver !== 'overlay2') return false;
      const m = await mountOf(info.DockerRootDir);
      return m?.fstype === 'xfs' && m.superOpts.some((o) => o === 'prjquota' || o === 'pquota');
    } catch {
      return false;
    }
  })();
  return known;
}
