// Decisions/s and latency of Node `rate-limiter-flexible` on memcached.
//
// One `RateLimiterMemcache` (a fixed window: `incr`, or `add` on a miss,
// plus a `<key>_expire` companion key) over one `memcached` client with
// its default options, `points` so high that every decision is allowed.
// `--in-flight` async workers each `await consume(key)` in a closed loop
// (the next call as soon as the previous one settles) for `--seconds`; one
// hot key, or each call picks one of 100,000 keys uniformly at random
// (`--mode many`).
//
// Before each run every worker makes one decision on a key of its own (so
// the client's connections are open), then `flush_all` empties memcached
// and the clock starts. Per run, one JSON line on stdout: decisions/s
// (decisions answered over the run's wall time, workers settled), p50 and
// p99 latency in µs, and allowed / denied / error counts. Progress goes to
// stderr.
//
// Run by `bench/peers/run`, which installs `rate-limiter-flexible` and
// `memcached` into a scratch npm folder (NODE_PATH points there).

'use strict';

const net = require('net');
const Memcached = require('memcached');
const { RateLimiterMemcache, RateLimiterRes } = require('rate-limiter-flexible');

const MANY_KEYS = 100000;
const POINTS = 1000000000;

function parseArgs(argv) {
  const args = { inFlight: 1, seconds: 5, runs: 3, mode: 'hot', seed: 42 };
  for (let i = 0; i < argv.length; i += 2) {
    const [name, value] = [argv[i], argv[i + 1]];
    if (value === undefined) throw new Error(`${name} needs a value`);
    switch (name) {
      case '--server': args.server = value; break;
      case '--in-flight': args.inFlight = Number(value); break;
      case '--seconds': args.seconds = Number(value); break;
      case '--runs': args.runs = Number(value); break;
      case '--mode': args.mode = value; break;
      case '--seed': args.seed = Number(value); break;
      default: throw new Error(`unknown option ${name}`);
    }
  }
  if (!args.server) throw new Error('--server HOST:PORT is required');
  if (!['hot', 'many'].includes(args.mode)) throw new Error('--mode is hot or many');
  return args;
}

function flushAll(server) {
  const index = server.lastIndexOf(':');
  return new Promise((resolve, reject) => {
    const socket = net.connect(Number(server.slice(index + 1)), server.slice(0, index));
    let reply = '';
    socket.setTimeout(10000, () => socket.destroy(new Error('flush_all timed out')));
    socket.on('connect', () => socket.write('flush_all\r\n'));
    socket.on('data', (data) => {
      reply += data.toString();
      if (reply.endsWith('\r\n')) {
        socket.end();
        if (reply === 'OK\r\n') resolve();
        else reject(new Error(`flush_all answered ${JSON.stringify(reply)}`));
      }
    });
    socket.on('error', reject);
  });
}

// A small seeded generator (mulberry32), so "many" mode is repeatable.
function rng(seed) {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

function quantile(sorted, q) {
  if (sorted.length === 0) return NaN;
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))];
}

async function oneRun(limiter, args, seed) {
  await Promise.all(
    Array.from({ length: args.inFlight }, (_, i) => limiter.consume(`warmup${i}`)),
  );
  await flushAll(args.server);
  const start = process.hrtime.bigint();
  const end = start + BigInt(Math.round(args.seconds * 1e9));
  const totals = { allowed: 0, denied: 0, errors: 0, firstError: null };
  const latencies = [];
  const worker = async (index) => {
    const random = rng(seed * 1000003 + index);
    while (process.hrtime.bigint() < end) {
      const key = args.mode === 'hot' ? 'hot' : `c${Math.floor(random() * MANY_KEYS)}`;
      const begin = process.hrtime.bigint();
      try {
        await limiter.consume(key);
        totals.allowed += 1;
      } catch (error) {
        if (error instanceof RateLimiterRes) {
          totals.denied += 1;
        } else {
          totals.errors += 1;
          totals.firstError = totals.firstError || String(error);
          continue;
        }
      }
      latencies.push(Number(process.hrtime.bigint() - begin));
    }
  };
  await Promise.all(Array.from({ length: args.inFlight }, (_, i) => worker(i)));
  const elapsed = Number(process.hrtime.bigint() - start) / 1e9;
  latencies.sort((a, b) => a - b);
  return {
    per_second: (totals.allowed + totals.denied) / elapsed,
    p50_us: quantile(latencies, 0.5) / 1e3,
    p99_us: quantile(latencies, 0.99) / 1e3,
    allowed: totals.allowed,
    denied: totals.denied,
    errors: totals.errors,
    first_error: totals.firstError,
  };
}

async function main() {
  const args = parseArgs(process.argv.slice(2));
  const client = new Memcached(args.server);
  const limiter = new RateLimiterMemcache({
    storeClient: client,
    points: POINTS,
    duration: 60,
    keyPrefix: 'rlflx',
  });
  const version = require('rate-limiter-flexible/package.json').version;
  for (let run = 0; run < args.runs; run += 1) {
    const result = await oneRun(limiter, args, args.seed + run);
    const line = {
      peer: `rate-limiter-flexible ${version} (Node ${process.versions.node})`,
      algorithm: 'RateLimiterMemcache',
      concurrency: `${args.inFlight} in flight`,
      level: args.inFlight,
      mode: args.mode,
      run: run + 1,
      ...result,
    };
    process.stdout.write(`${JSON.stringify(line)}\n`);
    process.stderr.write(
      `rate-limiter-flexible ${args.mode} in flight ${args.inFlight} run ${run + 1}: `
        + `${result.per_second.toFixed(0)}/s p50 ${result.p50_us.toFixed(1)} `
        + `p99 ${result.p99_us.toFixed(1)} µs, allowed ${result.allowed} `
        + `denied ${result.denied} errors ${result.errors}`
        + `${result.first_error ? ` (first error: ${result.first_error})` : ''}\n`,
    );
  }
  client.end();
}

main().catch((error) => {
  process.stderr.write(`${error.stack || error}\n`);
  process.exit(1);
});
