-- Append one step to the episode journal of p_event, under the session
-- guard (only the session holding the instance's live lease appends; a
-- resumed episode's new session continues the same journal), then
-- genesis_journal_write. Returns {"outcome": "not_found" | "lease_lost"}
-- with nothing written, else genesis_journal_write's answer.
CREATE OR REPLACE FUNCTION public.genesis_journal_append(p_tenant uuid, p_instance uuid, p_event uuid, p_session uuid, p_kind text, p_entry jsonb, p_max_bytes integer)
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
      FROM agent_instances WHERE id = p_instance AND tenant_id = p_tenant FOR SHARE;
    IF found_instance IS NULL THEN
        RETURN jsonb_build_object('outcome', 'not_found');
    END IF;
    IF holder IS DISTINCT FROM p_session OR expires < now() THEN
        RETURN jsonb_build_object('outcome', 'lease_lost');
    END IF;
    RETURN genesis_journal_write(p_tenant, p_instance, p_event, p_session, p_kind, p_entry, p_max_bytes,
                                 octet_length(p_entry::text));
END
$function$;
