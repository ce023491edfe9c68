// Code-host webhooks as GitHub sends them: the corpus's real payloads, signed with
// X-Hub-Signature-256 (HMAC-SHA256 of the raw body), each with its own delivery id.
import { createHmac } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { corpusPath } from './corpus.ts';
import type { TestServer } from './server.ts';

export const payload = (name: string): any => JSON.parse(readFileSync(corpusPath('webhooks', name), 'utf8'));
export const WEBHOOK_SECRET = 'webhook-secret';
let delivery = 0;

export function sendWebhook(
  s: Pick<TestServer, 'req'>,
  event: string,
  body: unknown,
  o: { secret?: string; id?: string; raw?: Buffer } = {},
) {
  const raw = o.raw ?? Buffer.from(JSON.stringify(body));
  const sig = `sha256=${createHmac('sha256', o.secret ?? WEBHOOK_SECRET)
    .update(raw)
    .digest('hex')}`;
  return s.req('POST', '/webhooks/codehost', {
    token: false,
    raw,
    headers: {
      'content-type': 'application/json',
      'x-github-event': event,
      'x-github-delivery': o.id ?? `d-${process.pid}-${++delivery}`,
      'x-hub-signature-256': sig,
    },
  });
}

/** A push of `sha` to `branch` of `repo` (the corpus's push payload, retargeted). */
export function pushPayload(repo: string, branch: string, sha: string, installation = 77) {
  const p = payload('octokit__push__with-new-branch.json');
  return {
    ...p,
    ref: `refs/heads/${branch}`,
    before: '0'.repeat(40),
    after: sha,
    created: false,
    installation: { id: installation },
    repository: { ...p.repository, full_name: repo, default_branch: 'main' },
  };
}

/** An `installation created` event for `id`, account `login`. */
export function installationCreated(id: number, login: string) {
  const created = payload('octokit__installation__created.json');
  return { ...created, installation: { ...created.installation, id, account: { login } } };
}
