// Cloud providers (spec "Clouds, hosts and targets"): which config each accepts, the defaults it
// fills in, how secrets are masked in answers, and the static capability row of hosted providers.

import { PROVIDERS } from '../../protocol/api/bodies.ts';
import { BadRequest } from '../errors.ts';

export { PROVIDERS };
export type Provider = (typeof PROVIDERS)[number];
export const SANDBOX_PROVIDERS: readonly Provider[] = ['sandbox-a', 'sandbox-b'];

export const isSandboxProvider = (p: string): boolean => (SANDBOX_PROVIDERS as readonly string[]).includes(p);

export type CloudConfig = Record<string, string>;

interface FieldRule {
  required?: boolean;
  default?: string;
  /** An http(s) base address; a trailing slash is dropped. */
  url?: boolean;
}

/** Base address of each provider's API when the cloud's config names none. */
export const DEFAULT_API_URL: Record<Exclude<Provider, 'manual'>, string> = {
  cloudvm: 'https://api.hetzner.cloud/v1',
  'sandbox-a': 'https://api.e2b.app',
  'sandbox-b': 'https://app.daytona.io/api',
};

/** The API base of a cloud: its `api_url`, else the provider's public address. */
export function apiUrlOf(provider: string, config: Record<string, unknown>): string {
  const given = typeof config.api_url === 'string' ? config.api_url : '';
  return given || DEFAULT_API_URL[provider as Exclude<Provider, 'manual'>] || '';
}

const RULES: Record<Provider, Record<string, FieldRule>> = {
  manual: {},
  cloudvm: {
    token: { required: true },
    server_type: { default: 'cpx31' },
    location: { default: 'nbg1' },
    image: { default: 'ubuntu-24.04' },
    api_url: { url: true },
  },
  'sandbox-a': { token: { required: true }, api_url: { url: true }, envd_url: { url: true } },
  'sandbox-b': { token: { required: true }, api_url: { url: true } },
};

function checkUrl(provider: string, key: string, value: string): string {
  let u: URL;
  try {
    u = new URL(value);
  } catch {
    throw new BadRequest(`${provider}: config.${key} '${value.slice(0, 100)}' is not a URL`);
  }
  if ((u.protocol !== 'http:' && u.protocol !== 'https:') || u.username || u.password || u.search || u.hash) {
    throw new BadRequest(`${provider}: config.${key} must be an http:// or https:// base address`);
  }
  return value.replace(/\/+$/, '');
}

const MAX_VALUE_CHARS = 4096;

/** Validates `config` for `provider` and fills in the defaults; 400 with the reason otherwise. */
export function validateConfig(provider: Provider, config: Record<string, unknown> | undefined): CloudConfig {
  const rules = RULES[provider];
  const given = config ?? {};
  const names = Object.keys(rules);
  if (names.length === 0 && Object.keys(given).length > 0) {
    throw new BadRequest(
      `${provider}: takes no config (hosts join with a token), got ${Object.keys(given).join(', ')}`,
    );
  }
  for (const key of Object.keys(given)) {
    if (!Object.hasOwn(rules, key))
      throw new BadRequest(`${provider}: unknown config key '${key}'; known: ${names.join(', ')}`);
  }
  const out: CloudConfig = {};
  for (const [key, rule] of Object.entries(rules)) {
    const value = given[key];
    if (value === undefined || value === null || value === '') {
      if (rule.required) throw new BadRequest(`${provider}: config.${key} is required`);
      if (rule.default !== undefined) out[key] = rule.default;
      continue;
    }
    if (typeof value !== 'string') throw new BadRequest(`${provider}: config.${key} must be a string`);
    if (value.length > MAX_VALUE_CHARS || /[\r\n\0]/.test(value)) {
      throw new BadRequest(
        `${provider}: config.${key} must be one line of at most ${MAX_VALUE_CHARS} characters`,
      );
    }
    out[key] = rule.url ? checkUrl(provider, key, value.trim()) : value.trim();
  }
  return out;
}

export const MASK = '\u2022\u2022\u2022';

/** `token` and any key naming a secret or key are shown as three bullets, never in clear. */
export function isSecretKey(name: string): boolean {
  const n = name.toLowerCase();
  return n === 'token' || n.includes('secret') || n.includes('key');
}

export function maskConfig(config: Record<string, unknown>): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(config)) out[k] = isSecretKey(k) ? MASK : v;
  return out;
}

/** The spec's static capability row for hosted providers (returned as a target's `table`). */
export interface CapabilityRow {
  multi_service: string;
  snapshot: string;
  fork: string;
  egress_deny: string;
  caps: string;
  gpu: string;
  verify: string;
  notes: string;
}

export const CAPABILITY_TABLE: Record<'sandbox-a' | 'sandbox-b', CapabilityRow> = {
  'sandbox-a': {
    multi_service: 'no',
    snapshot: 'pause (sandbox persisted)',
    fork: 'not available, n/a',
    egress_deny: 'provider network config',
    caps: 'provider tier',
    gpu: 'no',
    verify: 'no',
    notes: 'one sandbox per environment, pause and resume keeps state with no branching',
  },
  'sandbox-b': {
    multi_service: 'no',
    snapshot: 'snapshot to image',
    fork: 'new sandbox from snapshot, tens of seconds',
    egress_deny: 'limited',
    caps: 'provider tier',
    gpu: 'partial',
    verify: 'no',
    notes: 'none',
  },
};

export function capabilityRow(provider: string): CapabilityRow | undefined {
  return isSandboxProvider(provider) ? CAPABILITY_TABLE[provider as 'sandbox-a' | 'sandbox-b'] : undefined;
}

/** Why a host kind cannot snapshot a running environment, in the spec's refusal wording; '' when it can. */
export function snapshotRefusal(hostKind: string): string {
  if (hostKind !== 'driver:sandbox-b') return '';
  return 'sandbox-b: env.snapshot: not supported on sandbox-b yet (its snapshot API builds images, not snapshots of a running sandbox)';
}
