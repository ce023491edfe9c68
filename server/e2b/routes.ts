// E2B's API routes (`spec/openapi.yml`), as the `e2b` SDK calls them: the key in `X-API-KEY`,
// timeouts in seconds, refusals `{code, message}`. Each route parses, calls the domain, answers.
import { Type } from '@sinclair/typebox';
import {
  E2bConnectBody,
  E2bError,
  E2bForkBody,
  E2bForkResult,
  E2bListedSandbox,
  E2bMetric,
  E2bNewSandbox,
  E2bPauseBody,
  E2bSandbox,
  E2bSandboxDetail,
  E2bTimeoutBody,
} from '../../protocol/e2b.ts';
import { BadRequest } from '../errors.ts';
import type { App } from '../http/app.ts';
import type { E2bSandboxes, ListQuery } from './sandboxes.ts';
import type { E2bState } from './store.ts';

const Id = Type.Object({ sandboxID: Type.String({ minLength: 1, maxLength: 128 }) });
const errors = { '4xx': E2bError, '5xx': E2bError };
/** A 204: no body. */
const empty = { 204: Type.Null(), ...errors };
const MAX_PAGE = 1000;
const STATES: readonly E2bState[] = ['running', 'paused'];

const ListQueryT = Type.Object({
  metadata: Type.Optional(Type.String({ maxLength: 16_384 })),
  state: Type.Optional(
    Type.Union([Type.String({ maxLength: 64 }), Type.Array(Type.String({ maxLength: 64 }), { maxItems: 4 })]),
  ),
  limit: Type.Optional(Type.String({ maxLength: 8 })),
  nextToken: Type.Optional(Type.String({ maxLength: 128 })),
  startedAfter: Type.Optional(Type.String({ maxLength: 64 })),
  template: Type.Optional(Type.String({ maxLength: 512 })),
  order: Type.Optional(Type.String({ maxLength: 8 })),
});

/**
 * The list's `metadata` filter as the SDK sends it: each key and value `encodeURIComponent`-ed,
 * joined as a query string, and that string sent as one query value (so decoded twice).
 */
export function parseMetadataFilter(text: string | undefined): Record<string, string> {
  const out: Record<string, string> = {};
  if (!text) return out;
  for (const [k, v] of new URLSearchParams(text)) {
    try {
      out[decodeURIComponent(k)] = decodeURIComponent(v);
    } catch {
      throw new BadRequest(`metadata: '${k.slice(0, 50)}' is not percent-encoded text`);
    }
  }
  return out;
}

/** `state=running,paused` (comma-joined, as the SDK sends it) or repeated; both states by default. */
export function parseStates(value: string | string[] | undefined): E2bState[] {
  if (value === undefined) return [...STATES];
  const list = (Array.isArray(value) ? value : [value]).flatMap((s) => s.split(',')).filter(Boolean);
  for (const s of list)
    if (!(STATES as readonly string[]).includes(s))
      throw new BadRequest(`state: '${s.slice(0, 20)}' is not one of running, paused`);
  return list.length ? [...new Set(list as E2bState[])] : [...STATES];
}

function parseLimit(value: string | undefined): number {
  if (value === undefined) return MAX_PAGE;
  const n = /^\d{1,6}$/.test(value) ? Number(value) : Number.NaN;
  if (!(n >= 1 && n <= MAX_PAGE)) throw new BadRequest(`limit must be an integer from 1 to ${MAX_PAGE}`);
  return n;
}

export function e2bApiRoutes(app: App, sandboxes: E2bSandboxes): void {
  for (const url of ['/sandboxes', '/v2/sandboxes']) {
    app.post(
      url,
      { schema: { body: E2bNewSandbox, response: { 201: E2bSandbox, ...errors } } },
      async (req, reply) => reply.code(201).send(await sandboxes.create(req.caller, req.body)),
    );
    app.get(
      url,
      { schema: { querystring: ListQueryT, response: { 200: Type.Array(E2bListedSandbox), ...errors } } },
      async (req, reply) => {
        const q: ListQuery = {
          metadata: parseMetadataFilter(req.query.metadata),
          states: parseStates(req.query.state),
          after: req.query.nextToken ?? '',
          limit: parseLimit(req.query.limit),
        };
        const page = await sandboxes.list(req.caller, q);
        if (page.next) reply.header('x-next-token', page.next);
        return page.items;
      },
    );
    app.post(
      `${url}/:sandboxID/connect`,
      {
        schema: {
          params: Id,
          body: Type.Optional(E2bConnectBody),
          response: { 200: E2bSandbox, 201: E2bSandbox, ...errors },
        },
      },
      async (req, reply) => {
        const out = await sandboxes.connect(req.caller, req.params.sandboxID, req.body?.timeout);
        return reply.code(out.resumed ? 201 : 200).send(out.sandbox);
      },
    );
  }
  app.get(
    '/sandboxes/:sandboxID',
    { schema: { params: Id, response: { 200: E2bSandboxDetail, ...errors } } },
    async (req) => sandboxes.get(req.caller, req.params.sandboxID),
  );
  app.delete('/sandboxes/:sandboxID', { schema: { params: Id, response: empty } }, async (req, reply) => {
    await sandboxes.kill(req.caller, req.params.sandboxID);
    return reply.code(204).send(null);
  });
  app.post(
    '/sandboxes/:sandboxID/timeout',
    { schema: { params: Id, body: E2bTimeoutBody, response: empty } },
    async (req, reply) => {
      await sandboxes.setTimeout(req.caller, req.params.sandboxID, req.body.timeout);
      return reply.code(204).send(null);
    },
  );
  app.post(
    '/sandboxes/:sandboxID/pause',
    { schema: { params: Id, body: Type.Optional(E2bPauseBody), response: empty } },
    async (req, reply) => {
      await sandboxes.pause(req.caller, req.params.sandboxID);
      return reply.code(204).send(null);
    },
  );
  app.post(
    '/sandboxes/:sandboxID/fork',
    {
      schema: {
        params: Id,
        body: Type.Optional(E2bForkBody),
        response: { 200: Type.Array(E2bForkResult), ...errors },
      },
    },
    async (req) => sandboxes.fork(req.caller, req.params.sandboxID, req.body?.count ?? 1, req.body?.timeout),
  );
  app.get(
    '/sandboxes/:sandboxID/metrics',
    {
      schema: {
        params: Id,
        querystring: Type.Object({
          start: Type.Optional(Type.String({ maxLength: 20 })),
          end: Type.Optional(Type.String({ maxLength: 20 })),
        }),
        response: { 200: Type.Array(E2bMetric), ...errors },
      },
    },
    async (req) => sandboxes.metrics(req.caller, req.params.sandboxID),
  );
}
