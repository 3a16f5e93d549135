-- DESIGN §5.7: mode writes go through one chokepoint, which always appends
-- agent_mode_change_events (genesis_store::modes::set_active_mode_in). Until
-- now that was a code convention: either service role could UPDATE
-- active_mode directly and leave no audit row. The chokepoint now names the
-- instance it is changing in the transaction-local setting
-- genesis.mode_chokepoint, writes the mode and the audit row, and clears the
-- setting; a service-role UPDATE that changes active_mode without it is
-- refused. The owner (migrations, an operator's maintenance session) is not a
-- service role and is not held to it. The trigger is column-specific, so the
-- tick's own updates of agent_instances, which never set active_mode, do not
-- fire it.
CREATE OR REPLACE FUNCTION public.genesis_guard_mode_write()
 RETURNS trigger
 LANGUAGE plpgsql
AS $function$
BEGIN
    IF current_user IN ('genesis_app', 'genesis_system')
       AND current_setting('genesis.mode_chokepoint', true) IS DISTINCT FROM NEW.id::text THEN
        RAISE EXCEPTION 'active_mode of instance % is written only through the mode chokepoint', NEW.id
            USING ERRCODE = 'insufficient_privilege';
    END IF;
    RETURN NEW;
END
$function$;
