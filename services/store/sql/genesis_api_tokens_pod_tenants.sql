-- Keeps api_tokens.pod_tenants, the tenants an agent-pod token may serve,
-- sorted, unique and naming only existing tenants; empty means every tenant.
-- Only a platform-wide token may carry a set. A change is an UPDATE, which
-- the api_tokens statement trigger notifies on genesis_api_tokens, so every
-- token cache forgets the old set at once.
CREATE OR REPLACE FUNCTION public.genesis_api_tokens_pod_tenants()
 RETURNS trigger
 LANGUAGE plpgsql
AS $function$
DECLARE
    missing uuid;
BEGIN
    NEW.pod_tenants := ARRAY(SELECT DISTINCT x FROM unnest(NEW.pod_tenants) x ORDER BY x);
    SELECT x INTO missing
      FROM unnest(NEW.pod_tenants) x
     WHERE NOT EXISTS (SELECT 1 FROM tenants n WHERE n.id = x)
     LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION 'tenant %', missing USING ERRCODE = 'no_data_found';
    END IF;
    RETURN NEW;
END;
$function$;
