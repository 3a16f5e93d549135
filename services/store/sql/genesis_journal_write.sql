-- Write one step of p_event's episode journal for a caller that has already
-- checked the session guard under its own lock (RecordCallAttempt's,
-- CompleteTick's and the deferral's attempt writes, InvokeTool's effect, and
-- genesis_journal_append). The event must be the one p_session claimed: a
-- step never lands in another episode's journal. Appends of one episode
-- queue on a transaction lock of the event, so sequence numbers follow the
-- order of the commits and none is taken twice. The episode's journal holds
-- at most p_max_bytes of entries: the first step that would pass it is
-- replaced by one `truncated` marker naming what was dropped, and every
-- later step is dropped without a row. p_bytes is the entry's size as its
-- writer serialized it (what the cap counts; the writer has the text, the
-- database would have to print the value again). Returns {"outcome": "appended",
-- "seq": n} or {"outcome": "truncated", "seq": n of the marker, or null once
-- it exists}; raises (SQLSTATE 22023) for an event the session did not claim.
CREATE OR REPLACE FUNCTION public.genesis_journal_write(p_tenant uuid, p_instance uuid, p_event uuid, p_session uuid, p_kind text, p_entry jsonb, p_max_bytes integer, p_bytes integer)
 RETURNS jsonb
 LANGUAGE plpgsql
AS $function$
DECLARE
    v_next integer;
    v_total bigint;
    v_truncated boolean;
    v_bytes integer := p_bytes;
BEGIN
    PERFORM 1 FROM agent_event_queue
     WHERE id = p_event AND tenant_id = p_tenant AND instance_id = p_instance
       AND claimed_session = p_session;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'journal step names event %, which session % of instance % did not claim',
            p_event, p_session, p_instance USING ERRCODE = '22023';
    END IF;
    PERFORM pg_advisory_xact_lock(hashtextextended(p_event::text, 0));
    SELECT coalesce(max(seq) + 1, 0), coalesce(sum(bytes), 0), coalesce(bool_or(kind = 'truncated'), false)
      INTO v_next, v_total, v_truncated
      FROM agent_episode_journal WHERE tenant_id = p_tenant AND event_id = p_event;
    IF v_truncated THEN
        RETURN jsonb_build_object('outcome', 'truncated', 'seq', NULL);
    END IF;
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
