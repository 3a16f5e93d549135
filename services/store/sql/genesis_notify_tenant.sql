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
