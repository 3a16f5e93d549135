//! The dollars of one tick: a three-turn planning episode of an SOA in its
//! Strategic mode, priced by every `llm_pricing` row, with and without the
//! providers' prompt caching.
//!
//! The sizes are measured from what the fleet sends, not guessed: the
//! system prompt and the tool schemas of the mode (genesis-core's texts, the
//! supervisor's registry, the pod's advertised list), the objective the pod
//! builds from a bundle carrying the instance's real ledger tail, and two
//! real read-only tool calls run by the supervisor's handlers against the
//! bench's fleet database (rolled back). Tokens are estimated as bytes / 4:
//! no tokenizer ships here, so every figure is an estimate of that kind.
//!
//! Caching follows what the providers bill and where this code base puts
//! the cache: Anthropic caches explicit breakpoints (`genesis_llm`'s
//! Anthropic provider marks the tools, the system prompt, the first user
//! message and, after the first turn, the conversation's last block), a
//! prefix shorter than the model's minimum is not cached, a write costs the
//! row's cache-write price and a read its cache-read price; OpenAI caches
//! the longest prefix already seen, from 1,024 tokens in steps of 128, with
//! no write surcharge. Dollars come from `genesis_core::pricing` only: this
//! module decides which tokens fall in which of the four disjoint counts,
//! never what a token costs.
//!
//! Must never judge a figure (it is a computation, not a measurement of this
//! machine) and never write to the fleet database.

use std::collections::HashSet;

use anyhow::Context as _;
use genesis_core::pricing::{ModelPrice, TokenUsage};
use genesis_core::{AgentEventKind, AgentType};
use genesis_proto::v1 as pb;
use genesis_store::Store;
use serde::Serialize;
use serde_json::{Value, json};
use sqlx::postgres::PgPool;
use uuid::Uuid;

/// Bytes per estimated token.
pub const BYTES_PER_TOKEN: u64 = 4;

/// The estimated tokens of `text`: its bytes / 4, rounded up.
pub fn estimate_tokens(text: &str) -> u64 {
    (text.len() as u64).div_ceil(BYTES_PER_TOKEN)
}

/// The sizes of one three-turn episode, in estimated tokens. Turn 1 sends
/// the tools, the system prompt and the objective; turn 2 adds the first
/// tool call and its result; turn 3 the second call and its result. Each
/// turn's output is its tool call, the third the terminator.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct EpisodeTokens {
    /// The advertised tool list (name, description, schema of each).
    pub tools: u64,
    /// The system prompt (base + the mode's fragment).
    pub system: u64,
    /// The objective: the first user message, per tick.
    pub objective: u64,
    /// The three tool calls the model makes (the outputs of turns 1–3).
    pub calls: [u64; 3],
    /// The results of the first two calls.
    pub results: [u64; 2],
    /// The tools of the three calls, in order.
    pub call_names: [String; 3],
}

impl EpisodeTokens {
    /// The invariant prefix of every tick of an instance: tools + system.
    pub fn prefix(&self) -> u64 {
        self.tools + self.system
    }

    /// The prompt's parts in the order a provider renders them: tools,
    /// system, objective, then each earlier turn's call and result.
    fn parts(&self) -> [u64; 5] {
        [
            self.tools,
            self.system,
            self.objective,
            self.calls[0] + self.results[0],
            self.calls[1] + self.results[1],
        ]
    }
}

/// How a model's provider caches prompts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum Caching {
    /// Explicit breakpoints; prefixes below `min_prefix` tokens are not cached.
    Anthropic { min_prefix: u64 },
    /// Automatic, the longest prefix already seen, from 1,024 tokens.
    OpenAi,
    /// No prompt cache (the scripted provider, or a model of no known
    /// provider): every prompt token at the input price.
    None,
}

impl Caching {
    /// The column text.
    pub fn label(self) -> String {
        match self {
            Caching::Anthropic { min_prefix } => {
                format!("Anthropic, breakpoints (min {min_prefix} tokens)")
            }
            Caching::OpenAi => "OpenAI, automatic (min 1024 tokens)".into(),
            Caching::None => "none".into(),
        }
    }
}

/// The provider's caching of `model`, by its name. The Anthropic minimum
/// prefix is the one Anthropic documents per model: 4,096 tokens for Claude
/// Haiku 4.5 and Opus 4.5 / 4.6, 2,048 for the Claude 3 Haiku models, 1,024
/// for the others (Opus 4.8, 4.1, Sonnet 4.5, 4).
pub fn caching_of(model: &str) -> Caching {
    if let Some(rest) = model.strip_prefix("claude-") {
        let min_prefix = if ["haiku-4-5", "opus-4-5", "opus-4-6"]
            .iter()
            .any(|m| rest.starts_with(m))
        {
            4_096
        } else if rest.starts_with("3-haiku") || rest.starts_with("3-5-haiku") {
            2_048
        } else {
            1_024
        };
        return Caching::Anthropic { min_prefix };
    }
    let openai = ["gpt-", "chatgpt-", "o1", "o3", "o4"];
    if openai.iter().any(|p| model.starts_with(p)) {
        return Caching::OpenAi;
    }
    Caching::None
}

/// OpenAI's smallest cached prefix, and the step it grows by.
const OPENAI_MIN_PREFIX: u64 = 1_024;
const OPENAI_STEP: u64 = 128;

/// The first two parts (tools, system) are the same on every tick of an
/// instance; the rest belong to one tick's episode.
const SHARED_PARTS: usize = 2;

/// A prompt prefix's identity: its part count, and the tick it belongs to
/// once it reaches past the shared parts.
type PrefixKey = (usize, Option<u32>);

fn key(tick: u32, parts: usize) -> PrefixKey {
    (parts, (parts > SHARED_PARTS).then_some(tick))
}

/// What the provider's cache holds between requests.
#[derive(Debug, Default)]
struct CacheState {
    /// Anthropic: the prefixes written at breakpoints. OpenAI: every
    /// prefix of every prompt sent.
    held: HashSet<PrefixKey>,
}

impl CacheState {
    /// The usage of one request of `tick` whose prompt is `parts` (and
    /// `output` tokens out), and what it leaves in the cache.
    fn request(&mut self, caching: Caching, tick: u32, parts: &[u64], output: u64) -> TokenUsage {
        let upto = |k: usize| parts[..k].iter().sum::<u64>();
        let total = upto(parts.len());
        let mut usage = TokenUsage {
            input_tokens: total,
            output_tokens: output,
            ..TokenUsage::default()
        };
        match caching {
            Caching::None => {}
            Caching::Anthropic { min_prefix } => {
                // The provider's breakpoints: the tools, the system prompt,
                // the first user message, and the last block once the
                // conversation has later turns. One below the minimum
                // caches nothing.
                let mut marks: Vec<usize> = vec![1, 2, 3];
                if parts.len() > 3 {
                    marks.push(parts.len());
                }
                marks.retain(|&k| k <= parts.len() && upto(k) >= min_prefix);
                let Some(&last) = marks.last() else {
                    return usage;
                };
                // A hit is found at any earlier block boundary behind the
                // last breakpoint; the rest up to it is written.
                let read = (1..=last)
                    .rev()
                    .find(|&k| self.held.contains(&key(tick, k)))
                    .map_or(0, upto);
                usage.cache_read_tokens = read;
                usage.cache_write_tokens = upto(last) - read;
                usage.input_tokens = total - upto(last);
                self.held.extend(marks.iter().map(|&k| key(tick, k)));
            }
            Caching::OpenAi => {
                let common = (1..=parts.len())
                    .rev()
                    .find(|&k| self.held.contains(&key(tick, k)))
                    .map_or(0, upto);
                let cached = if common < OPENAI_MIN_PREFIX {
                    0
                } else {
                    common / OPENAI_STEP * OPENAI_STEP
                };
                usage.cache_read_tokens = cached;
                usage.input_tokens = total - cached;
                self.held.extend((1..=parts.len()).map(|k| key(tick, k)));
            }
        }
        usage
    }
}

/// Which tick of an instance an episode is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tick {
    /// Nothing cached yet (the first tick, or one after the cache expired).
    First,
    /// The next tick within the cache's lifetime: the previous tick left
    /// the shared prefix in the cache.
    Steady,
}

/// The usage of each of the three turns of an episode.
pub fn episode_usage(tokens: &EpisodeTokens, caching: Caching, tick: Tick) -> [TokenUsage; 3] {
    let parts = tokens.parts();
    let mut cache = CacheState::default();
    let run = |cache: &mut CacheState, id: u32| -> [TokenUsage; 3] {
        [0, 1, 2].map(|turn| cache.request(caching, id, &parts[..3 + turn], tokens.calls[turn]))
    };
    if tick == Tick::Steady {
        run(&mut cache, 0);
    }
    run(&mut cache, 1)
}

/// The dollars of an episode at `price`: the one formula, per turn.
pub fn episode_usd(price: &ModelPrice, usage: &[TokenUsage]) -> f64 {
    usage.iter().map(|u| price.cost_usd(u)).sum()
}

/// One model's figures.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CostRow {
    /// The `llm_pricing` row's model.
    pub model: String,
    /// How its provider caches.
    pub caching: Caching,
    /// Every prompt token at the input price.
    pub uncached_usd: f64,
    /// With caching, nothing cached before the tick.
    pub first_tick_usd: f64,
    /// With caching, the next tick within the cache's lifetime.
    pub steady_usd: f64,
}

impl CostRow {
    /// The steady state's saving against no caching, in percent (`None`
    /// for a model that costs nothing).
    pub fn saving_percent(&self) -> Option<f64> {
        (self.uncached_usd > 0.0).then(|| 100.0 * (1.0 - self.steady_usd / self.uncached_usd))
    }
}

/// The figures of every priced model, in the order given.
pub fn cost_rows(prices: &[(String, ModelPrice)], tokens: &EpisodeTokens) -> Vec<CostRow> {
    prices
        .iter()
        .map(|(model, price)| {
            let caching = caching_of(model);
            CostRow {
                model: model.clone(),
                caching,
                uncached_usd: episode_usd(
                    price,
                    &episode_usage(tokens, Caching::None, Tick::First),
                ),
                first_tick_usd: episode_usd(price, &episode_usage(tokens, caching, Tick::First)),
                steady_usd: episode_usd(price, &episode_usage(tokens, caching, Tick::Steady)),
            }
        })
        .collect()
}

/// The cost section of a report.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CostFigures {
    /// The measured sizes.
    pub tokens: EpisodeTokens,
    /// One row per `llm_pricing` row.
    pub rows: Vec<CostRow>,
}

/// Reads the prices from the fleet database, measures one episode of the
/// SOA `instance` of `tenant` and prices it.
pub async fn figures(db: &PgPool, tenant: Uuid, instance: Uuid) -> anyhow::Result<CostFigures> {
    let store = Store::from_pool(db);
    let result = async {
        let prices: Vec<(String, ModelPrice)> = store
            .llm()
            .list_pricing()
            .await
            .context("read llm_pricing")?
            .into_iter()
            .map(|row| {
                let price = row.price();
                (row.model, price)
            })
            .collect();
        let tokens = measure(&store, tenant, instance).await?;
        Ok(CostFigures {
            rows: cost_rows(&prices, &tokens),
            tokens,
        })
    }
    .await;
    store.close().await;
    result
}

/// The event the episode plans on: the one the bench enqueues.
fn bench_event() -> (AgentEventKind, Value) {
    (
        AgentEventKind::ExternalSignalReceived,
        json!({"signalKind": "GuidanceUpdated", "benchRun": "cost", "n": 1}),
    )
}

/// The sizes of a three-turn Strategic episode of the SOA `instance`: the
/// first turn grounds with `soa_query_telemetry`, the second searches the
/// instance's memory with `agent_query_memory`, the third ends with
/// `phase_complete`.
async fn measure(store: &Store, tenant: Uuid, instance: Uuid) -> anyhow::Result<EpisodeTokens> {
    let resolved = genesis_core::modes::resolve_mode(AgentType::Soa, None, &[])
        .context("resolve the SOA's default mode")?;
    let system = resolved.system_prompt(&genesis_core::prompt::base_system_prompt(
        AgentType::Soa,
        &tenant.to_string(),
    ));
    let mode = pb::ResolvedMode {
        name: resolved.name.clone(),
        toolset: resolved.toolset.clone(),
        prompt_fragment: resolved.prompt_fragment.clone(),
        system_prompt: system.clone(),
    };
    let registry = genesis_supervisor::ToolRegistry::standard();
    let mut tail = Vec::new();
    for turn in store
        .ledger()
        .tail(
            tenant,
            instance,
            genesis_agent_pod::planning::LEDGER_TAIL as i64,
        )
        .await
        .context("read the ledger tail")?
    {
        let actions = store.ledger().actions(tenant, turn.id).await?;
        tail.push(genesis_supervisor::bundle::ledger_turn_to_proto(
            &turn, &actions,
        ));
    }
    let window = genesis_supervisor::ops::DEFAULT_WINDOW;
    let bundle = pb::TickBundle {
        tools: registry.schemas_for(&mode.toolset),
        ledger_tail: tail,
        open_items: Some(pb::OpenItems::default()),
        ops_digest: Some(
            genesis_supervisor::ops::OpsProbe::new(None, window)
                .current()
                .to_proto(window),
        ),
        mode: Some(mode.clone()),
        ..Default::default()
    };
    let tools = genesis_agent_pod::planning::advertised_tools(
        &bundle,
        &mode,
        &genesis_agent_pod::planning::ToolSchemas::default(),
    );
    let (kind, payload) = bench_event();
    let objective = genesis_agent_pod::planning::build_objective(
        kind,
        &payload,
        &bundle,
        Some(AgentType::Soa),
        &mode,
        &tools,
    );
    let tools_text: String = tools
        .iter()
        .map(|t| {
            json!({"name": t.name, "description": t.description, "input_schema": *t.parameters})
                .to_string()
        })
        .collect();

    // The memory search looks for a word of the instance's latest summary,
    // so it finds its recent turns as a model's search would.
    let word = bundle
        .ledger_tail
        .last()
        .and_then(|t| {
            t.reasoning_summary
                .split(|c: char| !c.is_alphanumeric())
                .find(|w| w.len() > 3)
                .map(str::to_lowercase)
        })
        .unwrap_or_else(|| "signal".into());
    let calls = [
        ("soa_query_telemetry", json!({"windowHours": 24})),
        ("agent_query_memory", json!({"query": word})),
    ];
    let mut results = Vec::new();
    for (name, args) in &calls {
        let tool = registry
            .get(name)
            .with_context(|| format!("{name} is not registered"))?;
        let mut tx = store.tenant_tx(tenant).await?;
        let mut ctx = genesis_supervisor::tools::ToolContext {
            conn: tx.conn(),
            tenant_id: tenant,
            instance_id: instance,
            session: Uuid::new_v4(),
        };
        let result = tool.run(&mut ctx, args).await;
        tx.rollback().await?;
        let result = result.map_err(|e| anyhow::anyhow!("{name}: {e}"))?;
        results.push(result.to_string());
    }
    let end = (
        genesis_agent_pod::invoker::PHASE_COMPLETE,
        json!({"summary": "Checked the telemetry and the recent turns; nothing needs action this tick."}),
    );
    let call_text = |(name, args): &(&str, Value)| -> String {
        json!({"type": "tool_use", "id": "toolu_0123456789abcdefghijklmn", "name": name, "input": args})
            .to_string()
    };
    Ok(EpisodeTokens {
        tools: estimate_tokens(&tools_text),
        system: estimate_tokens(&system),
        objective: estimate_tokens(&objective),
        calls: [
            estimate_tokens(&call_text(&calls[0])),
            estimate_tokens(&call_text(&calls[1])),
            estimate_tokens(&call_text(&end)),
        ],
        results: [estimate_tokens(&results[0]), estimate_tokens(&results[1])],
        call_names: [calls[0].0.into(), calls[1].0.into(), end.0.into()],
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn price(input: f64, output: f64, read: f64, write: f64) -> ModelPrice {
        ModelPrice {
            input_usd_per_mtok: input,
            output_usd_per_mtok: output,
            cache_read_usd_per_mtok: read,
            cache_write_usd_per_mtok: write,
        }
    }

    fn tokens(tools: u64, system: u64, objective: u64) -> EpisodeTokens {
        EpisodeTokens {
            tools,
            system,
            objective,
            calls: [40, 60, 30],
            results: [200, 300],
            call_names: ["a".into(), "b".into(), "phase_complete".into()],
        }
    }

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-12
    }

    #[test]
    fn tokens_are_bytes_over_four_rounded_up() {
        assert_eq!(estimate_tokens(""), 0);
        assert_eq!(estimate_tokens("abcd"), 1);
        assert_eq!(estimate_tokens("abcde"), 2);
        assert_eq!(estimate_tokens("é"), 1, "bytes, not characters");
    }

    #[test]
    fn models_are_sorted_by_their_providers_caching() {
        assert_eq!(
            caching_of("claude-sonnet-4-5"),
            Caching::Anthropic { min_prefix: 1_024 }
        );
        assert_eq!(
            caching_of("claude-haiku-4-5"),
            Caching::Anthropic { min_prefix: 4_096 }
        );
        assert_eq!(
            caching_of("claude-3-5-haiku-20241022"),
            Caching::Anthropic { min_prefix: 2_048 }
        );
        for m in ["gpt-4o", "gpt-5-mini", "o3", "o4-mini"] {
            assert_eq!(caching_of(m), Caching::OpenAi, "{m}");
        }
        assert_eq!(caching_of("scripted-1"), Caching::None);
    }

    #[test]
    fn anthropic_writes_its_breakpoints_then_reads_them() {
        // tools 1000, system 1000, objective 500; turn 2 adds 40 + 200,
        // turn 3 60 + 300. The tools alone (1000) are below the minimum.
        let t = tokens(1_000, 1_000, 500);
        let c = Caching::Anthropic { min_prefix: 1_024 };
        let first = episode_usage(&t, c, Tick::First);
        let usage = |input, read, write, output| TokenUsage {
            input_tokens: input,
            output_tokens: output,
            cache_read_tokens: read,
            cache_write_tokens: write,
        };
        assert_eq!(
            first,
            [
                usage(0, 0, 2_500, 40),
                usage(0, 2_500, 240, 60),
                usage(0, 2_740, 360, 30),
            ]
        );
        // The next tick reads the tools and system the previous one wrote.
        let steady = episode_usage(&t, c, Tick::Steady);
        assert_eq!(steady[0], usage(0, 2_000, 500, 40));
        assert_eq!(steady[1..], first[1..]);
    }

    #[test]
    fn a_prefix_below_the_minimum_is_not_cached() {
        // 2,500 tokens up to the objective: under Haiku 4.5's 4,096 the
        // first turn caches nothing; the third turn's 3,100 neither.
        let t = tokens(1_000, 1_000, 500);
        let c = Caching::Anthropic { min_prefix: 4_096 };
        for tick in [Tick::First, Tick::Steady] {
            let u = episode_usage(&t, c, tick);
            assert_eq!(u, episode_usage(&t, Caching::None, tick));
            assert!(
                u.iter()
                    .all(|u| u.cache_read_tokens + u.cache_write_tokens == 0)
            );
        }
        // A larger objective crosses it at the first user message: written
        // on turn 1 (tools and system not cached on their own), read after.
        let t = tokens(1_000, 1_000, 2_500);
        let u = episode_usage(&t, c, Tick::Steady);
        assert_eq!(
            (u[0].cache_read_tokens, u[0].cache_write_tokens),
            (0, 4_500)
        );
        assert_eq!(
            (u[1].cache_read_tokens, u[1].cache_write_tokens),
            (4_500, 240)
        );
    }

    #[test]
    fn openai_reads_the_longest_seen_prefix_in_steps_of_128() {
        let t = tokens(1_000, 1_000, 500);
        let first = episode_usage(&t, Caching::OpenAi, Tick::First);
        // Turn 1 has seen nothing; turn 2 the 2,500 of turn 1 (2,432 in
        // steps of 128); turn 3 the 2,740 of turn 2 (2,688).
        let read: Vec<u64> = first.iter().map(|u| u.cache_read_tokens).collect();
        assert_eq!(read, [0, 2_432, 2_688]);
        let input: Vec<u64> = first.iter().map(|u| u.input_tokens).collect();
        assert_eq!(input, [2_500, 2_740 - 2_432, 3_100 - 2_688]);
        assert!(first.iter().all(|u| u.cache_write_tokens == 0));
        // The next tick shares tools + system (2,000 → 1,920) on turn 1.
        let steady = episode_usage(&t, Caching::OpenAi, Tick::Steady);
        assert_eq!(steady[0].cache_read_tokens, 1_920);
        assert_eq!(steady[1..], first[1..]);
        // A prefix under 1,024 tokens is never cached.
        let small = tokens(300, 300, 100);
        let u = episode_usage(&small, Caching::OpenAi, Tick::Steady);
        assert_eq!(u[0].cache_read_tokens, 0);
    }

    #[test]
    fn a_two_model_table_gives_the_known_figures() {
        let t = tokens(1_000, 1_000, 500);
        let prices = vec![
            ("claude-sonnet-4-5".to_owned(), price(3.0, 15.0, 0.30, 3.75)),
            ("gpt-4o".to_owned(), price(2.5, 10.0, 1.25, 2.5)),
        ];
        let rows = cost_rows(&prices, &t);
        assert_eq!(rows.len(), 2);
        // Prompts 2,500 + 2,740 + 3,100 = 8,340 tokens; outputs 130.
        let sonnet_plain = (8_340.0 * 3.0 + 130.0 * 15.0) / 1e6;
        assert!(close(rows[0].uncached_usd, sonnet_plain), "{rows:?}");
        // First tick: writes 2,500 + 240 + 360, reads 2,500 + 2,740.
        let sonnet_first = (3_100.0 * 3.75 + 5_240.0 * 0.30 + 130.0 * 15.0) / 1e6;
        assert!(close(rows[0].first_tick_usd, sonnet_first), "{rows:?}");
        // Steady: turn 1 reads 2,000 and writes 500.
        let sonnet_steady = ((500.0 + 240.0 + 360.0) * 3.75 + 7_240.0 * 0.30 + 130.0 * 15.0) / 1e6;
        assert!(close(rows[0].steady_usd, sonnet_steady), "{rows:?}");
        let gpt_plain = (8_340.0 * 2.5 + 130.0 * 10.0) / 1e6;
        assert!(close(rows[1].uncached_usd, gpt_plain), "{rows:?}");
        let gpt_first = ((8_340.0 - 5_120.0) * 2.5 + 5_120.0 * 1.25 + 130.0 * 10.0) / 1e6;
        assert!(close(rows[1].first_tick_usd, gpt_first), "{rows:?}");
        let gpt_steady = ((8_340.0 - 7_040.0) * 2.5 + 7_040.0 * 1.25 + 130.0 * 10.0) / 1e6;
        assert!(close(rows[1].steady_usd, gpt_steady), "{rows:?}");
        let saving = rows[0].saving_percent().unwrap_or_default();
        assert!(close(saving, 100.0 * (1.0 - sonnet_steady / sonnet_plain)));
    }

    #[test]
    fn a_model_priced_zero_costs_nothing() {
        let rows = cost_rows(
            &[("scripted-1".to_owned(), ModelPrice::FREE)],
            &tokens(1_000, 1_000, 500),
        );
        assert_eq!(rows[0].uncached_usd, 0.0);
        assert_eq!(rows[0].first_tick_usd, 0.0);
        assert_eq!(rows[0].steady_usd, 0.0);
        assert_eq!(rows[0].saving_percent(), None);
        assert_eq!(rows[0].caching, Caching::None);
    }

    #[test]
    fn caching_never_costs_more_in_the_steady_state_nor_on_openai() {
        let prices = vec![
            ("claude-opus-4-1".to_owned(), price(15.0, 75.0, 1.50, 18.75)),
            ("claude-haiku-4-5".to_owned(), price(1.0, 5.0, 0.10, 1.25)),
            ("gpt-5".to_owned(), price(1.25, 10.0, 0.125, 1.25)),
            ("o4-mini".to_owned(), price(1.10, 4.40, 0.275, 1.10)),
        ];
        let mut anthropic_checked = 0;
        for tools in [0, 500, 1_500, 4_000] {
            for system in [100, 1_200, 3_000] {
                for objective in [50, 900, 5_000] {
                    let t = tokens(tools, system, objective);
                    for row in cost_rows(&prices, &t) {
                        match row.caching {
                            Caching::OpenAi => assert!(
                                row.first_tick_usd <= row.uncached_usd + 1e-15,
                                "{row:?} {t:?}"
                            ),
                            // Once the first turn's prompt reaches the
                            // minimum, what is written is read again.
                            Caching::Anthropic { min_prefix } => {
                                if t.prefix() + t.objective < min_prefix {
                                    continue;
                                }
                                anthropic_checked += 1;
                            }
                            Caching::None => {}
                        }
                        assert!(row.steady_usd <= row.uncached_usd + 1e-15, "{row:?} {t:?}");
                        assert!(row.steady_usd <= row.first_tick_usd + 1e-15, "{row:?}");
                    }
                }
            }
        }
        assert!(anthropic_checked > 30, "{anthropic_checked}");
    }

    #[test]
    fn a_last_turn_write_is_never_read() {
        // Only turn 3's prompt (650 + 240 + 360 = 1,250) reaches the
        // minimum: its breakpoint is written at 1.25x and the episode
        // ends, so that tick costs more than sending it uncached.
        let t = tokens(500, 100, 50);
        let sonnet = price(3.0, 15.0, 0.30, 3.75);
        let c = Caching::Anthropic { min_prefix: 1_024 };
        let u = episode_usage(&t, c, Tick::Steady);
        assert_eq!((u[2].cache_write_tokens, u[2].input_tokens), (1_250, 0));
        let cached = episode_usd(&sonnet, &u);
        let plain = episode_usd(&sonnet, &episode_usage(&t, Caching::None, Tick::Steady));
        assert!(
            close(cached - plain, 1_250.0 * 0.75 / 1e6),
            "{cached} {plain}"
        );
    }
}
