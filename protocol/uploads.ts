// What `PUT /v1/envs/{env}/files` accepts inside the archive (without these rules a 10 KiB
// PAX-sparse tar became a 1 GiB file; device nodes, FIFOs and a setuid-root shell were created as
// given). Both the control plane (a 4xx before any host sees it) and the sidecar (which rewrites
// what it extracts) apply these rules to tar headers as tar-stream reads them.

/** The largest total the files of one upload may expand to, sparse files counted at their real size. */
export const MAX_UPLOAD_EXPANDED_BYTES = 256 * 1024 * 1024;

export interface TarHeaderLike {
  name: string;
  type?: string | null | undefined;
  size?: number | undefined;
}

/** tar-stream puts an entry's PAX records on the header at run time (its types omit them). */
export const paxOf = (h: TarHeaderLike): Record<string, string> =>
  (h as { pax?: Record<string, string> | null }).pax ?? {};

/**
 * The PAX records an extracted entry keeps: only the sparse map's (so a sparse file stays sparse).
 * Ownership (`uid`, `uname`…), xattrs (`SCHILY.xattr.*`: file capabilities) and the rest are dropped.
 */
export function keptPax(h: TarHeaderLike): Record<string, string> | undefined {
  const kept = Object.entries(paxOf(h)).filter(([k]) => k.startsWith('GNU.sparse.'));
  return kept.length ? Object.fromEntries(kept) : undefined;
}

const ACCEPTED = new Set(['file', 'directory', 'symlink', 'link']);

const WHY: Record<string, string> = {
  'character-device': 'device nodes are not accepted',
  'block-device': 'device nodes are not accepted',
  fifo: 'FIFOs are not accepted',
  'gnu-sparse': 'old GNU sparse entries are not accepted (use PAX sparse or none)',
};

/** Why an entry is refused, or null when it may be extracted. */
export function uploadRefusal(h: TarHeaderLike): string | null {
  const type = h.type ?? 'file';
  if (!ACCEPTED.has(type))
    return `'${h.name.slice(0, 200)}': ${WHY[type] ?? `entries of type ${type} are not accepted`}`;
  // Only a file has content. tar-stream reads a link's declared bytes as its body (and a packer
  // refuses them), and never ends the body of a directory that declares a size.
  if (type !== 'file' && (h.size ?? 0) > 0)
    return `'${h.name.slice(0, 200)}': a ${type} entry cannot carry data`;
  return null;
}

/** The bytes an entry takes once extracted: a PAX sparse file's real size, not its stored size. */
export function expandedSize(h: TarHeaderLike): number {
  const stored = h.size ?? 0;
  const pax = paxOf(h);
  const real = Number(pax['GNU.sparse.realsize'] ?? pax['GNU.sparse.size'] ?? 0);
  return Number.isFinite(real) && real > stored ? real : stored;
}

/** Mode bits an extracted entry keeps: never setuid or setgid. */
export const safeMode = (mode: number | undefined, type: string): number =>
  (mode ?? (type === 'directory' ? 0o755 : 0o644)) & 0o1777;

export const expandedTooLarge = (bytes: number) =>
  `archive expands to ${bytes} bytes, over the ${MAX_UPLOAD_EXPANDED_BYTES / 1024 / 1024} MiB limit (sparse files count at their real size)`;
