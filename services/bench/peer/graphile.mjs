// The peer queue for genesis-bench: graphile-worker processing no-op jobs on
// the same PostgreSQL server, in a scratch database it creates and drops.
// Prints one JSON line: {"jobs", "secs", "p50", "p95", "p99"} or {"error"}.
import { run, Logger } from "graphile-worker";
import pg from "pg";

const base = process.env.PEER_BASE_URL ?? "postgres://postgres@127.0.0.1:5432/postgres";
const jobs = Number(process.env.PEER_JOBS ?? "5000");
const db = `genesis_bench_peer_${Math.floor(Math.random() * 0xffffffff).toString(16)}`;
const url = base.replace(/\/[^/?]*(\?|$)/, `/${db}$1`);

async function admin(sql) {
  const c = new pg.Client({ connectionString: base });
  await c.connect();
  try { await c.query(sql); } finally { await c.end(); }
}

await admin(`CREATE DATABASE ${db}`);
// The worker's connections come from a pool this script owns and ends
// before the drop: a pool left open by the runner met DROP ... WITH (FORCE)
// as an unhandled 'error' event, which killed node before the result line.
const pool = new pg.Pool({ connectionString: url, max: 8 });
pool.on("error", () => {});
let out;
try {
  const lat = [];
  let first = null, last = null, done = 0;
  let finish;
  const all = new Promise((r) => (finish = r));
  const runner = await run({
    pgPool: pool,
    concurrency: 4,
    noHandleSignals: true,
    pollInterval: 1000,
    logger: new Logger(() => () => {}),
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
  await pool.query(`SELECT graphile_worker.add_job('noop', json_build_object('i', i)) FROM generate_series(1, $1) AS i`, [jobs]);
  await Promise.race([all, new Promise((r) => setTimeout(r, 120000))]);
  await runner.stop();
  lat.sort((a, b) => a - b);
  const q = (p) => lat[Math.min(lat.length - 1, Math.floor(p * lat.length))] ?? null;
  out = { jobs: done, secs: (last - first) / 1000, p50: q(0.5), p95: q(0.95), p99: q(0.99) };
} catch (e) {
  out = { error: String(e?.stack ?? e) };
}
// The result first: nothing the clean-up meets can lose it.
console.log(JSON.stringify(out));
await pool.end().catch(() => {});
await admin(`DROP DATABASE IF EXISTS ${db} WITH (FORCE)`).catch(() => {});
process.exit(0);
