-- Append one step to the episode journal of p_event, under the session
-- guard (only the session holding the instance's live lease appends; a
-- resumed episode's new session continues the same journal). Appends of one
-- episode queue on a transaction lock of the event, so sequence numbers
-- follow the order of the commits and none is taken twice. The episode's
-- journal holds at most p_max_bytes of entries: the first step that would
-- pass it is replaced by one `truncated` marker naming what was dropped,
-- and every later step is dropped without a row. Returns
-- {"outcome": "not_found" | "lease_lost"} with nothing written,
-- {"outcome": "appended", "seq": n}, or {"outcome": "truncated", "seq": n
-- of the marker, or null once it exists}.
CREATE OR REPLACE FUNCTION public.genesis_journal_append(p_tenant uuid, p_instance uuid, p_event uuid, p_session uuid, p_kind text, p_entry jsonb, p_max_bytes integer)
 RETURNS jsonb
 LANGUAGE plpgsql
AS $function$
DECLARE
    holder uuid;
    expires timestamptz;
    found_instance boolean;
    v_next integer;
    v_total bigint;
    v_truncated boolean;
    v_bytes integer;
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
    PERFORM pg_advisory_xact_lock(hashtextextended(p_event::text, 0));
    SELECT coalesce(max(seq) + 1, 0), coalesce(sum(bytes), 0), coalesce(bool_or(kind = 'truncated'), false)
      INTO v_next, v_total, v_truncated
      FROM agent_episode_journal WHERE tenant_id = p_tenant AND event_id = p_event;
    IF v_truncated THEN
        RETURN jsonb_build_object('outcome', 'truncated', 'seq', NULL);
    END IF;
    v_bytes := octet_length(p_entry::text);
    IF v_total + v_bytes > p_max_bytes THEN
        INSERT INTO agent_episode_journal
            (tenant_id, event_id, seq, instance_id, session, kind, entry, bytes)
        VALUES (p_tenant, p_event, v_next, p_instance, p_session, 'truncated',
                jsonb_build_object('dropped_kind', p_kind, 'dropped_bytes', v_bytes,
                                   'journal_bytes', v_total, 'max_bytes', p_max_bytes),
                0);
        RETURN jsonb_build_object('outcome', 'truncated', 'seq', v_next);
    END IF;
    INSERT INTO agent_episode_journal
        (tenant_id, event_id, seq, instance_id, session, kind, entry, bytes)
    VALUES (p_tenant, p_event, v_next, p_instance, p_session, p_kind, p_entry, v_bytes);
    RETURN jsonb_build_object('outcome', 'appended', 'seq', v_next);
END
$function$;
