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
