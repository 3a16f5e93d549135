-- Exact bills: cache writes priced, dated model names priced by their base
-- name, the row that priced each attempt recorded, the scripted provider
-- free.
--
-- Anthropic bills prompt tokens written to its cache at a surcharge over
-- plain input (1.25x for the five-minute cache), so a price row needs a
-- cache-write price beside the cache-read one. OpenAI never reports cache
-- writes; its rows carry the plain input price there, which no attempt uses.
ALTER TABLE llm_pricing
    ADD COLUMN cache_write_usd_per_mtok double precision NOT NULL DEFAULT 0
        CHECK (cache_write_usd_per_mtok >= 0);

UPDATE llm_pricing SET cache_write_usd_per_mtok = input_usd_per_mtok * 1.25
 WHERE model LIKE 'claude-%';
UPDATE llm_pricing SET cache_write_usd_per_mtok = input_usd_per_mtok
 WHERE model LIKE 'gpt-%';

-- The offline scripted provider calls nobody and spends nothing. It was
-- priced like a mid-size model so the demo showed a cost; a bill must show
-- what was spent, and the demo now shows $0 for it.
UPDATE llm_pricing
   SET input_usd_per_mtok = 0, output_usd_per_mtok = 0,
       cache_read_usd_per_mtok = 0, cache_write_usd_per_mtok = 0, updated_at = now()
 WHERE model = 'scripted-1';

-- Current models a preset may name, at their public list prices (cache
-- reads at the provider's cached-input price; Claude cache writes at 1.25x
-- input). A preset naming a model with no row is refused, so the table
-- must know the models operators actually use.
INSERT INTO llm_pricing (model, input_usd_per_mtok, output_usd_per_mtok, cache_read_usd_per_mtok,
                         cache_write_usd_per_mtok) VALUES
    ('claude-opus-4-1',   15.0,  75.0,  1.50,  18.75),
    ('claude-sonnet-4',    3.0,  15.0,  0.30,   3.75),
    ('gpt-5',              1.25, 10.0,  0.125,  1.25),
    ('gpt-5-mini',         0.25,  2.0,  0.025,  0.25),
    ('gpt-5-codex',        1.25, 10.0,  0.125,  1.25),
    ('gpt-4.1',            2.0,   8.0,  0.50,   2.0),
    ('gpt-4.1-mini',       0.40,  1.60, 0.10,   0.40),
    ('o3',                 2.0,   8.0,  0.50,   2.0),
    ('o4-mini',            1.10,  4.40, 0.275,  1.10)
ON CONFLICT (model) DO NOTHING;

-- Which price an attempt was billed at: the row's model name (the served
-- name itself, or the base name a dated one extends) and how it was chosen.
-- Both stay empty on attempts written before this release.
-- The source's values are a domain, as the attempt's other checked
-- columns are, so an insert checks it without a table CHECK.
CREATE DOMAIN llm_pricing_source AS text
    CONSTRAINT llm_pricing_source_check CHECK (VALUE IN ('exact', 'prefix', 'fallback', 'free'));
ALTER TABLE llm_call_attempts
    ADD COLUMN priced_as text,
    ADD COLUMN pricing_source llm_pricing_source;

-- The supervisor's price read: the instance's type, the configuration and
-- every price row whose model name begins one of the two names, so the
-- supervisor picks the row by the one matching rule it shares with
-- control (exact, else the longest base name the served one extends by a
-- date or version stamp). The candidates are few: only names that prefix
-- the served or the requested model.
CREATE OR REPLACE FUNCTION genesis_record_context(p_tenant uuid, p_instance uuid, p_served text, p_requested text)
RETURNS jsonb
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM genesis_set_tenant(p_tenant);
    RETURN (
        SELECT jsonb_build_object(
            'agent_type', i.agent_type,
            'configs', genesis_effective_configs(p_tenant),
            'prices', coalesce(
                (SELECT jsonb_agg(to_jsonb(p)) FROM llm_pricing p
                  WHERE starts_with(p_served, p.model) OR starts_with(p_requested, p.model)),
                '[]'::jsonb),
            'catalogue_epoch', (SELECT c.epoch FROM catalogue_epoch c))
          FROM agent_instances i WHERE i.id = p_instance);
END
$$;

-- One priced attempt, as before, now with the price it was billed at.
CREATE OR REPLACE FUNCTION genesis_write_call_attempt(p_tenant uuid, p_instance uuid, a jsonb)
RETURNS jsonb
LANGUAGE plpgsql AS $$
DECLARE
    snap llm_call_snapshots;
    ord integer;
    win credit_windows;
BEGIN
    INSERT INTO llm_call_snapshots
        (tenant_id, instance_id, invocation_id, site_id, requested_model, served_model,
         input_tokens, output_tokens, cost_usd, prompt_overlay_sha256)
    VALUES (p_tenant, p_instance, a->>'invocation_id', a->>'site_id', a->>'requested_model',
            a->>'served_model', (a->>'input_tokens')::bigint, (a->>'output_tokens')::bigint,
            (a->>'cost_usd')::double precision, a->>'prompt_overlay_sha256')
    ON CONFLICT (tenant_id, instance_id, invocation_id) DO UPDATE SET
        served_model = coalesce(EXCLUDED.served_model, llm_call_snapshots.served_model),
        prompt_overlay_sha256 = coalesce(llm_call_snapshots.prompt_overlay_sha256,
                                         EXCLUDED.prompt_overlay_sha256),
        input_tokens = llm_call_snapshots.input_tokens + EXCLUDED.input_tokens,
        output_tokens = llm_call_snapshots.output_tokens + EXCLUDED.output_tokens,
        cost_usd = llm_call_snapshots.cost_usd + EXCLUDED.cost_usd,
        updated_at = now()
    RETURNING * INTO snap;
    INSERT INTO llm_call_attempts
        (tenant_id, snapshot_id, ordinal, provider, credential_name, requested_model, served_model,
         outcome, usage, latency_ms, cost_usd, error_message, priced_as, pricing_source)
    SELECT p_tenant, snap.id, coalesce(max(ordinal) + 1, 0), a->>'provider', a->>'credential_name',
           a->>'requested_model', coalesce(a->>'served_model', ''), a->>'outcome', a->'usage',
           (a->>'latency_ms')::bigint, (a->>'cost_usd')::double precision, a->>'error_message',
           a->>'priced_as', a->>'pricing_source'
      FROM llm_call_attempts WHERE snapshot_id = snap.id
    RETURNING ordinal INTO ord;
    win := genesis_credit_draw_down(p_tenant, (a->>'week_start')::timestamptz,
                                    (a->>'limit_usd')::double precision,
                                    (a->>'cost_usd')::double precision);
    RETURN jsonb_build_object('snapshot', to_jsonb(snap), 'ordinal', ord, 'credit', to_jsonb(win));
END
$$;
