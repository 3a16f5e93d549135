-- The tenant setting as an assignment. PERFORM runs its expression as a
-- query of its own (executor start and end, for one function call); an
-- assignment of an expression without a table is evaluated directly. Every
-- tick function sets the tenant first, so every tick paid for that query.
CREATE OR REPLACE FUNCTION public.genesis_set_tenant(p_tenant uuid)
 RETURNS void
 LANGUAGE plpgsql
AS $function$
DECLARE
    v_set text;
BEGIN
    v_set := set_config('genesis.tenant_id', p_tenant::text, true);
END
$function$;
