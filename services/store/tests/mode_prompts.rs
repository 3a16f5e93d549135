//! Mode prompts and the chat tail on the real PostgreSQL: the seeded
//! `agent_modes` rows agree with genesis-core's in-code seed mode by mode
//! (description, prompt fragment, budget override; the toolset left to the
//! seed), and the chat tail a reply is planned with is the newest messages of
//! the instance, both directions, in order, each bounded.

#![allow(clippy::unwrap_used)] // a failed unwrap is the test failing

mod common;

use std::collections::HashSet;

use common::*;
use genesis_core::modes::seed_catalogue;
use genesis_core::{AgentType, BudgetOverride, MessageDirection};
use genesis_store::messages::ChatTail;
use sqlx::PgPool;
use uuid::Uuid;

/// The types whose catalogue is a table (the mission types have none).
const CATALOGUE_TYPES: [AgentType; 3] = [
    AgentType::Soa,
    AgentType::Compliance,
    AgentType::PromptRedactor,
];

#[sqlx::test(migrator = "genesis_store::MIGRATOR")]
async fn the_migrated_mode_rows_are_the_in_code_seed(pool: PgPool) -> anyhow::Result<()> {
    let store = store(&pool);
    let mut fragments = HashSet::new();
    let mut modes = 0;
    for t in CATALOGUE_TYPES {
        let rows = store.modes().catalogue(t).await?;
        let seeds = seed_catalogue(t);
        assert_eq!(
            rows.iter().map(|r| r.name.as_str()).collect::<HashSet<_>>(),
            seeds
                .iter()
                .map(|s| s.name.as_str())
                .collect::<HashSet<_>>(),
            "{t}: the same modes"
        );
        // The default row is the seed's first (default) mode.
        assert_eq!(rows[0].name, seeds[0].name);
        assert!(rows[0].is_default);
        for seed in &seeds {
            let row = rows.iter().find(|r| r.name == seed.name).unwrap();
            let mode = format!("{t} {}", seed.name);
            assert!(row.system_seed, "{mode}");
            assert_eq!(row.description, seed.description, "{mode}");
            assert_eq!(row.prompt_fragment, seed.prompt_fragment, "{mode}");
            assert_eq!(
                row.budget_override
                    .as_ref()
                    .map(|v| BudgetOverride::from_json_value(v).unwrap()),
                seed.budget_override,
                "{mode}"
            );
            // NULL: the seed's toolset applies.
            assert_eq!(row.toolset, None, "{mode}");
            // Not vacuous: every mode says something, and something of its own.
            assert!(
                row.prompt_fragment.len() > 200,
                "{mode}: {:?}",
                row.prompt_fragment
            );
            assert!(
                row.prompt_fragment
                    .starts_with(&format!("MODE: {} — ", seed.name)),
                "{mode}"
            );
            assert!(fragments.insert(row.prompt_fragment.clone()), "{mode}");
            modes += 1;
        }
    }
    assert_eq!(modes, 10, "six SOA, three Compliance, one Prompt Engineer");
    let research = store
        .modes()
        .catalogue(AgentType::Compliance)
        .await?
        .into_iter()
        .find(|r| r.name == "Research")
        .unwrap();
    assert_eq!(
        BudgetOverride::from_json_value(research.budget_override.as_ref().unwrap())?,
        BudgetOverride {
            max_tokens: Some(48_000),
            max_output_tokens_per_turn: None,
            max_tool_calls: Some(24),
            max_wall_seconds: Some(600),
            max_dollars: Some(4.00),
            max_turns: Some(24),
        }
    );
    Ok(())
}

async fn chat(
    store: &genesis_store::Store,
    tenant: Uuid,
    instance: Uuid,
    upto: Option<Uuid>,
) -> ChatTail {
    store
        .messages()
        .chat_tail(
            tenant,
            instance,
            upto,
            genesis_core::prompt::CHAT_TAIL_MESSAGES,
            genesis_core::prompt::CHAT_MESSAGE_MAX_CHARS,
        )
        .await
        .unwrap()
}

#[sqlx::test(migrator = "genesis_store::MIGRATOR")]
async fn the_chat_tail_is_the_last_ten_messages_in_order_each_bounded(
    pool: PgPool,
) -> anyhow::Result<()> {
    let store = store(&pool);
    let t = tenant(&store, "a").await?;
    let inst = soa(&store, t).await?.id;
    assert_eq!(chat(&store, t, inst, None).await, ChatTail::default());
    let mut ids = Vec::new();
    for n in 1..=12 {
        let direction = if n % 2 == 1 {
            MessageDirection::OperatorToAgent
        } else {
            MessageDirection::AgentToOperator
        };
        let body = if n == 11 {
            format!("long {}", "x".repeat(10 * 1024))
        } else {
            format!("message {n}")
        };
        ids.push(store.messages().append(t, inst, direction, &body).await?.id);
    }
    let tail = chat(&store, t, inst, None).await;
    assert!(tail.earlier_omitted, "messages 1 and 2 are left out");
    assert_eq!(tail.messages.len(), 10);
    for (i, m) in tail.messages.iter().enumerate() {
        let n = i + 3;
        let expected = if n % 2 == 1 {
            MessageDirection::OperatorToAgent
        } else {
            MessageDirection::AgentToOperator
        };
        assert_eq!(m.direction, expected, "message {n}");
        if n == 11 {
            assert_eq!(m.body.chars().count(), 1_000);
            assert!(m.body.starts_with("long xxx"));
            assert_eq!(m.body_chars, 5 + 10 * 1024);
            assert!(m.truncated());
        } else {
            assert_eq!(m.body, format!("message {n}"));
            assert!(!m.truncated());
        }
    }
    // Up to the message a tick answers: nothing after it.
    let upto = chat(&store, t, inst, Some(ids[4])).await;
    let bodies: Vec<&str> = upto.messages.iter().map(|m| m.body.as_str()).collect();
    assert_eq!(
        bodies,
        [
            "message 1",
            "message 2",
            "message 3",
            "message 4",
            "message 5"
        ]
    );
    assert!(!upto.earlier_omitted);
    // An id that is no message of this instance bounds nothing.
    assert_eq!(
        chat(&store, t, inst, Some(Uuid::new_v4())).await,
        tail,
        "an unknown bound is no bound"
    );
    // Another tenant's chat is not there to read.
    let other = tenant(&store, "b").await?;
    assert_eq!(chat(&store, other, inst, None).await, ChatTail::default());
    assert!(
        store
            .messages()
            .chat_tail(t, inst, None, 0, 10)
            .await
            .is_err()
    );
    Ok(())
}
