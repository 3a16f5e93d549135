-- Notifications control listens on (genesis-control): a tenant created or
-- its standing-agents gate flipped notifies genesis_tenants, so the bootstrap
-- picks it up without a restart; a chat message appended notifies
-- genesis_messages, so WatchTurns pushes it live. Payloads carry ids only
-- (NOTIFY payloads are size-limited); listeners load rows tenant-scoped.

CREATE FUNCTION genesis_notify_tenant() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('genesis_tenants', json_build_object('tenant_id', NEW.id,
        'standing_agents_enabled', NEW.standing_agents_enabled)::text);
    RETURN NEW;
END
$$;

CREATE TRIGGER tenants_notify_insert AFTER INSERT ON tenants
    FOR EACH ROW EXECUTE FUNCTION genesis_notify_tenant();
CREATE TRIGGER tenants_notify_gate AFTER UPDATE OF standing_agents_enabled, status ON tenants
    FOR EACH ROW WHEN (OLD.standing_agents_enabled IS DISTINCT FROM NEW.standing_agents_enabled
                       OR OLD.status IS DISTINCT FROM NEW.status)
    EXECUTE FUNCTION genesis_notify_tenant();

CREATE FUNCTION genesis_notify_message() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('genesis_messages', json_build_object('tenant_id', NEW.tenant_id,
        'instance_id', NEW.instance_id, 'message_id', NEW.id, 'direction', NEW.direction)::text);
    RETURN NEW;
END
$$;

CREATE TRIGGER agent_messages_notify AFTER INSERT ON agent_messages
    FOR EACH ROW EXECUTE FUNCTION genesis_notify_message();
