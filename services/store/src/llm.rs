//! LLM presets, call-site bindings, the global pricing table, and the
//! provenance of agent LLM calls (`llm_call_snapshots` + `llm_call_attempts`,
//! spec §3.5, §3.7). Owns storing presets (credential names only), binding
//! them to sites, reading the bindings of a site chain in one statement, and
//! recording an attempt together with its credit drawdown in one
//! transaction. Must never store a secret, never compute a price itself (the
//! supervisor prices usage) and never accept a cost from an agent pod.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::credit::CreditWindow;
use crate::error::StoreError;
use crate::rows::{check_text, decode, decode_all};
use crate::store::Store;

/// Outcomes an attempt may record (the wire's `CallAttempt.outcome`).
pub const ATTEMPT_OUTCOMES: &[&str] = &[
    "success",
    "rate_limited",
    "unauthorized",
    "server_error",
    "timeout",
    "error",
];

/// One (model, provider, backend) couple with its credential names in
/// priority order.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PresetCouple {
    pub model: String,
    pub provider: String,
    #[serde(default)]
    pub backend: String,
    #[serde(default)]
    pub credentials: Vec<String>,
}

impl From<&genesis_core::presets::DefaultCouple> for PresetCouple {
    fn from(c: &genesis_core::presets::DefaultCouple) -> Self {
        PresetCouple {
            model: c.model.to_owned(),
            provider: c.provider.to_owned(),
            backend: c.backend.to_owned(),
            credentials: c.credentials.iter().map(|n| (*n).to_owned()).collect(),
        }
    }
}

/// An `llm_presets` row.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct PresetRow {
    pub id: Uuid,
    pub tenant_id: Uuid,
    pub name: String,
    pub model: String,
    pub provider: String,
    pub backend: String,
    pub credentials: Vec<String>,
    pub fallback: Vec<PresetCouple>,
    pub overlays: serde_json::Value,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

impl PresetRow {
    /// The primary couple followed by the fallback chain: the order an
    /// invoker tries them in.
    pub fn couples(&self) -> Vec<PresetCouple> {
        let mut out = vec![PresetCouple {
            model: self.model.clone(),
            provider: self.provider.clone(),
            backend: self.backend.clone(),
            credentials: self.credentials.clone(),
        }];
        out.extend(self.fallback.iter().cloned());
        out
    }
}

/// A preset to create.
#[derive(Debug, Clone, PartialEq)]
pub struct NewPreset {
    pub name: String,
    pub primary: PresetCouple,
    pub fallback: Vec<PresetCouple>,
    pub overlays: serde_json::Value,
}

/// An `llm_pricing` row, dollars per million tokens.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct PricingRow {
    pub model: String,
    pub input_usd_per_mtok: f64,
    pub output_usd_per_mtok: f64,
    pub cache_read_usd_per_mtok: f64,
    /// Prompt tokens written to the provider's cache (Anthropic's
    /// `cache_creation_input_tokens`).
    #[serde(default)]
    pub cache_write_usd_per_mtok: f64,
    pub updated_at: DateTime<Utc>,
}

impl PricingRow {
    /// The four prices as core's cost formula takes them.
    pub fn price(&self) -> genesis_core::pricing::ModelPrice {
        genesis_core::pricing::ModelPrice {
            input_usd_per_mtok: self.input_usd_per_mtok,
            output_usd_per_mtok: self.output_usd_per_mtok,
            cache_read_usd_per_mtok: self.cache_read_usd_per_mtok,
            cache_write_usd_per_mtok: self.cache_write_usd_per_mtok,
        }
    }
}

/// The price row chosen for an attempt and how it was matched.
#[derive(Debug, Clone, PartialEq)]
pub struct ChosenPrice {
    pub row: PricingRow,
    /// `Exact` or `Prefix`.
    pub source: genesis_core::pricing::PricingSource,
}

/// The row among `rows` that prices an attempt of `requested` served as
/// `served`, by core's one matching rule ([`genesis_core::pricing::choose_price`]).
pub fn choose_pricing(served: &str, requested: &str, rows: &[PricingRow]) -> Option<ChosenPrice> {
    let (name, source) = genesis_core::pricing::choose_price(
        served,
        requested,
        rows.iter().map(|r| r.model.as_str()),
    )?;
    rows.iter().find(|r| r.model == name).map(|r| ChosenPrice {
        row: r.clone(),
        source,
    })
}

/// Most models a credit reservation's chain may name.
pub const MAX_CHAIN_MODELS: usize = 64;

/// The chain a turn's credit hold is computed from: 1 to
/// [`MAX_CHAIN_MODELS`] models, each 1 to 200 bytes. The one check of an
/// agent's ReserveCredit and a coder's ReserveCoderCredit.
pub fn check_chain_models(models: &[String]) -> Result<(), StoreError> {
    if models.is_empty() || models.len() > MAX_CHAIN_MODELS {
        return Err(StoreError::invalid(
            "models",
            format!("must name 1 to {MAX_CHAIN_MODELS} models of the chain"),
        ));
    }
    if let Some(i) = models
        .iter()
        .position(|m| m.trim().is_empty() || m.len() > 200)
    {
        return Err(StoreError::invalid(
            format!("models[{i}]"),
            "must be 1 to 200 bytes",
        ));
    }
    Ok(())
}

/// An attempt's four disjoint token counts (checked non-negative before).
fn token_usage(a: &NewCallAttempt) -> genesis_core::pricing::TokenUsage {
    let n = |v: i64| u64::try_from(v).unwrap_or(0);
    genesis_core::pricing::TokenUsage {
        input_tokens: n(a.input_tokens),
        output_tokens: n(a.output_tokens),
        cache_read_tokens: n(a.cache_read_tokens),
        cache_write_tokens: n(a.cache_write_tokens),
    }
}

/// The most one turn of a chain of `models` can cost: the dearest of its
/// couples' worst cases (any couple may answer), a model without a row at
/// the fallback price `unpriced`. What an agent's turn and a coder's turn
/// hold against the credit window before they are sent.
pub fn worst_case_usd(
    models: &[String],
    rows: &[PricingRow],
    unpriced: genesis_core::pricing::ModelPrice,
    prompt_tokens: u64,
    max_output_tokens: u64,
) -> f64 {
    models
        .iter()
        .map(|m| {
            let price = choose_pricing("", m, rows)
                .map(|c| c.row.price())
                .unwrap_or(unpriced);
            price.worst_case_usd(prompt_tokens, max_output_tokens)
        })
        .fold(0.0, f64::max)
}

/// Price `attempt` in place: its cost, the row it was billed at and how
/// that row was chosen. The scripted provider is free; a model no row
/// prices is charged `unpriced`, never nothing, so the credit window still
/// draws down. The one pricing rule of an agent's and a coder's attempt.
pub fn apply_price(
    attempt: &mut NewCallAttempt,
    chosen: Option<&ChosenPrice>,
    unpriced: genesis_core::pricing::ModelPrice,
) -> genesis_core::pricing::PricingSource {
    use genesis_core::pricing::{ModelPrice, PricingSource};
    let (price, priced_as, source) = if attempt.provider == genesis_core::presets::SCRIPTED_PROVIDER
    {
        (ModelPrice::FREE, None, PricingSource::Free)
    } else {
        match chosen {
            Some(c) => (c.row.price(), Some(c.row.model.clone()), c.source),
            None => (unpriced, None, PricingSource::Fallback),
        }
    };
    attempt.cost_usd = price.cost_usd(&token_usage(attempt));
    attempt.priced_as = priced_as;
    attempt.pricing_source = Some(source);
    source
}

/// An `llm_call_snapshots` row.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct CallSnapshotRow {
    pub id: Uuid,
    pub tenant_id: Uuid,
    /// The agent instance that made the call; `None` for a coder's.
    pub instance_id: Option<Uuid>,
    /// The coding task a coder's call was made for; `None` for an agent's.
    #[serde(default)]
    pub coding_task_id: Option<Uuid>,
    /// The replay a replay's call was made for (call tag Replay).
    #[serde(default)]
    pub replay_id: Option<Uuid>,
    pub invocation_id: String,
    pub site_id: String,
    pub call_tag: String,
    pub requested_model: String,
    pub served_model: Option<String>,
    pub input_tokens: i64,
    pub output_tokens: i64,
    pub cost_usd: f64,
    pub created_at: DateTime<Utc>,
    /// SHA-256 of the preset prompt overlay the invocation applied (never
    /// the overlay text); `None` when none was.
    #[serde(default)]
    pub prompt_overlay_sha256: Option<String>,
}

/// An `llm_call_attempts` row.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct CallAttemptRow {
    pub id: Uuid,
    pub tenant_id: Uuid,
    pub snapshot_id: Uuid,
    pub ordinal: i32,
    pub provider: String,
    pub credential_name: String,
    pub requested_model: String,
    pub served_model: String,
    pub outcome: String,
    pub usage: serde_json::Value,
    pub latency_ms: i64,
    pub cost_usd: f64,
    pub error_message: String,
    /// The price row's model the attempt was billed at (`None` before
    /// attempts recorded it, and for `fallback` and `free`).
    #[serde(default)]
    pub priced_as: Option<String>,
    /// `exact`, `prefix`, `fallback` or `free`.
    #[serde(default)]
    pub pricing_source: Option<String>,
}

/// One attempt to record, already priced by the caller.
#[derive(Debug, Clone, PartialEq)]
pub struct NewCallAttempt {
    /// The agent instance whose turn made the call. A coder's attempt
    /// ([`Llm::record_coder_attempt`]) is recorded against the task passed
    /// beside it and leaves this and `session` nil.
    pub instance_id: Uuid,
    /// The lease session the attempt was made under.
    pub session: Uuid,
    pub invocation_id: String,
    pub site_id: String,
    pub requested_model: String,
    pub served_model: String,
    pub provider: String,
    pub credential_name: String,
    /// One of [`ATTEMPT_OUTCOMES`].
    pub outcome: String,
    pub input_tokens: i64,
    pub output_tokens: i64,
    pub cache_read_tokens: i64,
    /// Prompt tokens written to the provider's cache (disjoint from
    /// `input_tokens` and `cache_read_tokens`).
    pub cache_write_tokens: i64,
    pub latency_ms: i64,
    pub error_message: String,
    /// Computed by the supervisor from the usage and the pricing table.
    pub cost_usd: f64,
    /// The price row's model the cost was computed with, when a row was.
    pub priced_as: Option<String>,
    /// How the price was chosen; set by the supervisor with the cost.
    pub pricing_source: Option<genesis_core::pricing::PricingSource>,
    /// SHA-256 (64 lowercase hex) of the applied prompt overlay, if any;
    /// kept from the first attempt that reports one.
    pub prompt_overlay_sha256: Option<String>,
}

/// What [`Llm::record_context`] returns.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct RecordContext {
    pub agent_type: genesis_core::AgentType,
    /// `system_configs`: the tenant's rows over the global ones, and the
    /// platform's values for the tenant.
    pub configs: crate::config::TenantConfigs,
    /// Every price row whose model name begins the served or the requested
    /// name: the candidates [`choose_pricing`] picks from.
    #[serde(default)]
    pub prices: Vec<PricingRow>,
    /// The catalogue epoch the price was read at (a price write raises
    /// it), so a price is held only while it is current.
    #[serde(default)]
    pub catalogue_epoch: i64,
}

/// Where an attempt's cost is drawn from.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CreditDraw {
    pub week_start: DateTime<Utc>,
    pub limit_usd: f64,
}

/// The result of [`Llm::record_call_attempt`].
#[derive(Debug, Clone, PartialEq)]
pub struct RecordedAttempt {
    pub snapshot: CallSnapshotRow,
    pub ordinal: i32,
    pub cost_usd: f64,
    pub credit: CreditWindow,
}

fn check_couple(field: &str, c: &PresetCouple) -> Result<(), StoreError> {
    check_text(&format!("{field}.model"), &c.model, 200)?;
    check_text(&format!("{field}.provider"), &c.provider, 100)?;
    if c.backend.len() > 100 {
        return Err(StoreError::invalid(
            format!("{field}.backend"),
            "must be at most 100 bytes",
        ));
    }
    for (i, name) in c.credentials.iter().enumerate() {
        check_text(&format!("{field}.credentials[{i}]"), name, 200)?;
    }
    Ok(())
}

impl NewCallAttempt {
    /// The checks on what the pod reported (everything but the site and the
    /// cost, which the supervisor derives), so a caller holding several
    /// attempts can refuse them all before it writes any.
    pub fn check_reported(&self) -> Result<(), StoreError> {
        check_text("invocation_id", &self.invocation_id, 200)?;
        check_text("attempt.requested_model", &self.requested_model, 200)?;
        check_text("attempt.provider", &self.provider, 100)?;
        if self.served_model.len() > 200 || self.credential_name.len() > 200 {
            return Err(StoreError::invalid(
                "attempt",
                "served_model and credential_name must be at most 200 bytes",
            ));
        }
        if !ATTEMPT_OUTCOMES.contains(&self.outcome.as_str()) {
            return Err(StoreError::invalid(
                "attempt.outcome",
                format!("must be one of {}", ATTEMPT_OUTCOMES.join(", ")),
            ));
        }
        check_count("attempt.input_tokens", self.input_tokens)?;
        check_count("attempt.output_tokens", self.output_tokens)?;
        check_count("attempt.cache_read_tokens", self.cache_read_tokens)?;
        check_count("attempt.cache_write_tokens", self.cache_write_tokens)?;
        check_count("attempt.latency_ms", self.latency_ms)?;
        if let Some(h) = &self.prompt_overlay_sha256
            && !genesis_core::prompt::is_overlay_sha256(h)
        {
            return Err(StoreError::invalid(
                "prompt_overlay_sha256",
                "must be empty or 64 lowercase hex digits (SHA-256)",
            ));
        }
        Ok(())
    }
}

fn check_count(field: &str, v: i64) -> Result<(), StoreError> {
    if v < 0 {
        return Err(StoreError::invalid(field, "must be non-negative"));
    }
    Ok(())
}

/// What [`Llm::seed_default_preset`] did for a tenant.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DefaultSeed {
    /// The tenant had been seeded before (by this or another replica): nothing
    /// was written, so an operator's later detach or replacement stands.
    AlreadySeeded,
    /// A preset with the seed's name already existed (an operator's): it was
    /// neither changed nor bound.
    NameTaken,
    /// The preset was created and bound to the listed sites (those that had
    /// no binding yet).
    Seeded { preset_id: Uuid, bound: Vec<String> },
}

/// Repository handle, from [`Store::llm`].
pub struct Llm<'a> {
    store: &'a Store,
}

impl Store {
    /// Presets, site bindings, pricing and call provenance.
    pub fn llm(&self) -> Llm<'_> {
        Llm { store: self }
    }
}

impl Llm<'_> {
    /// Create a preset. Duplicate name → `Conflict`.
    pub async fn create_preset(
        &self,
        tenant_id: Uuid,
        new: NewPreset,
    ) -> Result<PresetRow, StoreError> {
        check_text("name", &new.name, 200)?;
        check_couple("primary", &new.primary)?;
        for (i, c) in new.fallback.iter().enumerate() {
            check_couple(&format!("fallback[{i}]"), c)?;
        }
        if !new.overlays.is_object() {
            return Err(StoreError::invalid("overlays", "must be a JSON object"));
        }
        let mut tx = self.store.tenant_tx(tenant_id).await?;
        let row: serde_json::Value = sqlx::query_scalar(
            "INSERT INTO llm_presets (tenant_id, name, model, provider, backend, credentials, fallback, overlays)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8) RETURNING to_jsonb(llm_presets.*)",
        )
        .bind(tenant_id)
        .bind(&new.name)
        .bind(&new.primary.model)
        .bind(&new.primary.provider)
        .bind(&new.primary.backend)
        .bind(serde_json::to_value(&new.primary.credentials)?)
        .bind(serde_json::to_value(&new.fallback)?)
        .bind(&new.overlays)
        .fetch_one(tx.conn())
        .await?;
        tx.commit().await?;
        decode(row)
    }

    /// Replace preset `id` of the tenant with `new` (same checks as
    /// [`Llm::create_preset`]). Unknown id (or another tenant's) → `NotFound`;
    /// a name taken by another preset → `Conflict`.
    pub async fn update_preset(
        &self,
        tenant_id: Uuid,
        id: Uuid,
        new: NewPreset,
    ) -> Result<PresetRow, StoreError> {
        check_text("name", &new.name, 200)?;
        check_couple("primary", &new.primary)?;
        for (i, c) in new.fallback.iter().enumerate() {
            check_couple(&format!("fallback[{i}]"), c)?;
        }
        if !new.overlays.is_object() {
            return Err(StoreError::invalid("overlays", "must be a JSON object"));
        }
        let mut tx = self.store.tenant_tx(tenant_id).await?;
        let row: Option<serde_json::Value> = sqlx::query_scalar(
            "UPDATE llm_presets SET name = $2, model = $3, provider = $4, backend = $5,
                    credentials = $6, fallback = $7, overlays = $8, updated_at = now()
              WHERE id = $1 RETURNING to_jsonb(llm_presets.*)",
        )
        .bind(id)
        .bind(&new.name)
        .bind(&new.primary.model)
        .bind(&new.primary.provider)
        .bind(&new.primary.backend)
        .bind(serde_json::to_value(&new.primary.credentials)?)
        .bind(serde_json::to_value(&new.fallback)?)
        .bind(&new.overlays)
        .fetch_optional(tx.conn())
        .await?;
        let Some(row) = row else {
            return Err(StoreError::not_found("preset"));
        };
        tx.commit().await?;
        decode(row)
    }

    /// The tenant's presets by name.
    pub async fn list_presets(&self, tenant_id: Uuid) -> Result<Vec<PresetRow>, StoreError> {
        let mut tx = self.store.tenant_tx(tenant_id).await?;
        let rows: Vec<serde_json::Value> =
            sqlx::query_scalar("SELECT to_jsonb(p) FROM llm_presets p ORDER BY name, id")
                .fetch_all(tx.conn())
                .await?;
        tx.commit().await?;
        decode_all(rows)
    }

    /// Pin `preset_id` to `site_id` (replacing the site's binding). Unknown
    /// preset → `NotFound`.
    pub async fn bind_site(
        &self,
        tenant_id: Uuid,
        site_id: &str,
        preset_id: Uuid,
    ) -> Result<(), StoreError> {
        check_text("site_id", site_id, 200)?;
        let mut tx = self.store.tenant_tx(tenant_id).await?;
        sqlx::query(
            "INSERT INTO llm_site_bindings (tenant_id, site_id, preset_id) VALUES ($1, $2, $3)
             ON CONFLICT (tenant_id, site_id) DO UPDATE SET preset_id = EXCLUDED.preset_id",
        )
        .bind(tenant_id)
        .bind(site_id)
        .bind(preset_id)
        .execute(tx.conn())
        .await?;
        tx.commit().await?;
        Ok(())
    }

    /// Remove the site's own binding; whether there was one.
    pub async fn unbind_site(&self, tenant_id: Uuid, site_id: &str) -> Result<bool, StoreError> {
        let mut tx = self.store.tenant_tx(tenant_id).await?;
        let n = sqlx::query("DELETE FROM llm_site_bindings WHERE site_id = $1")
            .bind(site_id)
            .execute(tx.conn())
            .await?
            .rows_affected();
        tx.commit().await?;
        Ok(n > 0)
    }

    /// The bound presets of each of `sites` that has a binding, as
    /// `(site_id, preset)`, in one statement (the caller walks the chain).
    pub async fn bindings_for(
        &self,
        tenant_id: Uuid,
        sites: &[String],
    ) -> Result<Vec<(String, PresetRow)>, StoreError> {
        let mut tx = self.store.tenant_tx(tenant_id).await?;
        let rows = bindings_for_in(tx.conn(), sites).await?;
        tx.commit().await?;
        Ok(rows)
    }

    /// Price of `model`, if the table has one.
    pub async fn pricing(&self, model: &str) -> Result<Option<PricingRow>, StoreError> {
        let row: Option<serde_json::Value> =
            sqlx::query_scalar("SELECT to_jsonb(p) FROM llm_pricing p WHERE model = $1")
                .bind(model)
                .fetch_optional(self.store.tenant_pool())
                .await?;
        row.map(decode).transpose()
    }

    /// The whole pricing table by model.
    pub async fn list_pricing(&self) -> Result<Vec<PricingRow>, StoreError> {
        let rows: Vec<serde_json::Value> =
            sqlx::query_scalar("SELECT to_jsonb(p) FROM llm_pricing p ORDER BY model")
                .fetch_all(self.store.tenant_pool())
                .await?;
        decode_all(rows)
    }

    /// Set a model's price (platform-wide; the system pool).
    pub async fn set_pricing(
        &self,
        model: &str,
        input_usd_per_mtok: f64,
        output_usd_per_mtok: f64,
        cache_read_usd_per_mtok: f64,
        cache_write_usd_per_mtok: f64,
    ) -> Result<PricingRow, StoreError> {
        check_text("model", model, 200)?;
        for (f, v) in [
            ("input_usd_per_mtok", input_usd_per_mtok),
            ("output_usd_per_mtok", output_usd_per_mtok),
            ("cache_read_usd_per_mtok", cache_read_usd_per_mtok),
            ("cache_write_usd_per_mtok", cache_write_usd_per_mtok),
        ] {
            if !v.is_finite() || v < 0.0 {
                return Err(StoreError::invalid(
                    f,
                    "must be a finite, non-negative price",
                ));
            }
        }
        let row: serde_json::Value = sqlx::query_scalar(
            "INSERT INTO llm_pricing (model, input_usd_per_mtok, output_usd_per_mtok, cache_read_usd_per_mtok,
                                      cache_write_usd_per_mtok)
             VALUES ($1, $2, $3, $4, $5)
             ON CONFLICT (model) DO UPDATE SET input_usd_per_mtok = EXCLUDED.input_usd_per_mtok,
                 output_usd_per_mtok = EXCLUDED.output_usd_per_mtok,
                 cache_read_usd_per_mtok = EXCLUDED.cache_read_usd_per_mtok,
                 cache_write_usd_per_mtok = EXCLUDED.cache_write_usd_per_mtok, updated_at = now()
             RETURNING to_jsonb(llm_pricing.*)",
        )
        .bind(model)
        .bind(input_usd_per_mtok)
        .bind(output_usd_per_mtok)
        .bind(cache_read_usd_per_mtok)
        .bind(cache_write_usd_per_mtok)
        .fetch_one(self.store.system_pool())
        .await?;
        decode(row)
    }

    /// The default seeder (spec §3.7 point 2), once per tenant and in ONE
    /// transaction: take the tenant's `llm_default_seeds` row (a concurrent
    /// seeder waits on its key, then finds it taken and writes nothing),
    /// create the preset `name` with `couples` (primary first), and bind it
    /// to each of `sites` that has no binding yet — an operator's binding is
    /// never overwritten. Empty `couples` or `sites` → `InvalidArgument`.
    pub async fn seed_default_preset(
        &self,
        tenant_id: Uuid,
        name: &str,
        couples: &[PresetCouple],
        sites: &[&str],
    ) -> Result<DefaultSeed, StoreError> {
        check_text("name", name, 200)?;
        let Some((primary, fallback)) = couples.split_first() else {
            return Err(StoreError::invalid(
                "couples",
                "must name at least one couple",
            ));
        };
        for (i, c) in couples.iter().enumerate() {
            check_couple(&format!("couples[{i}]"), c)?;
        }
        if sites.is_empty() {
            return Err(StoreError::invalid("sites", "must name at least one site"));
        }
        for (i, site) in sites.iter().enumerate() {
            check_text(&format!("sites[{i}]"), site, 200)?;
        }
        let mut tx = self.store.tenant_tx(tenant_id).await?;
        let first: Option<Uuid> = sqlx::query_scalar(
            "INSERT INTO llm_default_seeds (tenant_id) VALUES ($1)
             ON CONFLICT (tenant_id) DO NOTHING RETURNING tenant_id",
        )
        .bind(tenant_id)
        .fetch_optional(tx.conn())
        .await?;
        if first.is_none() {
            tx.commit().await?;
            return Ok(DefaultSeed::AlreadySeeded);
        }
        let preset_id: Option<Uuid> = sqlx::query_scalar(
            "INSERT INTO llm_presets (tenant_id, name, model, provider, backend, credentials, fallback)
             VALUES ($1, $2, $3, $4, $5, $6, $7)
             ON CONFLICT (tenant_id, name) DO NOTHING RETURNING id",
        )
        .bind(tenant_id)
        .bind(name)
        .bind(&primary.model)
        .bind(&primary.provider)
        .bind(&primary.backend)
        .bind(serde_json::to_value(&primary.credentials)?)
        .bind(serde_json::to_value(fallback)?)
        .fetch_optional(tx.conn())
        .await?;
        let Some(preset_id) = preset_id else {
            tx.commit().await?;
            return Ok(DefaultSeed::NameTaken);
        };
        sqlx::query("UPDATE llm_default_seeds SET preset_id = $2 WHERE tenant_id = $1")
            .bind(tenant_id)
            .bind(preset_id)
            .execute(tx.conn())
            .await?;
        let sites: Vec<String> = sites.iter().map(|s| (*s).to_owned()).collect();
        let mut bound: Vec<String> = sqlx::query_scalar(
            "INSERT INTO llm_site_bindings (tenant_id, site_id, preset_id)
             SELECT $1, s, $3 FROM unnest($2::text[]) AS s
             ON CONFLICT (tenant_id, site_id) DO NOTHING RETURNING site_id",
        )
        .bind(tenant_id)
        .bind(&sites)
        .bind(preset_id)
        .fetch_all(tx.conn())
        .await?;
        tx.commit().await?;
        bound.sort();
        Ok(DefaultSeed::Seeded { preset_id, bound })
    }

    /// Record one priced attempt in ONE transaction: check `session` still
    /// holds the lease (else `LeaseLost`, nothing written), create the
    /// invocation's `AgentPlanning` snapshot on its first attempt, append the
    /// attempt with the next ordinal, add its usage and cost to the
    /// snapshot, and draw the cost down from the weekly credit window.
    pub async fn record_call_attempt(
        &self,
        tenant_id: Uuid,
        attempt: &NewCallAttempt,
        credit: CreditDraw,
    ) -> Result<RecordedAttempt, StoreError> {
        let object = attempt_object(attempt, credit, None)?;
        self.record_attempt_object(
            tenant_id,
            (attempt.instance_id, attempt.session),
            object,
            attempt.cost_usd,
        )
        .await
    }

    /// [`Llm::record_call_attempt`] for an attempt that may carry its
    /// turn's journal step (RecordCallAttempt's last attempt of a turn).
    /// `InvalidArgument` when the step names an event its session did not
    /// claim; nothing is written then.
    pub async fn record_priced(
        &self,
        tenant_id: Uuid,
        priced: &PricedAttempt,
    ) -> Result<RecordedAttempt, StoreError> {
        let attempt = &priced.attempt;
        let object = attempt_object(attempt, priced.credit, priced.journal.as_ref())?;
        self.record_attempt_object(
            tenant_id,
            (attempt.instance_id, attempt.session),
            object,
            attempt.cost_usd,
        )
        .await
    }

    /// Record a priced attempt of a session that no longer holds its lease
    /// (its call outlived the lease, or a partition kept its renewals from
    /// the supervisor): the provider was paid, so the attempt, its
    /// snapshot and its draw on the credit window are written as for
    /// [`Llm::record_priced`], and its journal step is not (the event may
    /// be another session's episode by now). The caller must have proven
    /// the session genuine (one the supervisor issued for this tenant's
    /// instance): this write has no session guard of its own.
    pub async fn record_after_lease_lost(
        &self,
        tenant_id: Uuid,
        attempt: &NewCallAttempt,
        credit: CreditDraw,
    ) -> Result<RecordedAttempt, StoreError> {
        let object = attempt_object(attempt, credit, None)?;
        let mut tx = self.store.tenant_tx(tenant_id).await?;
        let raw: serde_json::Value =
            sqlx::query_scalar("SELECT genesis_write_call_attempt($1, $2, $3)")
                .bind(tenant_id)
                .bind(attempt.instance_id)
                .bind(object)
                .fetch_one(tx.conn())
                .await?;
        tx.commit().await?;
        #[derive(serde::Deserialize)]
        struct Raw {
            snapshot: CallSnapshotRow,
            ordinal: i32,
            credit: CreditWindow,
        }
        let raw: Raw = decode(raw)?;
        Ok(RecordedAttempt {
            snapshot: raw.snapshot,
            ordinal: raw.ordinal,
            cost_usd: attempt.cost_usd,
            credit: raw.credit,
        })
    }

    /// [`Llm::record_call_attempt`]'s write, for an attempt [`attempt_object`]
    /// has already checked and shaped (a refused completion's attempts are
    /// recorded from the objects it sent).
    pub(crate) async fn record_attempt_object(
        &self,
        tenant_id: Uuid,
        (instance_id, session): (Uuid, Uuid),
        object: serde_json::Value,
        cost_usd: f64,
    ) -> Result<RecordedAttempt, StoreError> {
        let args = serde_json::json!([tenant_id, instance_id, session, object]);
        let raw = self
            .store
            .batched(RECORD_CALL_ATTEMPT, instance_id, args)
            .await?;
        #[derive(serde::Deserialize)]
        struct Raw {
            outcome: String,
            snapshot: Option<CallSnapshotRow>,
            ordinal: Option<i32>,
            credit: Option<CreditWindow>,
        }
        let raw: Raw = decode(raw)?;
        match (raw.outcome.as_str(), raw.snapshot, raw.ordinal, raw.credit) {
            ("recorded", Some(snapshot), Some(ordinal), Some(credit)) => Ok(RecordedAttempt {
                snapshot,
                ordinal,
                cost_usd,
                credit,
            }),
            ("lease_lost", ..) => Err(StoreError::LeaseLost),
            ("not_found", ..) => Err(StoreError::not_found("agent instance")),
            (other, ..) => Err(StoreError::Database(format!(
                "unexpected record outcome {other:?}"
            ))),
        }
    }

    /// What RecordCallAttempt prices an attempt with
    /// (`genesis_record_context`, one round trip): the instance's type, the
    /// DB-first configuration and the price of the served model, else of
    /// the requested one, with the catalogue epoch of that read.
    /// `NotFound` when the instance is not the tenant's.
    pub async fn record_context(
        &self,
        tenant_id: Uuid,
        instance_id: Uuid,
        served_model: &str,
        requested_model: &str,
    ) -> Result<RecordContext, StoreError> {
        let raw: Option<serde_json::Value> =
            sqlx::query_scalar("SELECT genesis_record_context($1, $2, $3, $4)")
                .bind(tenant_id)
                .bind(instance_id)
                .bind(served_model)
                .bind(requested_model)
                .fetch_one(self.store.tenant_pool())
                .await?;
        decode(raw.ok_or_else(|| StoreError::not_found("agent instance"))?)
    }

    /// Record one priced attempt of a coder's call against its coding task
    /// (call tag `Coder`) in one statement: the invocation's snapshot
    /// created on its first attempt, the attempt appended with the next
    /// ordinal, the cost added to the snapshot and drawn from the weekly
    /// credit window. `NotFound` when the task is not the tenant's;
    /// `FailedPrecondition` when it has settled (its cost is final);
    /// nothing is written either way. `attempt`'s instance and session are
    /// not read.
    pub async fn record_coder_attempt(
        &self,
        tenant_id: Uuid,
        task_id: Uuid,
        attempt: &NewCallAttempt,
        credit: CreditDraw,
    ) -> Result<RecordedAttempt, StoreError> {
        let object = attempt_object(attempt, credit, None)?;
        let raw: serde_json::Value =
            sqlx::query_scalar("SELECT genesis_record_coder_attempt($1, $2, $3)")
                .bind(tenant_id)
                .bind(task_id)
                .bind(object)
                .fetch_one(self.store.tenant_pool())
                .await?;
        #[derive(serde::Deserialize)]
        struct Raw {
            outcome: String,
            snapshot: Option<CallSnapshotRow>,
            ordinal: Option<i32>,
            credit: Option<CreditWindow>,
        }
        let raw: Raw = decode(raw)?;
        match (raw.outcome.as_str(), raw.snapshot, raw.ordinal, raw.credit) {
            ("recorded", Some(snapshot), Some(ordinal), Some(credit)) => Ok(RecordedAttempt {
                snapshot,
                ordinal,
                cost_usd: attempt.cost_usd,
                credit,
            }),
            ("not_found", ..) => Err(StoreError::not_found("coding task")),
            ("settled", ..) => Err(StoreError::precondition(
                "the coding task is settled: its cost is final",
            )),
            (other, ..) => Err(StoreError::Database(format!(
                "unexpected record outcome {other:?}"
            ))),
        }
    }

    /// What a coder's attempt is priced with, in one read: the tenant's
    /// DB-first configuration and every price row whose model name begins
    /// the served or the requested name (the candidates [`choose_pricing`]
    /// picks from), with the catalogue epoch of the read. The agent type is
    /// not part of it (a coder is no agent); it reads as
    /// [`genesis_core::AgentType::Soa`], which nothing of a coder's call uses.
    pub async fn coder_record_context(
        &self,
        tenant_id: Uuid,
        served_model: &str,
        requested_model: &str,
    ) -> Result<RecordContext, StoreError> {
        let mut tx = self.store.tenant_tx(tenant_id).await?;
        let raw: serde_json::Value = sqlx::query_scalar(
            "SELECT jsonb_build_object(
                'agent_type', 'Soa',
                'configs', genesis_effective_configs($1),
                'prices', coalesce(
                    (SELECT jsonb_agg(to_jsonb(p)) FROM llm_pricing p
                      WHERE starts_with($2, p.model) OR starts_with($3, p.model)),
                    '[]'::jsonb),
                'catalogue_epoch', (SELECT c.epoch FROM catalogue_epoch c))",
        )
        .bind(tenant_id)
        .bind(served_model)
        .bind(requested_model)
        .fetch_one(tx.conn())
        .await?;
        tx.commit().await?;
        decode(raw)
    }

    /// One snapshot.
    pub async fn snapshot(&self, tenant_id: Uuid, id: Uuid) -> Result<CallSnapshotRow, StoreError> {
        let mut tx = self.store.tenant_tx(tenant_id).await?;
        let row: Option<serde_json::Value> =
            sqlx::query_scalar("SELECT to_jsonb(s) FROM llm_call_snapshots s WHERE id = $1")
                .bind(id)
                .fetch_optional(tx.conn())
                .await?;
        tx.commit().await?;
        decode(row.ok_or_else(|| StoreError::not_found("llm call snapshot"))?)
    }

    /// The attempts of a snapshot in order.
    pub async fn attempts(
        &self,
        tenant_id: Uuid,
        snapshot_id: Uuid,
    ) -> Result<Vec<CallAttemptRow>, StoreError> {
        let mut tx = self.store.tenant_tx(tenant_id).await?;
        let rows: Vec<serde_json::Value> = sqlx::query_scalar(
            "SELECT to_jsonb(a) FROM llm_call_attempts a WHERE snapshot_id = $1 ORDER BY ordinal",
        )
        .bind(snapshot_id)
        .fetch_all(tx.conn())
        .await?;
        tx.commit().await?;
        decode_all(rows)
    }
}

/// [`Llm::bindings_for`] inside the caller's tenant transaction.
pub async fn bindings_for_in(
    conn: &mut sqlx::PgConnection,
    sites: &[String],
) -> Result<Vec<(String, PresetRow)>, StoreError> {
    let rows: Vec<(String, serde_json::Value)> = sqlx::query_as(
        "SELECT b.site_id, to_jsonb(p) FROM llm_site_bindings b JOIN llm_presets p ON p.id = b.preset_id
          WHERE b.site_id = ANY($1)",
    )
    .bind(sites)
    .fetch_all(conn)
    .await?;
    rows.into_iter()
        .map(|(site, p)| Ok((site, decode(p)?)))
        .collect()
}

/// Replace a preset's prompt overlay on the caller's tenant transaction
/// (the decision transaction of an approved redaction): lock the preset,
/// check its current overlay still hashes to `base_sha256`, write the new
/// one. A deleted preset is `NotFound`; a changed overlay is
/// `FailedPrecondition` — the proposal is stale and applying it would undo
/// an operator's later edit.
pub(crate) async fn replace_prompt_overlay_in(
    conn: &mut sqlx::PgConnection,
    replace: crate::decisions::OverlayReplacement<'_>,
) -> Result<(), StoreError> {
    let current: Option<Option<String>> = sqlx::query_scalar(
        "SELECT overlays->>'prompt_overlay' FROM llm_presets WHERE id = $1 FOR UPDATE",
    )
    .bind(replace.preset_id)
    .fetch_optional(&mut *conn)
    .await?;
    let current = current.ok_or_else(|| StoreError::not_found("preset"))?;
    let current_sha = genesis_core::prompt::overlay_sha256(current.as_deref().unwrap_or_default());
    if current_sha.as_deref() != Some(replace.base_sha256) {
        return Err(StoreError::precondition(
            "the preset's prompt overlay changed since the redaction was proposed; reject this \
             proposal and raise the signal again",
        ));
    }
    sqlx::query(
        "UPDATE llm_presets SET overlays = jsonb_set(overlays, '{prompt_overlay}', to_jsonb($2::text)),
                updated_at = now()
          WHERE id = $1",
    )
    .bind(replace.preset_id)
    .bind(replace.overlay)
    .execute(&mut *conn)
    .await?;
    Ok(())
}

/// An attempt that is priced and ready to write: what CompleteTick carries
/// for its episode's last call.
#[derive(Debug, Clone, PartialEq)]
pub struct PricedAttempt {
    pub attempt: NewCallAttempt,
    pub credit: CreditDraw,
    /// The turn's journal step, on the turn's last attempt only: written in
    /// the attempt's transaction, so a turn paid for is a turn journaled.
    pub journal: Option<TurnJournal>,
}

/// An LLM turn's step of its episode journal, as the supervisor checked
/// and redacted it (genesis-core's `LlmTurnStep` as JSON). The store adds
/// the invocation's cost so far when it writes it.
#[derive(Debug, Clone, PartialEq)]
pub struct TurnJournal {
    /// The claimed event whose episode the turn belongs to; the write
    /// refuses an event the attempt's session did not claim.
    pub event_id: Uuid,
    pub entry: serde_json::Value,
    /// The episode's byte cap (genesis-core's `JournalLimits`).
    pub max_episode_bytes: u32,
    /// The system prompt the entry names by `request.system_sha256`: kept
    /// once per tenant and text, not in every step.
    pub system: Option<PromptText>,
}

/// A system prompt as the journal keeps it, once per tenant.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PromptText {
    /// 64 lowercase hex.
    pub sha256: String,
    pub text: String,
}

/// An attempt checked and shaped as `genesis_write_call_attempt` reads it,
/// for RecordCallAttempt and for the completion that
/// writes its attempts itself. Refuses what the tables would (an unknown
/// outcome, negative usage, a bad amount) before anything is sent, and
/// keeps the first 4 KiB of an error message.
pub(crate) fn attempt_object(
    attempt: &NewCallAttempt,
    credit: CreditDraw,
    journal: Option<&TurnJournal>,
) -> Result<serde_json::Value, StoreError> {
    attempt.check_reported()?;
    check_text("site_id", &attempt.site_id, 200)?;
    crate::credit::check_amount("cost_usd", attempt.cost_usd)?;
    crate::credit::check_amount("limit_usd", credit.limit_usd)?;
    let mut error_message = attempt.error_message.clone();
    if error_message.len() > 4096 {
        let mut end = 4096;
        while !error_message.is_char_boundary(end) {
            end -= 1;
        }
        error_message.truncate(end);
    }
    let served = (!attempt.served_model.is_empty()).then_some(attempt.served_model.as_str());
    let journal = match journal {
        None => serde_json::Value::Null,
        Some(j) => {
            if !j.entry.is_object() {
                return Err(StoreError::invalid(
                    "journal.entry",
                    "must be a JSON object",
                ));
            }
            let max_bytes = i32::try_from(j.max_episode_bytes).map_err(|_| {
                StoreError::invalid("journal.max_episode_bytes", "must fit in 31 bits")
            })?;
            let bytes = crate::journal::entry_bytes(&j.entry)?;
            let mut object = serde_json::json!({
                "event_id": j.event_id,
                "session": attempt.session,
                "entry": j.entry,
                "bytes": bytes,
                "max_bytes": max_bytes,
            });
            if let Some(p) = &j.system {
                if !crate::journal::is_sha256_hex(&p.sha256) {
                    return Err(StoreError::invalid(
                        "journal.system.sha256",
                        "must be 64 lowercase hex digits",
                    ));
                }
                object["system_sha256"] = p.sha256.clone().into();
                object["system_text"] = p.text.clone().into();
            }
            object
        }
    };
    Ok(serde_json::json!({
        "journal": journal,
        "invocation_id": attempt.invocation_id,
        "site_id": attempt.site_id,
        "requested_model": attempt.requested_model,
        "served_model": served,
        "provider": attempt.provider,
        "credential_name": attempt.credential_name,
        "outcome": attempt.outcome,
        // The snapshot counts the whole prompt; the attempt's usage keeps
        // the four disjoint counts it was billed by.
        "input_tokens": attempt
            .input_tokens
            .saturating_add(attempt.cache_read_tokens)
            .saturating_add(attempt.cache_write_tokens),
        "output_tokens": attempt.output_tokens,
        "usage": {
            "input_tokens": attempt.input_tokens,
            "output_tokens": attempt.output_tokens,
            "cache_read_tokens": attempt.cache_read_tokens,
            "cache_write_tokens": attempt.cache_write_tokens,
        },
        "priced_as": attempt.priced_as,
        "pricing_source": attempt.pricing_source.map(|s| s.as_str()),
        "latency_ms": attempt.latency_ms,
        "cost_usd": attempt.cost_usd,
        "error_message": error_message,
        "prompt_overlay_sha256": attempt.prompt_overlay_sha256,
        "week_start": credit.week_start,
        "limit_usd": credit.limit_usd,
    }))
}

/// RecordCallAttempt's guarded server function, batched
/// ([`crate::batch`]): tenant, instance, session and [`attempt_object`].
const RECORD_CALL_ATTEMPT: crate::batch::Call = crate::batch::Call {
    name: "record_call_attempt",
    sql: "genesis_record_call_attempt((a->>0)::uuid, (a->>1)::uuid, (a->>2)::uuid, a->3)",
};

#[cfg(test)]
mod tests {
    use super::*;

    fn attempt_of(
        provider: &str,
        input: i64,
        output: i64,
        read: i64,
        write: i64,
    ) -> NewCallAttempt {
        NewCallAttempt {
            instance_id: Uuid::nil(),
            session: Uuid::nil(),
            invocation_id: "i".into(),
            site_id: String::new(),
            requested_model: "m".into(),
            served_model: "m-20250101".into(),
            provider: provider.into(),
            credential_name: "k".into(),
            outcome: "success".into(),
            input_tokens: input,
            output_tokens: output,
            cache_read_tokens: read,
            cache_write_tokens: write,
            latency_ms: 1,
            error_message: String::new(),
            cost_usd: 0.0,
            priced_as: None,
            pricing_source: None,
            prompt_overlay_sha256: None,
        }
    }

    #[test]
    fn an_attempt_is_priced_by_its_row_free_when_scripted_and_never_zero_unpriced() {
        use genesis_core::pricing::{ModelPrice, PricingSource};
        let chosen = ChosenPrice {
            row: PricingRow {
                model: "m".into(),
                input_usd_per_mtok: 3.0,
                output_usd_per_mtok: 15.0,
                cache_read_usd_per_mtok: 0.3,
                cache_write_usd_per_mtok: 3.75,
                updated_at: Utc::now(),
            },
            source: PricingSource::Prefix,
        };
        let unpriced = ModelPrice::fallback(15.0, 75.0);
        let mut a = attempt_of("anthropic", 1_000_000, 100_000, 10_000, 1_000);
        assert_eq!(
            apply_price(&mut a, Some(&chosen), unpriced),
            PricingSource::Prefix
        );
        assert!(
            (a.cost_usd - (3.0 + 1.5 + 0.003 + 0.00375)).abs() < 1e-9,
            "{}",
            a.cost_usd
        );
        assert_eq!(a.priced_as.as_deref(), Some("m"));
        assert_eq!(a.pricing_source, Some(PricingSource::Prefix));

        let mut a = attempt_of("anthropic", 1_000_000, 0, 0, 0);
        assert_eq!(apply_price(&mut a, None, unpriced), PricingSource::Fallback);
        assert!((a.cost_usd - 15.0).abs() < 1e-9, "{}", a.cost_usd);
        assert_eq!(a.priced_as, None);

        // Even with a row for its model, the scripted provider spent nothing.
        let mut a = attempt_of("scripted", 1_000_000, 1_000_000, 0, 0);
        assert_eq!(
            apply_price(&mut a, Some(&chosen), unpriced),
            PricingSource::Free
        );
        assert_eq!(a.cost_usd, 0.0);
    }
}
