-- RecordCallAttempt: the session guard, then the write above. Returns
-- {"outcome": "not_found"}, {"outcome": "lease_lost"} (nothing written),
-- or {"outcome": "recorded", "snapshot": …, "ordinal": n, "credit": …}.
CREATE OR REPLACE FUNCTION public.genesis_record_call_attempt(p_tenant uuid, p_instance uuid, p_session uuid, a jsonb)
 RETURNS jsonb
 LANGUAGE plpgsql
AS $function$
DECLARE
    holder uuid;
    expires timestamptz;
    found_instance boolean;
BEGIN
    PERFORM genesis_set_tenant(p_tenant);
    SELECT lease_session, lease_expires_at, true INTO holder, expires, found_instance
      FROM agent_instances WHERE id = p_instance FOR SHARE;
    IF found_instance IS NULL THEN
        RETURN jsonb_build_object('outcome', 'not_found');
    END IF;
    IF holder IS DISTINCT FROM p_session OR expires < now() THEN
        RETURN jsonb_build_object('outcome', 'lease_lost');
    END IF;
    RETURN jsonb_build_object('outcome', 'recorded')
        || genesis_write_call_attempt(p_tenant, p_instance, a);
END
$function$;
