// The load generator, run as its own process so it never shares the server's event loop.
// Usage: node bench/api/load.ts '<json: {url, headers, seconds, connections}>' — prints one JSON line.
import autocannon from 'autocannon';

interface Job {
  url: string;
  headers: Record<string, string>;
  seconds: number;
  connections: number;
}

const job = JSON.parse(process.argv[2] ?? '{}') as Job;
const result = await autocannon({
  url: job.url,
  headers: job.headers,
  duration: job.seconds,
  connections: job.connections,
  pipelining: 1,
});
process.stdout.write(
  `${JSON.stringify({
    rps: result.requests.average,
    p50: result.latency.p50,
    p99: result.latency.p99,
    total: result.requests.total,
    non2xx: result.non2xx,
    errors: result.errors,
    timeouts: result.timeouts,
  })}\n`,
);
