-- A tenant created or its standing-agents gate flipped notifies
-- genesis_tenants, so control's bootstrap picks it up without a restart.
-- The payload carries ids only; listeners load rows tenant-scoped.
CREATE OR REPLACE FUNCTION public.genesis_notify_tenant()
 RETURNS trigger
 LANGUAGE plpgsql
AS $function$
BEGIN
    PERFORM pg_notify('genesis_tenants', json_build_object('tenant_id', NEW.id,
        'standing_agents_enabled', NEW.standing_agents_enabled)::text);
    RETURN NEW;
END
$function$;
