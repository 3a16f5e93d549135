// The peer queue for genesis-bench: graphile-worker processing no-op jobs on
// the same PostgreSQL server, in a scratch database it creates and drops.
// It runs in graphile-worker's documented high-throughput configuration (the
// "Performance" page of worker.graphile.org: 24 concurrent jobs, a pool of
// 25, a local queue of 500, batched completion), with every job queued up
// front by one `add_jobs` call, so the figure is the peer at its best on this
// machine and not a throttled one.
// Prints one JSON line: {"jobs", "secs", "p50", "p95", "p99", "config"} or {"error"}.
import { run, Logger } from "graphile-worker";
import pg from "pg";

const base = process.env.PEER_BASE_URL ?? "postgres://postgres@127.0.0.1:5432/postgres";
const jobs = Number(process.env.PEER_JOBS ?? "50000");
const concurrentJobs = Number(process.env.PEER_CONCURRENCY ?? "24");
const localQueueSize = Number(process.env.PEER_LOCAL_QUEUE ?? "500");
const db = `genesis_bench_peer_${Math.floor(Math.random() * 0xffffffff).toString(16)}`;
const url = base.replace(/\/[^/?]*(\?|$)/, `/${db}$1`);
const config = { concurrentJobs, maxPoolSize: concurrentJobs + 1, localQueueSize, completeJobBatchDelay: 0, failJobBatchDelay: 0 };

async function admin(sql) {
  const c = new pg.Client({ connectionString: base });
  await c.connect();
  try { await c.query(sql); } finally { await c.end(); }
}

await admin(`CREATE DATABASE ${db}`);
// The worker's connections come from a pool this script owns and ends
// before the drop: a pool left open by the runner met DROP ... WITH (FORCE)
// as an unhandled 'error' event, which killed node before the result line.
const pool = new pg.Pool({ connectionString: url, max: config.maxPoolSize });
pool.on("error", () => {});
// Each client's errors too (graphile-worker checks for both handlers).
pool.on("connect", (client) => client.on("error", () => {}));
let out;
try {
  const lat = [];
  let first = null, last = null, done = 0;
  let finish;
  const all = new Promise((r) => (finish = r));
  const runner = await run({
    pgPool: pool,
    noHandleSignals: true,
    logger: new Logger(() => () => {}),
    preset: {
      worker: {
        concurrentJobs: config.concurrentJobs,
        maxPoolSize: config.maxPoolSize,
        localQueue: { size: config.localQueueSize },
        completeJobBatchDelay: config.completeJobBatchDelay,
        failJobBatchDelay: config.failJobBatchDelay,
        pollInterval: 1000,
      },
    },
    taskList: {
      noop: async (_payload, helpers) => {
        const now = Date.now();
        if (first === null) first = now;
        lat.push(now - new Date(helpers.job.run_at).getTime());
        last = now;
        done += 1;
        if (done === jobs) finish();
      },
    },
  });
  // One batch call, as the performance page queues its jobs.
  await pool.query(
    `SELECT graphile_worker.add_jobs(array_agg(('noop', json_build_object('i', i), NULL, NULL, NULL, NULL, NULL, NULL)::graphile_worker.job_spec)) FROM generate_series(1, $1) AS i`,
    [jobs],
  );
  await Promise.race([all, new Promise((r) => setTimeout(r, 300000))]);
  await runner.stop();
  lat.sort((a, b) => a - b);
  const q = (p) => lat[Math.min(lat.length - 1, Math.floor(p * lat.length))] ?? null;
  out = { jobs: done, secs: (last - first) / 1000, p50: q(0.5), p95: q(0.95), p99: q(0.99), config };
} catch (e) {
  out = { error: String(e?.stack ?? e) };
}
// The result first: nothing the clean-up meets can lose it.
console.log(JSON.stringify(out));
await pool.end().catch(() => {});
await admin(`DROP DATABASE IF EXISTS ${db} WITH (FORCE)`).catch(() => {});
process.exit(0);
