// Floors of the exec round trip on this machine: what the pieces under svc cost with none of svc
// in them, at the hub benchmark's rate, with its client, measured the same way (CPU per answered
// request of the serving process, from /proc):
//   node:http   a bare node:http server answering the exec request (the HTTP exec's client and body)
//   Fastify     the same route on a bare Fastify app
//   ws          a bare ws server sending one command frame per op to 200 clients that answer with
//               an ack and a result, its open-loop generator in-process (as bench/hub/hub-server.ts)
// The database's share is bench/hub/db-writes.ts ("insert, finish with acked_at"). The HTTP exec of
// bench/hub/run.ts costs at least node:http + ws + those writes; what is above that is svc's own.
//
//   node bench/hub/floors.ts [--rate 2000] [--seconds 10] [--warmup 3] [--repeat 3] [--pin]
import { mkdtempSync, rmSync } from 'node:fs';
import { availableParallelism, tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import type { FromWsFloor, WsLoad } from './floor-peers.ts';
import { type LoadFigures, openLoop, watch } from './measure.ts';
import {
  type Child,
  cleanupAll,
  freePort,
  installExitHandlers,
  nextMessage,
  nonNegative,
  onCleanup,
  pinning,
  startChild,
} from './proc.ts';
import { execFire, type Placed } from './setup.ts';

const { values } = parseArgs({
  options: {
    rate: { type: 'string', default: '2000' },
    seconds: { type: 'string', default: '10' },
    warmup: { type: 'string', default: '3' },
    repeat: { type: 'string', default: '3' },
    pin: { type: 'boolean', default: false },
  },
});
const RATE = nonNegative('rate', values.rate);
const SECONDS = nonNegative('seconds', values.seconds);
const WARMUP = nonNegative('warmup', values.warmup);
const REPEAT = nonNegative('repeat', values.repeat);
const PIN = values.pin ? pinning(availableParallelism()) : null;
const PEERS = 'bench/hub/floor-peers.ts';
const CLIENTS = 200;
const ENVS: Placed[] = Array.from({ length: 200 }, (_, i) => ({
  envId: `env_floor${i}`,
  hostId: 'host_floor',
}));
const READY_MS = 30_000;

interface Row {
  floor: string;
  figures: LoadFigures;
  cpuPct: number;
}

const dir = mkdtempSync(join(tmpdir(), 'svc-bench-floors-'));
onCleanup(() => rmSync(dir, { recursive: true, force: true }));

async function start(args: string[], tag: string, cpus?: string): Promise<Child> {
  const child = startChild(PEERS, args, {}, join(dir, `${tag}.log`), cpus);
  await nextMessage(child, (m) => m?.op === 'ready', READY_MS);
  return child;
}

/** An HTTP floor: the hub benchmark's exec client against a bare server in its own process. */
async function httpFloor(mode: 'http' | 'fastify', floor: string): Promise<Row> {
  const port = await freePort();
  const server = await start([mode, String(port)], mode, PIN?.controlPlane);
  const client = execFire(
    { url: `http://127.0.0.1:${port}`, key: 'floor', call: async () => null },
    ENVS,
    1024,
  );
  if (WARMUP > 0) await openLoop(RATE, WARMUP, client.fire);
  const w = watch(server.pid);
  const figures = await openLoop(RATE, SECONDS, client.fire);
  const cpuPct = w.stop().cpuPct;
  client.close();
  await server.stop();
  return { floor, figures, cpuPct };
}

/** The stream floor: a bare ws server and its clients, the load generated in the server. */
async function wsFloor(): Promise<Row> {
  const port = await freePort();
  const server = await start(['ws', String(port)], 'ws', PIN?.controlPlane);
  const clients = await start(
    ['ws-client', `ws://127.0.0.1:${port}`, String(CLIENTS)],
    'ws-client',
    PIN?.rest,
  );
  const measuring = nextMessage(server, (m) => m?.op === 'measuring', READY_MS + WARMUP * 1000);
  const loaded = nextMessage<Extract<FromWsFloor, { op: 'loaded' }>>(
    server,
    (m) => m?.op === 'loaded',
    READY_MS + (WARMUP + SECONDS) * 1000,
  );
  server.proc.send({ op: 'load', rate: RATE, seconds: SECONDS, warmupSeconds: WARMUP } satisfies WsLoad);
  await measuring;
  const w = watch(server.pid);
  const figures = (await loaded).figures;
  const cpuPct = w.stop().cpuPct;
  await clients.stop();
  await server.stop();
  return { floor: `ws (command out, ack + result in, ${CLIENTS} clients)`, figures, cpuPct };
}

function line(r: Row): string {
  const f = r.figures;
  const us = f.achievedRate > 0 ? (r.cpuPct * 10_000) / f.achievedRate : 0;
  return `| ${r.floor} | ${f.achievedRate.toFixed(0)}/s | ${f.p50.toFixed(2)} | ${f.p99.toFixed(1)} | ${r.cpuPct.toFixed(1)} | **${us.toFixed(0)}** |`;
}

installExitHandlers();
try {
  process.stdout.write(
    `floors at ${RATE}/s, ${SECONDS} s after ${WARMUP} s, ${REPEAT} rounds interleaved${PIN ? ', server pinned to CPU 0' : ''}\n\n` +
      '| floor | rate held | p50 ms | p99 ms | server CPU% | µs/request |\n|---|---|---|---|---|---|\n',
  );
  for (let i = 0; i < REPEAT; i++) {
    process.stdout.write(`${line(await httpFloor('http', 'node:http, bare'))}\n`);
    process.stdout.write(`${line(await httpFloor('fastify', 'Fastify 5, bare'))}\n`);
    process.stdout.write(`${line(await wsFloor())}\n`);
  }
  process.stdout.write('\nthe database writes of a command: node bench/hub/db-writes.ts --db sqlite\n');
} finally {
  await cleanupAll();
}
