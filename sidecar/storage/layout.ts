// Paths of the data directory layout (spec: "Sidecar program", data directory layout). Every
// backend mounts or places volumes at these paths. Names starting with '.' are ours (temporaries):
// valid names never start with a dot, so they can not collide with a volume or snapshot.
import { join, resolve } from 'node:path';
import { checkName } from './names.ts';

export class Layout {
  readonly dataDir: string;
  constructor(dataDir: string) {
    this.dataDir = resolve(dataDir);
  }
  envDir(envId: string): string {
    return join(this.dataDir, 'envs', checkName('env id', envId));
  }
  volDir(envId: string): string {
    return join(this.envDir(envId), 'vol');
  }
  volumePath(envId: string, volume: string): string {
    return join(this.volDir(envId), checkName('volume name', volume));
  }
  snapsDir(envId: string): string {
    return join(this.dataDir, 'snaps', checkName('env id', envId));
  }
  snapDir(envId: string, snapshot: string): string {
    return join(this.snapsDir(envId), checkName('snapshot name', snapshot));
  }
  /** A snapshot being written; renamed to snapDir once complete. */
  snapTemp(envId: string, snapshot: string): string {
    return join(this.snapsDir(envId), `.${checkName('snapshot name', snapshot)}.tmp`);
  }
  /** Rollback's new content, swapped in by rename. */
  volNew(envId: string, volume: string): string {
    return join(this.volDir(envId), `.${checkName('volume name', volume)}.new`);
  }
  /** Rollback's previous content between the two renames of the swap. */
  volOld(envId: string, volume: string): string {
    return join(this.volDir(envId), `.${checkName('volume name', volume)}.old`);
  }
  /** A clone being written; renamed to the volume path once complete. */
  volClone(envId: string, volume: string): string {
    return join(this.volDir(envId), `.${checkName('volume name', volume)}.clone`);
  }
  /** The env's disk image (images.ts): one file system holding all its volumes, mounted at volDir. */
  diskImage(envId: string): string {
    return join(this.envDir(envId), 'disk.img');
  }
  /** A disk image being written (a clone or a rollback's copy); renamed to diskImage once complete. */
  diskNew(envId: string): string {
    return join(this.envDir(envId), '.disk.img.new');
  }
  /** Where envs made before disk images kept their ext4 image; such envs keep using it. */
  legacyDisk(envId: string): string {
    return join(this.dataDir, 'disks', `${checkName('env id', envId)}.img`);
  }
}
