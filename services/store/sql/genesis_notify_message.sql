-- A chat message appended notifies genesis_messages with its ids (NOTIFY
-- payloads are size-limited), so WatchTurns and the dashboard push it live;
-- listeners load the row tenant-scoped.
CREATE OR REPLACE FUNCTION public.genesis_notify_message()
 RETURNS trigger
 LANGUAGE plpgsql
AS $function$
BEGIN
    PERFORM pg_notify('genesis_messages', json_build_object('tenant_id', NEW.tenant_id,
        'instance_id', NEW.instance_id, 'message_id', NEW.id, 'direction', NEW.direction)::text);
    RETURN NEW;
END
$function$;
