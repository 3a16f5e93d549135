//! Connection handling: the tenant pool (`SET ROLE genesis_app`) and the
//! system pool (`SET ROLE genesis_system`) opened from one URL, and the
//! tenant-scoped transaction. Must never hand out a tenant-pool connection
//! whose transaction has not set `genesis.tenant_id` first.

use std::time::Duration;

use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use sqlx::{Executor, PgConnection, PgPool, Postgres, Transaction};
use uuid::Uuid;

use crate::error::StoreError;

/// The default [`StoreOptions::idle_in_transaction_timeout`]. A caller that
/// holds a store transaction open across other I/O (the outbox publisher
/// waits for JetStream acks inside its batch) must bound that wait well
/// below it.
pub const DEFAULT_IDLE_IN_TRANSACTION_TIMEOUT: Duration = Duration::from_secs(60);

/// Pool sizes and input limits. `Default` suits a service; tests use it too.
#[derive(Debug, Clone)]
pub struct StoreOptions {
    /// Connections in the tenant pool (`genesis_app`).
    pub tenant_pool_size: u32,
    /// Connections in the system pool (`genesis_system`).
    pub system_pool_size: u32,
    /// How long to wait for a pooled connection.
    pub acquire_timeout: Duration,
    /// Largest JSON event payload `enqueue` accepts, in bytes.
    pub max_event_payload_bytes: usize,
    /// How concurrent claims, call-attempt records and completions share
    /// statements ([`crate::batch`]).
    pub batch: crate::batch::BatchOptions,
    /// PostgreSQL's `idle_in_transaction_session_timeout` for every store
    /// connection. The store's transactions wait on nothing but their own
    /// statements (and the outbox on its bounded publish acks), so one idle
    /// this long was abandoned by a bug; the server then ends the session,
    /// which rolls it back and frees its row locks instead of stalling every
    /// tick that needs them.
    pub idle_in_transaction_timeout: Duration,
    /// The `application_name` every connection reports (`pg_stat_activity`,
    /// the server's `%a` log prefix), so an operator can tell which service
    /// holds a connection or ran a statement. One the URL sets wins.
    pub application_name: Option<String>,
}

impl Default for StoreOptions {
    fn default() -> Self {
        Self {
            tenant_pool_size: 16,
            system_pool_size: 4,
            acquire_timeout: Duration::from_secs(30),
            max_event_payload_bytes: genesis_core::AgentDispatcherOptions::default()
                .max_event_payload_bytes,
            batch: crate::batch::BatchOptions::default(),
            idle_in_transaction_timeout: DEFAULT_IDLE_IN_TRANSACTION_TIMEOUT,
            application_name: None,
        }
    }
}

/// Cumulative database counters from `pg_stat_database` (`None` when the
/// statistics collector has no row for the database).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DatabaseStats {
    /// Deadlocks detected.
    pub deadlocks: Option<i64>,
    /// Transactions rolled back.
    pub rollbacks: Option<i64>,
}

/// The store handle: cheap to clone, shared by every task of a service.
#[derive(Debug, Clone)]
pub struct Store {
    tenant: PgPool,
    system: PgPool,
    options: StoreOptions,
    batches: std::sync::Arc<crate::batch::Batches>,
}

/// A transaction on the tenant pool with `genesis.tenant_id` already set
/// (transaction-local), so every statement in it is confined by RLS to one
/// tenant. Dropped without [`TenantTx::commit`] it rolls back.
pub struct TenantTx {
    tx: Transaction<'static, Postgres>,
    tenant_id: Uuid,
}

impl TenantTx {
    /// The tenant this transaction is confined to.
    pub fn tenant_id(&self) -> Uuid {
        self.tenant_id
    }

    /// The connection, for statements of other repositories in this crate
    /// or of callers that need several writes in one transaction.
    pub fn conn(&mut self) -> &mut PgConnection {
        &mut self.tx
    }

    /// Commit every statement made through this transaction.
    pub async fn commit(self) -> Result<(), StoreError> {
        self.tx.commit().await.map_err(StoreError::from)
    }

    /// Roll back explicitly (dropping does the same).
    pub async fn rollback(self) -> Result<(), StoreError> {
        self.tx.rollback().await.map_err(StoreError::from)
    }
}

/// `url` parsed, with `application_name` set when the URL names none (an
/// operator's own choice in the URL wins). Every pool a service opens goes
/// through this, so all of its connections carry its name.
pub fn connect_options(
    url: &str,
    application_name: Option<&str>,
) -> Result<PgConnectOptions, StoreError> {
    let opts: PgConnectOptions = url
        .parse()
        .map_err(|e: sqlx::Error| StoreError::invalid("database_url", e.to_string()))?;
    Ok(named(opts, application_name))
}

fn named(opts: PgConnectOptions, application_name: Option<&str>) -> PgConnectOptions {
    match application_name {
        Some(name) if opts.get_application_name().is_none() => opts.application_name(name),
        _ => opts,
    }
}

fn pool_with_role(
    opts: PgConnectOptions,
    size: u32,
    acquire_timeout: Duration,
    set_role: &'static str,
) -> PgPool {
    PgPoolOptions::new()
        .max_connections(size)
        .acquire_timeout(acquire_timeout)
        // sqlx pings every connection when it is returned to the pool (a
        // round trip, unconditionally) and, by default, again when it is
        // checked out: two extra round trips around every statement or
        // transaction. The release ping already proves an idle connection
        // healthy, so the checkout ping is dropped; a backend terminated
        // while idle fails its next statement, which the callers' retries
        // (a NAKed tick, a retried RPC) absorb — the fault suite's
        // terminate-backends case covers it.
        .test_before_acquire(false)
        .after_connect(move |conn, _meta| {
            Box::pin(async move {
                conn.execute(set_role).await?;
                Ok(())
            })
        })
        .connect_lazy_with(opts)
}

impl Store {
    /// Open both pools against `url`. Connections are made lazily; the first
    /// statement surfaces a bad URL or an unreachable server as
    /// [`StoreError::Database`].
    pub async fn connect(url: &str, options: StoreOptions) -> Result<Store, StoreError> {
        let opts = connect_options(url, None)?;
        options.batch.check()?;
        let store = Self::from_options(opts, options);
        store.ping().await?;
        Ok(store)
    }

    /// Build a store on the database of an existing pool (the one
    /// `sqlx::test` hands a test), with its own role-switching pools.
    pub fn from_pool(pool: &PgPool) -> Store {
        Self::from_pool_with(pool, StoreOptions::default())
    }

    /// [`Store::from_pool`] with explicit options.
    pub fn from_pool_with(pool: &PgPool, options: StoreOptions) -> Store {
        let opts = (*pool.connect_options()).clone();
        Self::from_options(opts, options)
    }

    fn from_options(opts: PgConnectOptions, options: StoreOptions) -> Store {
        let opts = named(opts, options.application_name.as_deref());
        // A startup parameter, so it holds from the first statement and for
        // both roles; appended to any `options` the URL carries.
        let opts = opts.options([(
            "idle_in_transaction_session_timeout",
            format!(
                "{}ms",
                options.idle_in_transaction_timeout.as_millis().max(1)
            ),
        )]);
        let tenant = pool_with_role(
            opts.clone(),
            options.tenant_pool_size,
            options.acquire_timeout,
            "SET ROLE genesis_app",
        );
        let system = pool_with_role(
            opts,
            options.system_pool_size,
            options.acquire_timeout,
            "SET ROLE genesis_system",
        );
        Store {
            tenant,
            system,
            batches: std::sync::Arc::new(crate::batch::Batches::new(options.batch)),
            options,
        }
    }

    /// The options this store was built with.
    pub fn options(&self) -> &StoreOptions {
        &self.options
    }

    /// Check both pools can connect and switch role (used by `/readyz`).
    pub async fn ping(&self) -> Result<(), StoreError> {
        sqlx::query("SELECT 1").execute(&self.tenant).await?;
        sqlx::query("SELECT 1").execute(&self.system).await?;
        Ok(())
    }

    /// Deadlocks and rolled-back transactions of the current database, as
    /// cumulative counters since PostgreSQL last reset its statistics
    /// (`pg_stat_database`). The ops digest samples them on a timer and
    /// takes deltas over a window; nothing tenant-scoped is read.
    pub async fn database_stats(&self) -> Result<DatabaseStats, StoreError> {
        let (deadlocks, rollbacks): (Option<i64>, Option<i64>) = sqlx::query_as(
            "SELECT deadlocks, xact_rollback FROM pg_stat_database WHERE datname = current_database()",
        )
        .fetch_optional(&self.system)
        .await?
        .unwrap_or((None, None));
        Ok(DatabaseStats {
            deadlocks,
            rollbacks,
        })
    }

    /// Apply the embedded migrations. Runs as the login user (the owner of
    /// the schema), not as either service role. The owner must be able to
    /// create and alter the two service roles (a superuser, or on
    /// PostgreSQL 16 a role with CREATEROLE and BYPASSRLS); the services
    /// then log in as another role, which [`crate::roles::grant_service_role`]
    /// prepares.
    pub async fn migrate(url: &str) -> Result<(), StoreError> {
        let pool = PgPoolOptions::new()
            .max_connections(1)
            .connect(url)
            .await
            .map_err(StoreError::from)?;
        crate::MIGRATOR
            .run(&pool)
            .await
            .map_err(|e| StoreError::Database(format!("migration failed: {e}")))?;
        pool.close().await;
        Ok(())
    }

    /// Begin a tenant-scoped transaction: `set_config('genesis.tenant_id', ..,
    /// true)` is its first statement, so RLS confines everything after it.
    pub async fn tenant_tx(&self, tenant_id: Uuid) -> Result<TenantTx, StoreError> {
        let mut tx = self.tenant.begin().await?;
        sqlx::query("SELECT set_config('genesis.tenant_id', $1, true)")
            .bind(tenant_id.to_string())
            .execute(&mut *tx)
            .await?;
        Ok(TenantTx { tx, tenant_id })
    }

    /// The tenant pool, for single-statement calls of the tick functions
    /// (each sets the tenant itself, so one autocommit call is one
    /// tenant-scoped transaction).
    pub(crate) fn tenant_pool(&self) -> &PgPool {
        &self.tenant
    }

    /// Statements and calls of the batched hot functions so far
    /// ([`crate::batch::BatchCounters`]), for the service's metrics.
    pub fn batch_counters(&self) -> std::sync::Arc<crate::batch::BatchCounters> {
        self.batches.counters()
    }

    /// Run one of the tick's hot server functions on the tenant pool,
    /// sharing a statement with concurrent calls of it ([`crate::batch`]).
    pub(crate) async fn batched(
        &self,
        call: crate::batch::Call,
        key: Uuid,
        args: serde_json::Value,
    ) -> Result<serde_json::Value, StoreError> {
        self.batches.call(&self.tenant, call, key, args).await
    }

    /// The system pool (`genesis_system`): platform-wide loops and tenant
    /// admin only. It does not bypass row-level security: each table states
    /// in a `TO genesis_system` policy which of its rows and commands the
    /// system path may use, and any other table is closed to it.
    pub(crate) fn system_pool(&self) -> &PgPool {
        &self.system
    }

    /// Close both pools (graceful shutdown).
    pub async fn close(&self) {
        self.tenant.close().await;
        self.system.close().await;
    }
}
