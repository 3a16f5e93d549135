//! `genesis.v1.LlmService` (spec §2.5, §3.7): the static call-site registry
//! with each site's own and effective binding (walking the parent chain),
//! the tenant's presets, attach/detach of a preset to a site, and the
//! global pricing table. Presets hold credential NAMES only: a name or an
//! overlay value that looks like a secret is refused, and so is a name that
//! is not one of the deployment's provider keys bound to the tenant
//! (genesis_core::llm_keys). Must never store or echo a secret, and never
//! let a tenant-bound token change pricing.

use std::str::FromStr;

use genesis_core::llm_keys::KeySet;
use genesis_core::sites::{LLM_SITES, LlmCallSite, parent_site_id, site_chain};
use genesis_llm::ProviderKind;
use genesis_proto::convert::{invalid_argument, timestamp_from_chrono};
use genesis_proto::v1::{self, llm_service_server::LlmService};
use genesis_store::llm::{NewPreset, PresetCouple, PresetRow, PricingRow};
use tonic::{Request, Response, Status};
use uuid::Uuid;

use super::{observe, record_ids};
use crate::auth::caller;
use crate::state::AppState;
use crate::status::{store_status, uuid};

/// Longest credential name accepted.
const MAX_CREDENTIAL_NAME: usize = 128;
/// Longest overlays_json accepted.
const MAX_OVERLAYS_BYTES: usize = 64 * 1024;
/// Prefixes of well-known secret formats (API keys, tokens, JWTs).
const SECRET_PREFIXES: &[&str] = &[
    "sk-",
    "sk_",
    "rk_",
    "pk_",
    "ghp_",
    "gho_",
    "ghs_",
    "github_pat_",
    "xoxb-",
    "xoxp-",
    "xapp-",
    "AKIA",
    "ASIA",
    "AIza",
    "eyJ",
    "gen_",
    "glpat-",
    "Bearer ",
];

/// The service.
#[derive(Clone)]
pub struct Llms {
    state: AppState,
}

impl Llms {
    /// Build on the shared state.
    pub fn new(state: AppState) -> Self {
        Self { state }
    }
}

/// Whether `value` looks like a secret rather than a name: a known secret
/// prefix, or a long run of mixed letters and digits without separators.
pub fn looks_like_secret(value: &str) -> bool {
    let v = value.trim();
    if SECRET_PREFIXES.iter().any(|p| v.starts_with(p)) {
        return true;
    }
    v.len() >= 32
        && v.bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'+' | b'/' | b'='))
        && v.bytes().any(|b| b.is_ascii_digit())
        && v.bytes().any(|b| b.is_ascii_lowercase())
        && v.bytes().any(|b| b.is_ascii_uppercase())
}

fn credential_names(field: &str, names: &[String]) -> Result<Vec<String>, Status> {
    let mut seen = std::collections::HashSet::new();
    for (i, n) in names.iter().enumerate() {
        let f = format!("{field}.credential_names[{i}]");
        if n.trim().is_empty() || n.len() > MAX_CREDENTIAL_NAME {
            return Err(invalid_argument(
                &f,
                format!("must be 1..={MAX_CREDENTIAL_NAME} bytes"),
            ));
        }
        if looks_like_secret(n) {
            return Err(invalid_argument(
                &f,
                "looks like a secret value; a preset holds credential NAMES only (e.g. ANTHROPIC_API_KEY)",
            ));
        }
        if !n
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.' | b':'))
        {
            return Err(invalid_argument(
                &f,
                "may hold only letters, digits, '_', '-', '.' and ':'",
            ));
        }
        if !seen.insert(n.as_str()) {
            return Err(invalid_argument(&f, format!("{n:?} is listed twice")));
        }
    }
    Ok(names.to_vec())
}

fn couple(field: &str, c: Option<&v1::PresetCouple>) -> Result<PresetCouple, Status> {
    let c = c.ok_or_else(|| invalid_argument(field, "required"))?;
    if c.model.trim().is_empty() {
        return Err(invalid_argument(&format!("{field}.model"), "required"));
    }
    if ProviderKind::from_str(&c.provider).is_err() {
        return Err(invalid_argument(
            &format!("{field}.provider"),
            format!(
                "unknown provider {:?}; known: anthropic, openai, scripted",
                c.provider
            ),
        ));
    }
    Ok(PresetCouple {
        model: c.model.clone(),
        provider: c.provider.clone(),
        backend: c.backend.clone(),
        credentials: credential_names(field, &c.credential_names)?,
    })
}

/// Refuse an overlay string value that looks like a secret (`path` names it).
fn no_secret_values(path: &str, v: &serde_json::Value) -> Result<(), Status> {
    match v {
        serde_json::Value::String(s) if looks_like_secret(s) => Err(invalid_argument(
            "preset.overlays_json",
            format!("{path} looks like a secret value; overlays never hold secrets"),
        )),
        serde_json::Value::Array(a) => a
            .iter()
            .enumerate()
            .try_for_each(|(i, x)| no_secret_values(&format!("{path}[{i}]"), x)),
        serde_json::Value::Object(o) => o
            .iter()
            .try_for_each(|(k, x)| no_secret_values(&format!("{path}.{k}"), x)),
        _ => Ok(()),
    }
}

/// Validate an UpsertPreset's preset into the store's shape.
pub fn new_preset(p: &v1::Preset) -> Result<NewPreset, Status> {
    if p.name.trim().is_empty() {
        return Err(invalid_argument("preset.name", "required"));
    }
    let primary = couple("preset.primary", p.primary.as_ref())?;
    let fallback = p
        .fallback_chain
        .iter()
        .enumerate()
        .map(|(i, c)| couple(&format!("preset.fallback_chain[{i}]"), Some(c)))
        .collect::<Result<Vec<_>, _>>()?;
    genesis_core::presets::check_chain(
        std::iter::once(&primary)
            .chain(&fallback)
            .map(|c| (c.model.as_str(), c.provider.as_str())),
    )
    .map_err(|e| Status::invalid_argument(e.to_string()))?;
    let overlays = if p.overlays_json.trim().is_empty() {
        serde_json::json!({})
    } else {
        if p.overlays_json.len() > MAX_OVERLAYS_BYTES {
            return Err(invalid_argument(
                "preset.overlays_json",
                format!("must be at most {MAX_OVERLAYS_BYTES} bytes"),
            ));
        }
        let v: serde_json::Value = serde_json::from_str(&p.overlays_json)
            .map_err(|e| invalid_argument("preset.overlays_json", format!("not JSON: {e}")))?;
        if !v.is_object() {
            return Err(invalid_argument(
                "preset.overlays_json",
                "must be a JSON object",
            ));
        }
        no_secret_values("overlays", &v)?;
        v
    };
    Ok(NewPreset {
        name: p.name.clone(),
        primary,
        fallback,
        overlays,
    })
}

/// Refuse a credential name `tenant` may not use: one that can never be a
/// provider key (`GENESIS_*`, `OTEL_*`, `DATABASE_*`, `NATS_*`), one outside
/// the deployment's provider keys, or one bound to other tenants (the last
/// two read the same, so no tenant learns another's key names).
/// FAILED_PRECONDITION names the field and the names this tenant may use.
/// `couples` gives each couple's field path and credential names.
///
/// Control knows the keys by name and binding only (`AppState::llm_keys`):
/// it never calls a provider, so it never reads a key, and the agent pod
/// checks the same set again before it resolves a name.
pub fn require_usable_keys<'a>(
    keys: &KeySet,
    tenant: Uuid,
    couples: impl IntoIterator<Item = (String, &'a [String])>,
) -> Result<(), Status> {
    for (field, names) in couples {
        for (i, name) in names.iter().enumerate() {
            if let Err(refusal) = keys.check(name, tenant) {
                let allowed = keys.allowed_for(tenant);
                let allowed = if allowed.is_empty() {
                    "none".to_owned()
                } else {
                    allowed.join(", ")
                };
                return Err(Status::failed_precondition(format!(
                    "{field}.credential_names[{i}]: {name:?} {refusal}; the provider keys this \
                     tenant may name: {allowed} (a platform operator adds one as \
                     GENESIS_LLM_KEY_<NAME> or a file of GENESIS_LLM_KEY_DIR)"
                )));
            }
        }
    }
    Ok(())
}

/// [`require_usable_keys`] over a stored preset (its primary couple, then
/// its fallback chain), for every path that puts an accepted preset to use
/// (a site, a mode, a coding task): a key may have been removed or rebound
/// since the preset was accepted.
pub fn require_preset_keys(keys: &KeySet, tenant: Uuid, preset: &PresetRow) -> Result<(), Status> {
    let couples = preset.couples();
    require_usable_keys(
        keys,
        tenant,
        couples.iter().enumerate().map(|(i, c)| {
            let field = if i == 0 {
                "preset.primary".to_owned()
            } else {
                format!("preset.fallback_chain[{}]", i - 1)
            };
            (field, c.credentials.as_slice())
        }),
    )
}

/// The field path and credential names of each couple of a submitted preset.
fn wire_credentials(p: &v1::Preset) -> Vec<(String, &[String])> {
    let primary = p
        .primary
        .iter()
        .map(|c| ("preset.primary".to_owned(), c.credential_names.as_slice()));
    let fallback = p.fallback_chain.iter().enumerate().map(|(i, c)| {
        (
            format!("preset.fallback_chain[{i}]"),
            c.credential_names.as_slice(),
        )
    });
    primary.chain(fallback).collect()
}

/// Refuse a chain with a real model no `llm_pricing` row prices: its calls
/// could only be billed at the fallback price, so an operator must price it
/// first. FAILED_PRECONDITION names each model and the command that fixes it.
async fn require_priced(state: &AppState, couples: &[PresetCouple]) -> Result<(), Status> {
    let rows = state
        .store
        .llm()
        .list_pricing()
        .await
        .map_err(store_status)?;
    let missing = genesis_core::presets::unpriced_models(
        couples
            .iter()
            .map(|c| (c.model.as_str(), c.provider.as_str())),
        rows.iter().map(|r| r.model.as_str()),
    );
    if missing.is_empty() {
        return Ok(());
    }
    let first = missing[0];
    Err(Status::failed_precondition(format!(
        "no price for model{} {}: every real model of a preset must be priced before it is used \
         (a platform operator sets one with `genesisctl llm pricing set {first} IN OUT`)",
        if missing.len() > 1 { "s" } else { "" },
        missing.join(", ")
    )))
}

fn wire_couple(c: &PresetCouple) -> v1::PresetCouple {
    v1::PresetCouple {
        model: c.model.clone(),
        provider: c.provider.clone(),
        backend: c.backend.clone(),
        credential_names: c.credentials.clone(),
    }
}

/// The wire shape of a preset.
pub fn preset(p: &PresetRow) -> v1::Preset {
    v1::Preset {
        id: p.id.to_string(),
        tenant_id: p.tenant_id.to_string(),
        name: p.name.clone(),
        primary: Some(v1::PresetCouple {
            model: p.model.clone(),
            provider: p.provider.clone(),
            backend: p.backend.clone(),
            credential_names: p.credentials.clone(),
        }),
        fallback_chain: p.fallback.iter().map(wire_couple).collect(),
        overlays_json: p.overlays.to_string(),
        created_at: Some(timestamp_from_chrono(p.created_at)),
        updated_at: Some(timestamp_from_chrono(p.updated_at)),
    }
}

fn pricing(p: &PricingRow) -> v1::Pricing {
    v1::Pricing {
        model: p.model.clone(),
        input_per_mtok: p.input_usd_per_mtok,
        output_per_mtok: p.output_usd_per_mtok,
        updated_at: Some(timestamp_from_chrono(p.updated_at)),
        cache_read_per_mtok: p.cache_read_usd_per_mtok,
        cache_write_per_mtok: p.cache_write_usd_per_mtok,
    }
}

/// One site with its own binding and the binding resolution lands on.
pub fn site_view(site: &LlmCallSite, bindings: &[(String, PresetRow)]) -> v1::LlmSite {
    let bound = |id: &str| bindings.iter().find(|(s, _)| s == id).map(|(_, p)| p.id);
    let attached = bound(site.site_id);
    let effective = site_chain(site.site_id)
        .into_iter()
        .find_map(|s| bound(s).map(|p| (s == site.site_id, p)));
    v1::LlmSite {
        site_id: site.site_id.to_owned(),
        display_name: site.display_name.to_owned(),
        parent_site_id: parent_site_id(site.site_id).unwrap_or_default().to_owned(),
        default_model: site.default_model.to_owned(),
        supported_backends: site
            .supported_backends
            .iter()
            .map(|s| (*s).to_owned())
            .collect(),
        attached_preset_id: attached.map(|p| p.to_string()),
        effective_preset_id: effective.map(|(_, p)| p.to_string()).unwrap_or_default(),
        inherited: effective.is_some_and(|(own, _)| !own),
    }
}

async fn site_of(state: &AppState, tenant: Uuid, site_id: &str) -> Result<v1::LlmSite, Status> {
    let site = genesis_core::sites::site(site_id)
        .ok_or_else(|| Status::not_found(format!("call-site {site_id:?} not found")))?;
    let chain: Vec<String> = site_chain(site_id).into_iter().map(str::to_owned).collect();
    let bindings = state
        .store
        .llm()
        .bindings_for(tenant, &chain)
        .await
        .map_err(store_status)?;
    Ok(site_view(site, &bindings))
}

fn site_id(value: &str) -> Result<&str, Status> {
    if value.trim().is_empty() {
        return Err(invalid_argument("site_id", "required"));
    }
    Ok(value)
}

fn price(field: &str, v: f64) -> Result<f64, Status> {
    if !v.is_finite() || v < 0.0 {
        return Err(invalid_argument(
            field,
            format!("must be a finite, non-negative price, got {v}"),
        ));
    }
    Ok(v)
}

#[tonic::async_trait]
impl LlmService for Llms {
    async fn list_sites(
        &self,
        request: Request<v1::ListSitesRequest>,
    ) -> Result<Response<v1::ListSitesResponse>, Status> {
        observe(&self.state, "/genesis.v1.LlmService/ListSites", async {
            let caller = caller(&request)?;
            let t = caller.tenant("tenant_id", &request.get_ref().tenant_id)?;
            record_ids(t, None);
            let ids: Vec<String> = LLM_SITES.iter().map(|s| s.site_id.to_owned()).collect();
            let bindings = self
                .state
                .store
                .llm()
                .bindings_for(t, &ids)
                .await
                .map_err(store_status)?;
            Ok(v1::ListSitesResponse {
                sites: LLM_SITES.iter().map(|s| site_view(s, &bindings)).collect(),
            })
        })
        .await
    }

    async fn list_presets(
        &self,
        request: Request<v1::ListPresetsRequest>,
    ) -> Result<Response<v1::ListPresetsResponse>, Status> {
        observe(&self.state, "/genesis.v1.LlmService/ListPresets", async {
            let caller = caller(&request)?;
            let t = caller.tenant("tenant_id", &request.get_ref().tenant_id)?;
            record_ids(t, None);
            let rows = self
                .state
                .store
                .llm()
                .list_presets(t)
                .await
                .map_err(store_status)?;
            Ok(v1::ListPresetsResponse {
                presets: rows.iter().map(preset).collect(),
            })
        })
        .await
    }

    async fn upsert_preset(
        &self,
        request: Request<v1::UpsertPresetRequest>,
    ) -> Result<Response<v1::Preset>, Status> {
        observe(&self.state, "/genesis.v1.LlmService/UpsertPreset", async {
            let caller = caller(&request)?;
            let req = request.get_ref();
            let t = caller.tenant("tenant_id", &req.tenant_id)?;
            let p = req.preset.as_ref().ok_or_else(|| invalid_argument("preset", "required"))?;
            let id = crate::status::opt_uuid("preset.id", Some(p.id.as_str()))?;
            let new = new_preset(p)?;
            record_ids(t, None);
            require_usable_keys(&self.state.llm_keys, t, wire_credentials(p))?;
            let mut couples = vec![new.primary.clone()];
            couples.extend(new.fallback.iter().cloned());
            require_priced(&self.state, &couples).await?;
            let llm = self.state.store.llm();
            let row = match id {
                None => llm.create_preset(t, new).await,
                Some(id) => llm.update_preset(t, id, new).await,
            }
            .map_err(store_status)?;
            tracing::info!(tenant = %t, preset = %row.id, actor = %caller.actor(), "llm: preset upserted");
            Ok(preset(&row))
        })
        .await
    }

    async fn attach_preset(
        &self,
        request: Request<v1::AttachPresetRequest>,
    ) -> Result<Response<v1::LlmSite>, Status> {
        observe(&self.state, "/genesis.v1.LlmService/AttachPreset", async {
            let caller = caller(&request)?;
            let req = request.get_ref();
            let t = caller.tenant("tenant_id", &req.tenant_id)?;
            let site = site_id(&req.site_id)?;
            let preset_id = uuid("preset_id", &req.preset_id)?;
            record_ids(t, None);
            if genesis_core::sites::site(site).is_none() {
                return Err(Status::not_found(format!("call-site {site:?} not found")));
            }
            let known = self
                .state
                .store
                .llm()
                .list_presets(t)
                .await
                .map_err(store_status)?
                .into_iter()
                .find(|p| p.id == preset_id);
            let Some(known) = known else {
                return Err(Status::not_found(format!("preset {preset_id} not found")));
            };
            // A price may have been deleted, or a key removed or rebound,
            // since the preset was accepted.
            require_preset_keys(&self.state.llm_keys, t, &known)?;
            let couples = known.couples();
            require_priced(&self.state, &couples).await?;
            self.state.store.llm().bind_site(t, site, preset_id).await.map_err(store_status)?;
            tracing::info!(tenant = %t, site, preset = %preset_id, actor = %caller.actor(), "llm: preset attached to site");
            site_of(&self.state, t, site).await
        })
        .await
    }

    async fn detach_preset(
        &self,
        request: Request<v1::DetachPresetRequest>,
    ) -> Result<Response<v1::LlmSite>, Status> {
        observe(&self.state, "/genesis.v1.LlmService/DetachPreset", async {
            let caller = caller(&request)?;
            let req = request.get_ref();
            let t = caller.tenant("tenant_id", &req.tenant_id)?;
            let site = site_id(&req.site_id)?;
            record_ids(t, None);
            if genesis_core::sites::site(site).is_none() {
                return Err(Status::not_found(format!("call-site {site:?} not found")));
            }
            let removed = self.state.store.llm().unbind_site(t, site).await.map_err(store_status)?;
            tracing::info!(tenant = %t, site, removed, actor = %caller.actor(), "llm: preset detached from site");
            site_of(&self.state, t, site).await
        })
        .await
    }

    async fn list_pricing(
        &self,
        request: Request<v1::ListPricingRequest>,
    ) -> Result<Response<v1::ListPricingResponse>, Status> {
        observe(&self.state, "/genesis.v1.LlmService/ListPricing", async {
            caller(&request)?;
            let rows = self
                .state
                .store
                .llm()
                .list_pricing()
                .await
                .map_err(store_status)?;
            Ok(v1::ListPricingResponse {
                prices: rows.iter().map(pricing).collect(),
            })
        })
        .await
    }

    async fn set_pricing(
        &self,
        request: Request<v1::SetPricingRequest>,
    ) -> Result<Response<v1::Pricing>, Status> {
        observe(&self.state, "/genesis.v1.LlmService/SetPricing", async {
            let caller = caller(&request)?;
            let req = request.get_ref();
            caller.require_platform()?;
            if req.model.trim().is_empty() {
                return Err(invalid_argument("model", "required"));
            }
            let input = price("input_per_mtok", req.input_per_mtok)?;
            let output = price("output_per_mtok", req.output_per_mtok)?;
            let cache_read = req
                .cache_read_per_mtok
                .map(|v| price("cache_read_per_mtok", v))
                .transpose()?;
            let cache_write = req
                .cache_write_per_mtok
                .map(|v| price("cache_write_per_mtok", v))
                .transpose()?;
            let llm = self.state.store.llm();
            // Unset cache prices keep the row's; a new row's default to the
            // input price for reads and 1.25 times it for writes, so a
            // model added without them is never billed below its cost.
            let existing = llm.pricing(&req.model).await.map_err(store_status)?;
            let cache_read = cache_read
                .or(existing.as_ref().map(|p| p.cache_read_usd_per_mtok))
                .unwrap_or(input);
            let cache_write = cache_write
                .or(existing.as_ref().map(|p| p.cache_write_usd_per_mtok))
                .unwrap_or(input * 1.25);
            let row = llm
                .set_pricing(&req.model, input, output, cache_read, cache_write)
                .await
                .map_err(store_status)?;
            tracing::info!(model = %req.model, input, output, actor = %caller.actor(), "llm: pricing set");
            Ok(pricing(&row))
        })
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secret_looking_values_are_recognised_and_names_are_not() {
        assert!(looks_like_secret("sk-ant-api03-abcdef"));
        assert!(looks_like_secret("ghp_0123456789abcdef"));
        assert!(looks_like_secret("Zx8fK2mQ9vL4tR7wY1nB3cD6gH0jS5pA"));
        assert!(!looks_like_secret("ANTHROPIC_API_KEY"));
        assert!(!looks_like_secret("oauth-max"));
        assert!(!looks_like_secret("openai.fallback:key"));
    }

    #[test]
    fn an_unknown_provider_names_the_field() {
        let p = v1::Preset {
            name: "p".into(),
            primary: Some(v1::PresetCouple {
                model: "m".into(),
                provider: "acme".into(),
                ..Default::default()
            }),
            ..Default::default()
        };
        let e = new_preset(&p).expect_err("unknown provider");
        assert!(
            e.message().starts_with("preset.primary.provider:"),
            "{}",
            e.message()
        );
    }
}
