// The part of autocannon's API the load generator uses (the package ships no types).
declare module 'autocannon' {
  interface Histogram {
    average: number;
    p50: number;
    p99: number;
    total: number;
  }
  interface Options {
    url: string;
    headers?: Record<string, string>;
    duration?: number;
    connections?: number;
    pipelining?: number;
  }
  interface Result {
    requests: Histogram;
    latency: Histogram;
    non2xx: number;
    errors: number;
    timeouts: number;
  }
  export default function autocannon(opts: Options): Promise<Result>;
}
