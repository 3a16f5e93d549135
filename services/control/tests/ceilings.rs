//! Platform-only ceilings through the real control gRPC: a tenant-bound
//! token may only tighten a key that bounds spend or load (genesis-core
//! `ceilings::CEILINGS`) against the platform's value for its tenant (the
//! platform's row for it, else the global row, else the default), and is
//! refused PERMISSION_DENIED with nothing written otherwise; a platform
//! token sets either without limit; a platform feature flag is the
//! platform's to set; an unknown key is refused at both scopes, listing the
//! known ones.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::*;
use genesis_core::TokenScope;
use genesis_core::ceilings::{Bound, CEILINGS};
use genesis_core::options::keys;
use genesis_proto::v1;
use genesis_proto::v1::config_service_client::ConfigServiceClient;
use genesis_proto::v1::tenant_service_client::TenantServiceClient;
use sqlx::PgPool;
use tonic::Code;
use tonic::transport::Channel;
use uuid::Uuid;

/// A value looser than the default of each bounded key, and one tighter.
fn looser_and_tighter(key: &str, bound: Bound) -> (&'static str, &'static str) {
    match bound {
        Bound::OnlyOn => ("false", "true"),
        Bound::AtLeast => match key {
            keys::BACKOFF_FACTOR => ("1.0", "3.5"),
            keys::FORCED_REPLAN_EVERY_N_IDLE_TICKS => ("1", "1000"),
            _ => ("1ms", "400d"),
        },
        Bound::AtMost => match key {
            keys::WEEKLY_CREDIT_USD | keys::TICK_MAX_DOLLARS => ("1000000", "0.5"),
            keys::WORKSET_DEADLINE => ("1000d", "1s"),
            _ => ("4000000000", "1"),
        },
    }
}

fn set(tenant: Option<Uuid>, key: &str, value: &str) -> v1::SetConfigRequest {
    v1::SetConfigRequest {
        tenant_id: tenant.map(|t| t.to_string()),
        key: key.to_owned(),
        value: value.to_owned(),
        scope: if tenant.is_some() { "tenant" } else { "global" }.to_owned(),
    }
}

async fn rows(pool: &PgPool) -> Vec<(Option<Uuid>, String, String, Option<String>)> {
    genesis_store::inspect::config_rows(pool).await.unwrap()
}

struct Setup {
    store: genesis_store::Store,
    tenant: Uuid,
    op: String,
    root: String,
    configs: ConfigServiceClient<Channel>,
    tenants: TenantServiceClient<Channel>,
    _h: Harness,
}

async fn setup(pool: &PgPool) -> Setup {
    let store = store(pool);
    let tenant = store.tenants().create("ceilings").await.unwrap().id;
    let op = token(&store, TokenScope::Operator, Some(tenant))
        .await
        .unwrap();
    let root = token(&store, TokenScope::Operator, None).await.unwrap();
    let mut cfg = config(pool, NATS_URL);
    cfg.auto_bootstrap = false;
    let h = start(cfg).await.unwrap();
    let ch = h.channel().await.unwrap();
    Setup {
        store,
        tenant,
        op,
        root,
        configs: ConfigServiceClient::new(ch.clone()),
        tenants: TenantServiceClient::new(ch),
        _h: h,
    }
}

#[sqlx::test(migrator = "genesis_store::MIGRATOR")]
async fn a_tenant_token_loosening_any_bounded_key_is_refused_and_writes_nothing(pool: PgPool) {
    let mut s = setup(&pool).await;
    for c in CEILINGS {
        let (looser, _) = looser_and_tighter(c.key, c.bound);
        let e = s
            .configs
            .set_config(req(set(Some(s.tenant), c.key, looser), &s.op))
            .await
            .expect_err(c.key);
        assert_eq!(e.code(), Code::PermissionDenied, "{}: {e:?}", c.key);
        let m = e.message();
        assert!(m.starts_with(c.key), "{m}");
        assert!(m.contains("whose value for this tenant is "), "{m}");
        assert!(m.contains("only a platform token may"), "{m}");
    }
    assert_eq!(rows(&pool).await, vec![], "nothing written");

    // The refusal names the platform's value: the default, then the global row.
    let e = s
        .configs
        .set_config(req(
            set(Some(s.tenant), keys::WEEKLY_CREDIT_USD, "1000000"),
            &s.op,
        ))
        .await
        .unwrap_err();
    assert_eq!(
        e.message(),
        "AgentDispatcher:WeeklyCreditUsd is bounded by the platform, whose value for this \
         tenant is 60: a tenant operator may only lower it (to 60 or below); only a platform \
         token may raise it"
    );
    s.configs
        .set_config(req(set(None, keys::WEEKLY_CREDIT_USD, "100"), &s.root))
        .await
        .unwrap();
    let e = s
        .configs
        .set_config(req(
            set(Some(s.tenant), keys::WEEKLY_CREDIT_USD, "100.01"),
            &s.op,
        ))
        .await
        .unwrap_err();
    assert_eq!(e.code(), Code::PermissionDenied);
    assert!(
        e.message().contains("value for this tenant is 100:"),
        "{e:?}"
    );
    // unlimited is never a lowering, not even of an unlimited ceiling.
    s.configs
        .set_config(req(set(None, keys::TICK_MAX_TURNS, "unlimited"), &s.root))
        .await
        .unwrap();
    let e = s
        .configs
        .set_config(req(
            set(Some(s.tenant), keys::TICK_MAX_TURNS, "unlimited"),
            &s.op,
        ))
        .await
        .unwrap_err();
    assert_eq!(e.code(), Code::PermissionDenied, "{e:?}");
    assert!(
        e.message().contains("unlimited is never a lowering"),
        "{e:?}"
    );
    let before = rows(&pool).await;
    assert!(before.iter().all(|r| r.0.is_none()), "{before:?}");
    // A malformed value is INVALID_ARGUMENT, not a refusal of authority.
    let e = s
        .configs
        .set_config(req(
            set(Some(s.tenant), keys::WEEKLY_CREDIT_USD, "lots"),
            &s.op,
        ))
        .await
        .unwrap_err();
    assert_eq!(e.code(), Code::InvalidArgument, "{e:?}");
    assert_eq!(rows(&pool).await, before);
}

#[sqlx::test(migrator = "genesis_store::MIGRATOR")]
async fn a_tenant_token_tightening_each_bounded_key_is_accepted(pool: PgPool) {
    let mut s = setup(&pool).await;
    for c in CEILINGS {
        let (_, tighter) = looser_and_tighter(c.key, c.bound);
        let e = s
            .configs
            .set_config(req(set(Some(s.tenant), c.key, tighter), &s.op))
            .await
            .unwrap()
            .into_inner();
        assert_eq!((e.value.as_str(), e.scope.as_str()), (tighter, "tenant"));
        assert_eq!(
            s.store.config().get(Some(s.tenant), c.key).await.unwrap(),
            Some(tighter.to_owned()),
            "{}",
            c.key
        );
    }
    // The tenant's own values: the platform's stay unset.
    let layers = s.store.config().layers(Some(s.tenant)).await.unwrap();
    assert_eq!(layers.effective.len(), CEILINGS.len());
    assert!(layers.platform.is_empty(), "{:?}", layers.platform);
    // The platform's own value is at the bound, so it is allowed too.
    s.configs
        .set_config(req(
            set(Some(s.tenant), keys::WEEKLY_CREDIT_USD, "60"),
            &s.op,
        ))
        .await
        .unwrap();
    // A key that bounds nothing is the tenant's to raise.
    s.configs
        .set_config(req(set(Some(s.tenant), keys::LEDGER_TAIL, "500"), &s.op))
        .await
        .unwrap();
}

#[sqlx::test(migrator = "genesis_store::MIGRATOR")]
async fn a_platform_token_raises_for_a_tenant_and_the_tenant_lowers_beneath_it(pool: PgPool) {
    let mut s = setup(&pool).await;
    for c in CEILINGS {
        let (looser, _) = looser_and_tighter(c.key, c.bound);
        s.configs
            .set_config(req(set(Some(s.tenant), c.key, looser), &s.root))
            .await
            .unwrap_or_else(|e| panic!("{}: {e:?}", c.key));
    }
    let layers = s.store.config().layers(Some(s.tenant)).await.unwrap();
    assert_eq!(layers.platform, layers.effective, "the platform's values");
    assert_eq!(layers.platform.len(), CEILINGS.len());

    // The grant is now the bound: the tenant may go up to it, not past.
    let key = keys::WEEKLY_CREDIT_USD;
    s.configs
        .set_config(req(set(Some(s.tenant), key, "900000"), &s.op))
        .await
        .unwrap();
    let e = s
        .configs
        .set_config(req(set(Some(s.tenant), key, "1000001"), &s.op))
        .await
        .unwrap_err();
    assert_eq!(e.code(), Code::PermissionDenied);
    assert!(e.message().contains("is 1000000:"), "{e:?}");
    // The tenant's lowering did not take the grant away.
    s.configs
        .set_config(req(set(Some(s.tenant), key, "1000000"), &s.op))
        .await
        .unwrap();
    let layers = s.store.config().layers(Some(s.tenant)).await.unwrap();
    assert_eq!(layers.platform[key], "1000000");

    // A platform write at tenant scope clears the tenant's own choice.
    s.configs
        .set_config(req(set(Some(s.tenant), key, "10"), &s.op))
        .await
        .unwrap();
    s.configs
        .set_config(req(set(Some(s.tenant), key, "75"), &s.root))
        .await
        .unwrap();
    let layers = s.store.config().layers(Some(s.tenant)).await.unwrap();
    assert_eq!(
        (
            layers.effective[key].as_str(),
            layers.platform[key].as_str()
        ),
        ("75", "75")
    );

    // And at global scope the platform raises for everyone.
    s.configs
        .set_config(req(
            set(None, keys::MAX_CONCURRENT_INSTANCES_PER_TENANT, "64"),
            &s.root,
        ))
        .await
        .unwrap();
    // A tenant token never writes the global scope.
    let e = s
        .configs
        .set_config(req(set(None, keys::WEEKLY_CREDIT_USD, "1"), &s.op))
        .await
        .unwrap_err();
    assert_eq!(e.code(), Code::PermissionDenied);
}

#[sqlx::test(migrator = "genesis_store::MIGRATOR")]
async fn an_unknown_key_is_refused_at_both_scopes_listing_the_known_ones(pool: PgPool) {
    let mut s = setup(&pool).await;
    let misspelt = "AgentDispatcher:WeeklyCreditUSD";
    for (tenant, token) in [
        (Some(s.tenant), s.op.clone()),
        (Some(s.tenant), s.root.clone()),
        (None, s.root.clone()),
    ] {
        let e = s
            .configs
            .set_config(req(set(tenant, misspelt, "5"), &token))
            .await
            .unwrap_err();
        assert_eq!(e.code(), Code::InvalidArgument, "{e:?}");
        let m = e.message();
        assert!(
            m.contains(&format!("unknown config key {misspelt:?}")),
            "{m}"
        );
        for key in keys::ALL {
            assert!(m.contains(key), "{key} missing from {m}");
        }
    }
    assert_eq!(rows(&pool).await, vec![], "nothing written");
}

#[sqlx::test(migrator = "genesis_store::MIGRATOR")]
async fn a_platform_feature_is_the_platform_tokens_to_set(pool: PgPool) {
    let mut s = setup(&pool).await;
    let before = s.store.tenants().get(s.tenant).await.unwrap();
    assert!(!before.feature_enabled("windows-pool"));
    for name in ["windows-pool", "prompt-redactor"] {
        for enabled in [true, false] {
            let e = s
                .tenants
                .set_feature(req(
                    v1::SetFeatureRequest {
                        tenant_id: s.tenant.to_string(),
                        name: name.to_owned(),
                        enabled,
                    },
                    &s.op,
                ))
                .await
                .expect_err(name);
            assert_eq!(e.code(), Code::PermissionDenied, "{name}: {e:?}");
            assert!(e.message().contains(name), "{e:?}");
            assert!(e.message().contains("only a platform token"), "{e:?}");
        }
        let t = s.store.tenants().get(s.tenant).await.unwrap();
        assert_eq!(t, before, "{name}: nothing changed");
    }
    let redactors = genesis_store::inspect::count_instances_of_type(&pool, "PromptRedactor")
        .await
        .unwrap();
    assert_eq!(redactors, 0, "a refused prompt-redactor aligns nothing");

    let t = s
        .tenants
        .set_feature(req(
            v1::SetFeatureRequest {
                tenant_id: s.tenant.to_string(),
                name: "windows-pool".into(),
                enabled: true,
            },
            &s.root,
        ))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(t.features.get("windows-pool"), Some(&true));
    // An unknown feature is still INVALID_ARGUMENT, whoever asks.
    let e = s
        .tenants
        .set_feature(req(
            v1::SetFeatureRequest {
                tenant_id: s.tenant.to_string(),
                name: "time-travel".into(),
                enabled: true,
            },
            &s.op,
        ))
        .await
        .unwrap_err();
    assert_eq!(e.code(), Code::InvalidArgument, "{e:?}");
}
