// Collection of the images this sidecar built (`svc-build:*`). An image is kept while
// anything on the host may still run it: a service of an environment's current spec or of a
// version it can roll back to (`envs/*/spec.json`, `envs/*/versions/*.json`), any container
// (running or not, whoever made it), or an env.create in progress (held from before its build
// until its spec is saved). Of the rest, images older than the age bound are untagged (Docker
// deletes an image with its last tag, and refuses while a container uses it). Only images labelled
// with this sidecar's owner id are considered, so sidecars sharing one engine never remove each
// other's. Runs after every env.destroy and every SVC_BUILD_GC_EVERY seconds (default 3600,
// 0 = off), keeping unused images younger than SVC_BUILD_KEEP seconds (default 3600) as a cache.
import { createHash } from 'node:crypto';
import { readdir, readFile } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import type Docker from 'dockerode';
import { BUILD_REPO } from '../../protocol/spec.ts';
import { KeyedQueue } from '../../shared/concurrency.ts';

export const BUILD_OWNER_LABEL = 'svc.build.owner';
export const DEFAULT_BUILD_KEEP_MS = 3600_000;
export const DEFAULT_BUILD_GC_EVERY_MS = 3600_000;

/** The owner id of this sidecar's builds: a digest of its data directory. */
export const buildOwner = (dataDir: string) =>
  createHash('sha256').update(resolve(dataDir)).digest('hex').slice(0, 16);

const isBuilt = (image: string) => image.startsWith(`${BUILD_REPO}:`);

async function jsonImages(path: string): Promise<string[]> {
  try {
    const spec = JSON.parse(await readFile(path, 'utf8')) as { services?: { image?: unknown }[] };
    return (spec.services ?? []).map((s) => s.image).filter((i): i is string => typeof i === 'string');
  } catch {
    return [];
  }
}

/** Every image a saved spec on this host names. */
async function imagesInSpecs(dataDir: string): Promise<Set<string>> {
  const out = new Set<string>();
  const envs = join(dataDir, 'envs');
  for (const env of await readdir(envs).catch(() => [] as string[])) {
    for (const i of await jsonImages(join(envs, env, 'spec.json'))) out.add(i);
    const versions = join(envs, env, 'versions');
    for (const v of await readdir(versions).catch(() => [] as string[]))
      if (v.endsWith('.json')) for (const i of await jsonImages(join(versions, v))) out.add(i);
  }
  return out;
}

interface BuildGcResult {
  removed: string[];
  kept: number;
}

/**
 * This sidecar's built images: the holds of the builds under way and the sweeps that untag what
 * nothing uses. One per sidecar context (only this sidecar builds under its owner label).
 */
export class BuildImages {
  readonly #gate = new KeyedQueue();
  readonly #held = new Map<string, number>();

  /**
   * Holds `images` against collection until the returned release is called. Registered under the
   * same gate as a sweep's removals, so a sweep either ran before (the build then finds the image
   * gone and builds it) or sees the hold.
   */
  async hold(images: string[]): Promise<() => void> {
    const held = this.#held;
    const mine = images.filter(isBuilt);
    await this.#gate.run('gc', async () => {
      for (const i of mine) held.set(i, (held.get(i) ?? 0) + 1);
    });
    let released = false;
    return () => {
      if (released) return;
      released = true;
      for (const i of mine) {
        const n = (held.get(i) ?? 1) - 1;
        if (n > 0) held.set(i, n);
        else held.delete(i);
      }
    };
  }

  /** Untags this sidecar's built images that nothing uses and that are older than `minAgeMs`. */
  collect(docker: Docker, dataDir: string, minAgeMs: number, now = Date.now()): Promise<BuildGcResult> {
    const held = this.#held;
    return this.#gate.run('gc', async () => {
      const owner = buildOwner(dataDir);
      const images = await docker.listImages({ filters: { label: [`${BUILD_OWNER_LABEL}=${owner}`] } });
      // Nothing old enough to go: no reading of every spec file and no listing of every container
      // on the host (this runs after each destroy; with hundreds of sandboxes those were a steady
      // share of the engine's work for nothing).
      if (!images.some((img) => img.Created * 1000 <= now - minAgeMs))
        return { removed: [], kept: images.length };
      const specs = await imagesInSpecs(dataDir);
      const containers = await docker.listContainers({ all: true });
      const usedIds = new Set(containers.map((c) => c.ImageID));
      const usedNames = new Set(containers.map((c) => c.Image));
      const out: BuildGcResult = { removed: [], kept: 0 };
      for (const img of images) {
        const tags = (img.RepoTags ?? []).filter(isBuilt);
        const inUse =
          usedIds.has(img.Id) || tags.some((t) => specs.has(t) || held.has(t) || usedNames.has(t));
        if (inUse || img.Created * 1000 > now - minAgeMs) {
          out.kept++;
          continue;
        }
        for (const tag of tags) {
          try {
            await docker.getImage(tag).remove();
            out.removed.push(tag);
          } catch (err) {
            // 409: a container uses it after all (Docker refuses); 404: gone meanwhile.
            const code = (err as { statusCode?: number }).statusCode;
            if (code !== 409 && code !== 404) throw err;
          }
        }
      }
      return out;
    });
  }
}
