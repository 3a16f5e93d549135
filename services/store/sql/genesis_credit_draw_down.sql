-- RecordCallAttempt's read and write, and CompleteTick's read, as one
-- server-side call each (DESIGN §4: one round trip per transaction). The
-- record's write was a tenant transaction of seven round trips:
-- BEGIN, set_config, the session guard, the snapshot upsert, the attempt
-- insert, the credit draw-down, COMMIT. The statements are the same, in
-- the same order and the same transaction; the function sets the tenant
-- itself and runs as the caller (SECURITY INVOKER), so row-level security
-- applies unchanged. Validation and the cost stay in Rust
-- (genesis_store::llm::Llm::record_call_attempt); this only applies them.
--
-- Returns {"outcome": "not_found"}, {"outcome": "lease_lost"} (nothing
-- written), or {"outcome": "recorded", "snapshot": …, "ordinal": n,
-- "credit": …}.
-- Draw an amount from the tenant's weekly credit window (created at the
-- first draw), on the caller's tenant-scoped transaction. The one
-- statement of the draw-down, for the record below and for
-- genesis_store::credit::draw_down_in.
CREATE OR REPLACE FUNCTION public.genesis_credit_draw_down(p_tenant uuid, p_week_start timestamp with time zone, p_limit_usd double precision, p_amount double precision)
 RETURNS credit_windows
 LANGUAGE plpgsql
AS $function$
DECLARE
    w credit_windows;
BEGIN
    INSERT INTO credit_windows (tenant_id, week_start, limit_usd, spent_usd)
    VALUES (p_tenant, p_week_start, p_limit_usd, p_amount)
    ON CONFLICT (tenant_id, week_start) DO UPDATE
       SET spent_usd = credit_windows.spent_usd + EXCLUDED.spent_usd,
           limit_usd = EXCLUDED.limit_usd, updated_at = now()
    RETURNING * INTO w;
    RETURN w;
END
$function$;
