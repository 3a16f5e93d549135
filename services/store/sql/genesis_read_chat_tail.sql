-- The last messages of an instance's conversation up to a given message,
-- newest last, bounded in count and in total characters: the chat context a
-- Dialogue tick is planned with.
CREATE OR REPLACE FUNCTION public.genesis_read_chat_tail(p_tenant uuid, p_instance uuid, p_upto uuid, p_limit integer, p_max_chars integer)
 RETURNS jsonb
 LANGUAGE plpgsql
AS $function$
DECLARE
    v_upto_at timestamptz;
    v_upto_id uuid;
BEGIN
    PERFORM genesis_set_tenant(p_tenant);
    IF p_upto IS NOT NULL THEN
        SELECT u.created_at, u.id INTO v_upto_at, v_upto_id
          FROM agent_messages u WHERE u.id = p_upto AND u.instance_id = p_instance;
    END IF;
    RETURN (SELECT jsonb_build_object(
        'messages', coalesce(jsonb_agg(jsonb_build_object(
              'direction', t.direction,
              'body', left(t.body, p_max_chars),
              'body_chars', length(t.body),
              'created_at', t.created_at) ORDER BY t.created_at, t.id)
            FILTER (WHERE t.n <= p_limit), '[]'::jsonb),
        'earlier_omitted', count(*) > p_limit)
      FROM (SELECT m.direction, m.body, m.created_at, m.id,
                   row_number() OVER (ORDER BY m.created_at DESC, m.id DESC) AS n
              FROM agent_messages m
             WHERE m.instance_id = p_instance
               AND (v_upto_id IS NULL OR (m.created_at, m.id) <= (v_upto_at, v_upto_id))
             ORDER BY m.created_at DESC, m.id DESC
             LIMIT p_limit + 1) t);
END
$function$;
