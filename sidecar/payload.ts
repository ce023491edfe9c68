// Command payloads come from the network: check every field a handler uses before it touches
// Docker or the disk, with a message that names the field.
import type { Egress, ServiceRecord } from '../protocol/spec.ts';

export class PayloadError extends Error {}

type P = Record<string, unknown>;
const NAME = /^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$/;

export function str(p: P, key: string, opts: { optional?: boolean; name?: boolean } = {}): string {
  const v = p[key];
  if (v === undefined && opts.optional) return '';
  if (typeof v !== 'string') throw new PayloadError(`payload.${key} must be a string`);
  if (opts.name && !NAME.test(v))
    throw new PayloadError(`payload.${key} '${v.slice(0, 80)}' is not a valid name`);
  return v;
}

export function strList(p: P, key: string, opts: { optional?: boolean } = {}): string[] {
  const v = p[key];
  if ((v === undefined || v === null) && opts.optional) return [];
  if (!Array.isArray(v) || !v.every((x) => typeof x === 'string'))
    throw new PayloadError(`payload.${key} must be a list of strings`);
  return v as string[];
}

export function int(p: P, key: string, fallback: number, min = 1, max = 86_400): number {
  const v = p[key];
  if (v === undefined || v === null) return fallback;
  if (typeof v !== 'number' || !Number.isInteger(v) || v < min || v > max) {
    throw new PayloadError(`payload.${key} must be an integer from ${min} to ${max}`);
  }
  return v;
}

export function egress(p: P): Egress {
  const v = p.egress ?? 'deny';
  if (v !== 'deny' && v !== 'allow') throw new PayloadError("payload.egress must be 'deny' or 'allow'");
  return v;
}

export function volumes(p: P): string[] {
  const list = strList(p, 'volumes', { optional: true });
  for (const v of list)
    if (!NAME.test(v)) throw new PayloadError(`volume name '${v.slice(0, 80)}' is not valid`);
  return list;
}

export function services(p: P): ServiceRecord[] {
  const list = p.services;
  if (!Array.isArray(list) || list.length === 0)
    throw new PayloadError('payload.services must be a non-empty list');
  return list.map((s, i) => {
    if (typeof s !== 'object' || s === null)
      throw new PayloadError(`payload.services[${i}] must be an object`);
    const r = s as ServiceRecord;
    if (typeof r.name !== 'string' || !NAME.test(r.name))
      throw new PayloadError(`payload.services[${i}].name is not valid`);
    if (typeof r.image !== 'string' || !r.image) throw new PayloadError(`service '${r.name}' has no image`);
    if (!Array.isArray(r.volumes) || !Array.isArray(r.ports))
      throw new PayloadError(`service '${r.name}' needs volumes and ports lists`);
    if (typeof r.env !== 'object' || r.env === null)
      throw new PayloadError(`service '${r.name}' needs an env map`);
    if (r.layer_mb !== undefined && !(Number.isInteger(r.layer_mb) && r.layer_mb > 0))
      throw new PayloadError(`service '${r.name}': layer_mb must be a positive integer`);
    return r;
  });
}

export function absolutePath(path: string, what: string): string {
  if (!path.startsWith('/') || path.includes('\0') || path.split('/').includes('..')) {
    throw new PayloadError(`${what} '${path.slice(0, 100)}' must be absolute without '..'`);
  }
  return path;
}
