//! Coalescing of the tick's hot autocommit calls: concurrent calls of the
//! server functions (the claim, the call-attempt record, the optimistic
//! completion) that arrive while an earlier batch of their queue is in the
//! database are run together as ONE statement, so they share one round
//! trip, one snapshot and one commit (the per-transaction cost was about
//! half of a tick's database work). By default the three
//! functions share one queue, so one statement may carry claims, records
//! and completions of different instances; each call
//! runs its own function through a `CASE` on its name.
//!
//! Each call keeps its own answer: the functions answer refusals as JSON,
//! they do not raise. When a batch of several fails as a whole (a raised
//! error rolls back every call in it), each call is run again alone and
//! gets its own result, so one call's error never becomes another's.
//! Calls run in the order of their key (the instance id), so two batches
//! take the instance rows' locks in the same order.
//!
//! Must never hold a call back to wait for company: a worker takes what is
//! queued when it is free, at least one call, at most `max` — under light
//! load every batch is one call, as before. Must never run anything but
//! the functions' own calls, each of which sets its tenant first.

use std::sync::Arc;

use sqlx::PgPool;
use tokio::sync::{Mutex, mpsc, oneshot};
use uuid::Uuid;

use crate::error::StoreError;

/// How the hot calls are coalesced.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchOptions {
    /// Most calls in one statement; 1 runs every call alone.
    pub max: usize,
    /// Statements of one queue in the database at once (each on its own
    /// pooled connection).
    pub workers: usize,
    /// Whether the tick's calls of every function share one queue (so a
    /// statement may carry claims, call records and completions together)
    /// instead of one queue per function.
    pub shared: bool,
}

impl Default for BatchOptions {
    fn default() -> Self {
        Self::DEFAULT
    }
}

impl BatchOptions {
    /// The shipped settings (the services' configuration defaults).
    pub const DEFAULT: BatchOptions = BatchOptions {
        max: 16,
        workers: 2,
        shared: true,
    };
    /// The largest `max` accepted.
    pub const MAX_CALLS: usize = 256;
    /// The largest `workers` accepted.
    pub const MAX_WORKERS: usize = 16;

    /// Refuse settings that would stall every call (no worker) or never
    /// run one (no room in a batch).
    pub fn check(&self) -> Result<(), StoreError> {
        for (setting, value, most) in [
            ("batch max", self.max, Self::MAX_CALLS),
            ("batch workers", self.workers, Self::MAX_WORKERS),
        ] {
            if !(1..=most).contains(&value) {
                return Err(StoreError::invalid(
                    setting,
                    format!("must be between 1 and {most}"),
                ));
            }
        }
        Ok(())
    }
}

/// One server function's call: its name (in the counters, and the `CASE`
/// label that picks its function in a statement, so a plain identifier),
/// and an SQL expression over `a`, the call's arguments as a JSON array
/// (`a->>0` is the first).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Call {
    pub(crate) name: &'static str,
    pub(crate) sql: &'static str,
}

/// Statements run and calls answered, per call name, since the store was
/// built: calls ÷ statements is the mean batch size.
#[derive(Debug, Default)]
pub struct BatchCounters {
    counts: std::sync::Mutex<std::collections::BTreeMap<&'static str, (u64, u64)>>,
}

impl BatchCounters {
    /// Count one batch of `calls` (a name per call): the statement counts
    /// once for each function it carried, and a re-run call once more.
    fn add(&self, calls: &[&'static str], rerun: bool) {
        if let Ok(mut c) = self.counts.lock() {
            for (i, name) in calls.iter().enumerate() {
                let e = c.entry(name).or_insert((0, 0));
                if !calls[..i].contains(name) {
                    e.0 += 1;
                }
                if rerun {
                    e.0 += 1;
                }
                e.1 += 1;
            }
        }
    }

    /// `(call name, statements, calls)` for every call run so far.
    pub fn snapshot(&self) -> Vec<(&'static str, u64, u64)> {
        self.counts
            .lock()
            .map(|c| c.iter().map(|(k, (s, n))| (*k, *s, *n)).collect())
            .unwrap_or_default()
    }
}

struct Job {
    call: Call,
    key: Uuid,
    args: serde_json::Value,
    reply: oneshot::Sender<Result<serde_json::Value, StoreError>>,
}

/// Start the workers of one queue; the sender is its queue.
fn start(
    pool: PgPool,
    options: BatchOptions,
    counters: Arc<BatchCounters>,
) -> mpsc::UnboundedSender<Job> {
    let (tx, rx) = mpsc::unbounded_channel::<Job>();
    let rx = Arc::new(Mutex::new(rx));
    let texts = Arc::new(Texts::default());
    let max = options.max.max(1);
    for _ in 0..options.workers.max(1) {
        let (rx, pool, texts) = (rx.clone(), pool.clone(), texts.clone());
        let counters = counters.clone();
        tokio::spawn(async move {
            loop {
                let mut jobs = Vec::new();
                {
                    let mut rx = rx.lock().await;
                    match rx.recv().await {
                        Some(job) => jobs.push(job),
                        // Every sender is gone: the store was dropped.
                        None => return,
                    }
                    while jobs.len() < max {
                        match rx.try_recv() {
                            Ok(job) => jobs.push(job),
                            Err(_) => break,
                        }
                    }
                }
                let calls = jobs.iter().map(|j| j.call.name).collect::<Vec<_>>();
                let rerun = run(&pool, &texts, jobs).await;
                counters.add(&calls, rerun);
            }
        });
    }
    tx
}

/// The statement text for each set of calls a batch has carried: one
/// `CASE` branch per function, in name order, so a set has one text (and
/// one prepared statement per connection).
#[derive(Default)]
struct Texts {
    by_calls: std::sync::Mutex<Vec<(Vec<&'static str>, Arc<str>)>>,
}

impl Texts {
    fn text(&self, jobs: &[Job]) -> Arc<str> {
        let mut calls: Vec<Call> = jobs.iter().map(|j| j.call).collect();
        calls.sort_by_key(|c| c.name);
        calls.dedup_by_key(|c| c.name);
        let mut known = match self.by_calls.lock() {
            Ok(k) => k,
            Err(poisoned) => poisoned.into_inner(),
        };
        let same =
            |names: &Vec<&'static str>| names.iter().copied().eq(calls.iter().map(|c| c.name));
        if let Some((_, text)) = known.iter().find(|(names, _)| same(names)) {
            return text.clone();
        }
        let names = calls.iter().map(|c| c.name).collect();
        let branches: String = calls
            .iter()
            .map(|c| format!(" WHEN '{}' THEN {}", c.name, c.sql))
            .collect();
        let text: Arc<str> = format!(
            "SELECT x.ord, CASE x.e->>0{branches} END \
             FROM jsonb_array_elements($1) WITH ORDINALITY AS x(e, ord) \
             CROSS JOIN LATERAL (SELECT x.e->1) AS y(a)"
        )
        .into();
        known.push((names, text.clone()));
        text
    }
}

/// Run `jobs` as one statement and answer each. If one of the calls made
/// the statement fail ([`refused_by_the_statement`]: it rolled back, so
/// nothing of it was written) and there were several, each is run again
/// alone. Any other failure (a lost connection, a terminated backend, a
/// server out of resources) may leave the outcome unknown, so every call
/// gets that error, as a lone call would: none is run twice. Answers
/// whether the calls were run again alone.
async fn run(pool: &PgPool, texts: &Texts, mut jobs: Vec<Job>) -> bool {
    jobs.sort_by_key(|j| j.key);
    match execute(pool, &texts.text(&jobs), &jobs).await {
        Ok(rows) => {
            let answers = answers(rows, jobs.len());
            for (job, answer) in jobs.into_iter().zip(answers) {
                let _ = job.reply.send(answer);
            }
            false
        }
        Err(e) if jobs.len() > 1 && refused_by_the_statement(&e) => {
            tracing::debug!(error = %e, calls = jobs.len(), "batch refused; running its calls alone");
            for job in jobs {
                let alone = std::slice::from_ref(&job);
                let answer = match execute(pool, &texts.text(alone), alone).await {
                    Ok(rows) => answers(rows, 1).pop().unwrap_or_else(|| Err(missing(1))),
                    Err(e) => Err(StoreError::from(e)),
                };
                let _ = job.reply.send(answer);
            }
            true
        }
        Err(e) => {
            let e = StoreError::from(e);
            for job in jobs {
                let _ = job.reply.send(Err(e.clone()));
            }
            false
        }
    }
}

/// Whether the statement itself failed on something a call did (bad
/// data, a constraint, a raised exception, a deadlock or serialization
/// failure), which the server answers before the implicit transaction
/// commits. Connection loss, operator intervention (class 57: a
/// terminated backend, possibly after a local commit awaiting a standby),
/// resource and system errors are not.
fn refused_by_the_statement(e: &sqlx::Error) -> bool {
    let sqlx::Error::Database(db) = e else {
        return false;
    };
    let code = db.code().unwrap_or_default();
    ["22", "23", "40", "42", "P0"]
        .iter()
        .any(|class| code.starts_with(class))
}

fn missing(ord: i64) -> StoreError {
    StoreError::Database(format!("batched call {ord} returned no row"))
}

/// One statement for `jobs`: its rows, (1-based position, answer).
async fn execute(
    pool: &PgPool,
    sql: &Arc<str>,
    jobs: &[Job],
) -> Result<Vec<(i64, Option<serde_json::Value>)>, sqlx::Error> {
    let args: Vec<(&str, &serde_json::Value)> =
        jobs.iter().map(|j| (j.call.name, &j.args)).collect();
    // The text is one of the crate's `Call` constants in a fixed frame;
    // the calls' arguments are bound, never spliced.
    sqlx::query_as(sqlx::AssertSqlSafe(sql.clone()))
        .bind(sqlx::types::Json(args))
        .fetch_all(pool)
        .await
}

/// The answers of `n` calls in order, from a statement's rows.
fn answers(
    rows: Vec<(i64, Option<serde_json::Value>)>,
    n: usize,
) -> Vec<Result<serde_json::Value, StoreError>> {
    let mut slots: Vec<Option<serde_json::Value>> = vec![None; n];
    for (ord, answer) in rows {
        if let Some(slot) = usize::try_from(ord - 1).ok().and_then(|i| slots.get_mut(i)) {
            *slot = answer;
        }
    }
    slots
        .into_iter()
        .zip(1..)
        .map(|(a, ord)| a.ok_or_else(|| missing(ord)))
        .collect()
}

/// The queue name when every call shares one.
const SHARED: &str = "shared";

/// The store's batchers, one queue per [`Call`] or one shared by all
/// (`BatchOptions::shared`), started on first use (the
/// runtime is the caller's).
pub(crate) struct Batches {
    options: BatchOptions,
    counters: Arc<BatchCounters>,
    /// Each started queue, by its call's name (or `SHARED`).
    started: std::sync::Mutex<Vec<(&'static str, mpsc::UnboundedSender<Job>)>>,
}

impl std::fmt::Debug for Batches {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Batches")
            .field("options", &self.options)
            .finish_non_exhaustive()
    }
}

impl Batches {
    pub(crate) fn new(options: BatchOptions) -> Batches {
        Batches {
            options,
            counters: Arc::default(),
            started: std::sync::Mutex::new(Vec::new()),
        }
    }

    /// The counters of every call run through these batchers.
    pub(crate) fn counters(&self) -> Arc<BatchCounters> {
        self.counters.clone()
    }

    /// Run `call` with `args`, batched with concurrent calls of the same
    /// function; `key` orders the calls of a batch.
    pub(crate) async fn call(
        &self,
        pool: &PgPool,
        call: Call,
        key: Uuid,
        args: serde_json::Value,
    ) -> Result<serde_json::Value, StoreError> {
        let tx = {
            let mut started = self
                .started
                .lock()
                .map_err(|_| StoreError::Database("batch registry poisoned".to_owned()))?;
            let queue = if self.options.shared {
                SHARED
            } else {
                call.name
            };
            match started.iter().find(|(name, _)| *name == queue) {
                Some((_, tx)) => tx.clone(),
                None => {
                    let tx = start(pool.clone(), self.options, self.counters.clone());
                    started.push((queue, tx.clone()));
                    tx
                }
            }
        };
        let (reply, answer) = oneshot::channel();
        tx.send(Job {
            call,
            key,
            args,
            reply,
        })
        .map_err(|_| StoreError::Database("batch worker stopped".to_owned()))?;
        answer
            .await
            .map_err(|_| StoreError::Database("batch worker dropped the call".to_owned()))?
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use serde_json::json;
    use sqlx::PgPool;
    use uuid::Uuid;

    use super::*;

    /// Sleeps, writes one row (in statement order) and answers 100 / v, so
    /// v = 0 raises after its write.
    const PROBE: Call = Call {
        name: "probe",
        sql: "batch_probe((a->>0)::float8, (a->>1)::integer)",
    };

    /// The busy call's answer, the queued calls' answers in order, and the
    /// counters' `(statements, calls)` of the probe.
    type Probed = (
        serde_json::Value,
        Vec<Result<serde_json::Value, StoreError>>,
        (u64, u64),
    );

    async fn probe_schema(pool: &PgPool) -> anyhow::Result<()> {
        sqlx::raw_sql(
            "CREATE TABLE batch_probe_rows (n bigserial PRIMARY KEY, v integer NOT NULL);
             CREATE FUNCTION batch_probe(p_sleep float8, p_v integer) RETURNS jsonb
             LANGUAGE plpgsql AS $$
             BEGIN
                 PERFORM pg_sleep(p_sleep);
                 INSERT INTO batch_probe_rows (v) VALUES (p_v);
                 RETURN jsonb_build_object('v', 100 / p_v, 'tx', txid_current()::text);
             END $$;",
        )
        .execute(pool)
        .await?;
        Ok(())
    }

    /// One call that keeps the single worker busy, then `vs` queued behind
    /// it (keys descending as v ascends); the answers in `vs`' order.
    async fn behind_a_busy_worker(pool: &PgPool, vs: &[i32]) -> anyhow::Result<Probed> {
        behind_a_busy_worker_then(pool, vs, 0.0, async {}).await
    }

    /// Batchers with one worker, kept busy for 0.4 s by a probe call (v = 1)
    /// that is in the database when this returns.
    async fn busy_worker(
        pool: &PgPool,
        shared: bool,
    ) -> (
        Arc<Batches>,
        tokio::task::JoinHandle<Result<serde_json::Value, StoreError>>,
    ) {
        let batches = Arc::new(Batches::new(BatchOptions {
            max: 8,
            workers: 1,
            shared,
        }));
        let busy = {
            let (b, p) = (batches.clone(), pool.clone());
            tokio::spawn(async move { b.call(&p, PROBE, Uuid::nil(), json!([0.4, 1])).await })
        };
        tokio::time::sleep(Duration::from_millis(100)).await;
        (batches, busy)
    }

    /// [`behind_a_busy_worker`] whose queued calls each sleep `sleep`
    /// seconds, with `meanwhile` run once they are queued.
    async fn behind_a_busy_worker_then(
        pool: &PgPool,
        vs: &[i32],
        sleep: f64,
        meanwhile: impl std::future::Future<Output = ()>,
    ) -> anyhow::Result<Probed> {
        let (batches, busy) = busy_worker(pool, false).await;
        let queued: Vec<_> = vs
            .iter()
            .map(|&v| {
                let (b, p) = (batches.clone(), pool.clone());
                let key = Uuid::from_u128(1_000 - v as u128);
                tokio::spawn(async move { b.call(&p, PROBE, key, json!([sleep, v])).await })
            })
            .collect();
        meanwhile.await;
        let busy = busy.await??;
        let mut answers = Vec::new();
        for q in queued {
            answers.push(q.await?);
        }
        let counts = batches
            .counters()
            .snapshot()
            .into_iter()
            .find(|(name, ..)| *name == "probe")
            .map_or((0, 0), |(_, s, c)| (s, c));
        Ok((busy, answers, counts))
    }

    /// The distinct transactions the probe answers ran in.
    fn transactions<'a>(
        answers: impl IntoIterator<Item = &'a serde_json::Value>,
    ) -> std::collections::HashSet<&'a str> {
        answers
            .into_iter()
            .filter_map(|a| a["tx"].as_str())
            .collect()
    }

    async fn rows(pool: &PgPool) -> anyhow::Result<Vec<i32>> {
        Ok(
            sqlx::query_scalar("SELECT v FROM batch_probe_rows ORDER BY n")
                .fetch_all(pool)
                .await?,
        )
    }

    #[sqlx::test(migrations = false)]
    async fn calls_queued_behind_a_busy_worker_share_one_statement_in_key_order(
        pool: PgPool,
    ) -> anyhow::Result<()> {
        probe_schema(&pool).await?;
        let (busy, answers, counts) = behind_a_busy_worker(&pool, &[2, 4, 5, 10]).await?;
        assert_eq!(counts, (2, 5), "two statements answered five calls");
        let answers = answers.into_iter().collect::<Result<Vec<_>, _>>()?;
        let values: Vec<i64> = answers.iter().filter_map(|a| a["v"].as_i64()).collect();
        assert_eq!(
            values,
            vec![50, 25, 20, 10],
            "each call keeps its own answer"
        );
        let txs = transactions(&answers);
        assert_eq!(txs.len(), 1, "the four queued calls ran in one transaction");
        assert_ne!(busy["tx"].as_str(), answers[0]["tx"].as_str());
        // Lower keys first: v = 10 has the lowest key.
        assert_eq!(rows(&pool).await?, vec![1, 10, 5, 4, 2]);
        Ok(())
    }

    /// Another function's call on the same probe: it writes and answers
    /// for ten times its value.
    const PROBE_TENFOLD: Call = Call {
        name: "probe_tenfold",
        sql: "batch_probe((a->>0)::float8, 10 * (a->>1)::integer)",
    };

    #[sqlx::test(migrations = false)]
    async fn a_shared_queue_runs_calls_of_different_functions_in_one_statement(
        pool: PgPool,
    ) -> anyhow::Result<()> {
        probe_schema(&pool).await?;
        let (batches, busy) = busy_worker(&pool, true).await;
        let queued: Vec<_> = [(PROBE, 3, 2), (PROBE_TENFOLD, 2, 1), (PROBE, 1, 5)]
            .into_iter()
            .map(|(call, key, v)| {
                let (b, p) = (batches.clone(), pool.clone());
                tokio::spawn(
                    async move { b.call(&p, call, Uuid::from_u128(key), json!([0, v])).await },
                )
            })
            .collect();
        let busy = busy.await??;
        let mut answers = Vec::new();
        for q in queued {
            answers.push(q.await??);
        }
        let values: Vec<i64> = answers.iter().filter_map(|a| a["v"].as_i64()).collect();
        assert_eq!(
            values,
            vec![50, 10, 20],
            "each call answered by its own function"
        );
        let txs = transactions(&answers);
        assert_eq!(
            txs.len(),
            1,
            "the three queued calls ran in one transaction"
        );
        assert_ne!(busy["tx"].as_str(), answers[0]["tx"].as_str());
        // In key order across the two functions.
        assert_eq!(rows(&pool).await?, vec![1, 5, 10, 2]);
        assert_eq!(
            batches.counters().snapshot(),
            vec![("probe", 2, 3), ("probe_tenfold", 1, 1)],
            "statements that carried each function, and its calls"
        );
        Ok(())
    }

    #[sqlx::test(migrations = false)]
    async fn a_failed_batch_runs_each_call_alone_and_only_the_failing_call_errs(
        pool: PgPool,
    ) -> anyhow::Result<()> {
        probe_schema(&pool).await?;
        let (_, answers, counts) = behind_a_busy_worker(&pool, &[2, 0, 4]).await?;
        assert_eq!(
            counts,
            (5, 4),
            "the busy call, the refused batch, then three alone"
        );
        let ok: Vec<i64> = answers
            .iter()
            .filter_map(|a| a.as_ref().ok().and_then(|a| a["v"].as_i64()))
            .collect();
        assert_eq!(ok, vec![50, 25]);
        let err = answers[1].as_ref().err().map(ToString::to_string);
        assert!(
            err.as_deref()
                .is_some_and(|e| e.contains("division by zero")),
            "the failing call gets its own error: {err:?}"
        );
        let txs = transactions(answers.iter().filter_map(|a| a.as_ref().ok()));
        assert_eq!(txs.len(), 2, "the good calls ran again, each alone");
        // The failed batch wrote nothing; each good call's row is there once.
        let mut written = rows(&pool).await?;
        written.sort_unstable();
        assert_eq!(written, vec![1, 2, 4]);
        Ok(())
    }

    #[sqlx::test(migrations = false)]
    async fn a_batch_whose_connection_is_lost_fails_every_call_and_runs_none_again(
        pool: PgPool,
    ) -> anyhow::Result<()> {
        probe_schema(&pool).await?;
        let killer = pool.clone();
        let kill = async move {
            // Once the busy call's row is committed, the only probe
            // statement in this test's database is the queued pair's, which
            // sleeps until its backend is terminated. (Other tests run the
            // probe beside this one, in their own databases.)
            let running = "SELECT pid FROM pg_stat_activity
                            WHERE datname = current_database() AND pid <> pg_backend_pid()
                              AND state = 'active' AND query LIKE '%batch_probe((a->>0)%'";
            let mut killed: Vec<bool> = Vec::new();
            for _ in 0..400 {
                let busy_done: bool = sqlx::query_scalar(
                    "SELECT EXISTS (SELECT 1 FROM batch_probe_rows WHERE v = 1)",
                )
                .fetch_one(&killer)
                .await
                .unwrap_or(false);
                let pids: Vec<i32> = sqlx::query_scalar(running)
                    .fetch_all(&killer)
                    .await
                    .unwrap_or_default();
                if busy_done && pids.len() == 1 {
                    killed = sqlx::query_scalar("SELECT pg_terminate_backend($1)")
                        .bind(pids[0])
                        .fetch_all(&killer)
                        .await
                        .unwrap_or_default();
                    break;
                }
                tokio::time::sleep(Duration::from_millis(25)).await;
            }
            assert_eq!(killed, vec![true], "the batch statement was terminated");
        };
        let (_, answers, counts) = behind_a_busy_worker_then(&pool, &[2, 4], 5.0, kill).await?;
        assert_eq!(counts, (2, 3), "the lost batch was not run again");
        assert!(answers.iter().all(Result::is_err), "{answers:?}");
        assert_eq!(
            rows(&pool).await?,
            vec![1],
            "neither call was run again alone"
        );
        Ok(())
    }

    #[sqlx::test(migrations = false)]
    async fn a_lone_call_runs_at_once_and_its_error_is_its_own(pool: PgPool) -> anyhow::Result<()> {
        probe_schema(&pool).await?;
        let batches = Batches::new(BatchOptions::default());
        let one = batches
            .call(&pool, PROBE, Uuid::nil(), json!([0, 5]))
            .await?;
        assert_eq!(one["v"], 20);
        let err = batches.call(&pool, PROBE, Uuid::nil(), json!([0, 0])).await;
        assert!(matches!(err, Err(StoreError::Database(_))), "{err:?}");
        assert_eq!(rows(&pool).await?, vec![5]);
        Ok(())
    }

    #[test]
    fn options_that_would_stall_or_never_run_a_call_are_refused() {
        assert!(BatchOptions::default().check().is_ok());
        assert!(
            BatchOptions {
                max: 1,
                workers: 1,
                shared: false
            }
            .check()
            .is_ok()
        );
        for bad in [
            BatchOptions {
                max: 0,
                workers: 2,
                shared: false,
            },
            BatchOptions {
                max: 257,
                workers: 2,
                shared: false,
            },
            BatchOptions {
                max: 16,
                workers: 0,
                shared: false,
            },
            BatchOptions {
                max: 16,
                workers: 17,
                shared: false,
            },
        ] {
            assert!(
                matches!(bad.check(), Err(StoreError::InvalidArgument { .. })),
                "{bad:?}"
            );
        }
    }
}
