// The parsed compose document as a small closed tree, plus the readers the other modules use.
// Mappings are `Map`s (not objects) so that file order survives numeric keys and a key such as
// `__proto__` or `constructor` is just a key.

export type Node = string | number | boolean | null | Node[] | NodeMap;
export type NodeMap = Map<string, Node>;

/** Refusals quote what they refuse; a megabyte value must not come back as a megabyte reason. */
const MAX_REASON_CHARS = 1000;

/** A refusal. The message is the user-facing reason and always starts with `compose: `. */
export class ComposeError extends Error {
  constructor(reason: string) {
    const text = reason.startsWith('compose: ') ? reason : `compose: ${reason}`;
    super(
      text.length > MAX_REASON_CHARS
        ? `${text.slice(0, MAX_REASON_CHARS / 2)}...${text.slice(-MAX_REASON_CHARS / 2 + 3)}`
        : text,
    );
    this.name = 'ComposeError';
  }
}

export function fail(reason: string): never {
  throw new ComposeError(reason);
}

export function isMap(node: Node | undefined): node is NodeMap {
  return node instanceof Map;
}

/** Short, quoted rendering of a value for messages. */
export function show(node: Node | undefined): string {
  if (node === undefined) {
    return 'nothing';
  }
  if (typeof node === 'string') {
    return `'${node.length > 80 ? `${node.slice(0, 77)}...` : node}'`;
  }
  if (isMap(node)) {
    return 'a mapping';
  }
  if (Array.isArray(node)) {
    return 'a list';
  }
  return String(node);
}

export function asMap(node: Node | undefined, where: string): NodeMap {
  if (node === null || node === undefined) {
    return new Map();
  }
  if (!isMap(node)) {
    fail(`${where} must be a mapping, got ${show(node)}`);
  }
  return node;
}

export function asList(node: Node | undefined, where: string): Node[] {
  if (node === null || node === undefined) {
    return [];
  }
  if (!Array.isArray(node)) {
    fail(`${where} must be a list, got ${show(node)}`);
  }
  return node;
}

/** Scalars become strings (compose accepts `user: 1000`, `retries: "3"`...). */
export function scalarText(node: Node | undefined, where: string): string {
  if (typeof node === 'string') {
    return node;
  }
  if (typeof node === 'number' && Number.isFinite(node)) {
    return String(node);
  }
  if (typeof node === 'boolean') {
    return String(node);
  }
  return fail(`${where} must be a string, got ${show(node)}`);
}

export function asString(node: Node | undefined, where: string): string {
  if (typeof node !== 'string') {
    fail(`${where} must be a string, got ${show(node)}`);
  }
  return node;
}

export function asBool(node: Node | undefined, where: string): boolean {
  if (node === undefined || node === null) {
    return false;
  }
  if (typeof node === 'boolean') {
    return node;
  }
  if (node === 'true' || node === 'false') {
    return node === 'true';
  }
  return fail(`${where} must be true or false, got ${show(node)}`);
}

/** A whole number from a YAML number or (after interpolation) a numeric string. */
export function asInt(node: Node | undefined, where: string, min: number, max: number): number {
  const n = typeof node === 'string' && /^\s*-?\d+\s*$/.test(node) ? Number(node) : node;
  if (typeof n !== 'number' || !Number.isInteger(n) || n < min || n > max) {
    fail(`${where} must be a whole number from ${min} to ${max}, got ${show(node)}`);
  }
  return n;
}

/** A string or a list of scalars, as `command:` and `entrypoint:` take. */
export function stringOrList(node: Node | undefined, where: string): string | string[] | null {
  if (node === undefined || node === null) {
    return null;
  }
  if (typeof node === 'string') {
    return node;
  }
  if (Array.isArray(node)) {
    return node.map((item, i) => scalarText(item, `${where}[${i}]`));
  }
  return fail(`${where} must be a string or a list of strings, got ${show(node)}`);
}

/** Absolute, normalised container path (no `..`, no NUL, trailing slash and `.` segments removed). */
export function containerPath(raw: string, where: string): string {
  if (!raw.startsWith('/')) {
    fail(`${where}: '${raw}' must be an absolute container path`);
  }
  if (/[\0\n\r]/.test(raw)) {
    fail(`${where}: the path contains a control character`);
  }
  const parts = raw.split('/').filter((p) => p !== '' && p !== '.');
  if (parts.includes('..')) {
    fail(`${where}: '${raw}' must not contain '..'`);
  }
  if (raw.length > 4096) {
    fail(`${where}: the path is longer than 4096 characters`);
  }
  return `/${parts.join('/')}`;
}

/** Service and volume names: what compose accepts, and safe as dataset and container name parts. */
export const NAME_RE = /^[a-zA-Z0-9][a-zA-Z0-9_.-]{0,62}$/;
