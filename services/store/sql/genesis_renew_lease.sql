-- Extends the lease of the session that holds it. The session must hold the
-- lease AND the lease must not have expired, as for RecordCallAttempt and
-- InvokeTool; else nothing is written and the answer is false (LEASE_LOST).
-- A renewal racing a reclaim is decided by the row lock: whichever UPDATE
-- commits first wins, and the other finds the row no longer matches.
CREATE OR REPLACE FUNCTION public.genesis_renew_lease(p_tenant uuid, p_instance uuid, p_session uuid, p_ttl interval)
 RETURNS boolean
 LANGUAGE plpgsql
AS $function$
BEGIN
    PERFORM genesis_set_tenant(p_tenant);
    UPDATE agent_instances SET lease_expires_at = now() + p_ttl
     WHERE id = p_instance AND tenant_id = p_tenant AND lease_session = p_session
       AND NOT coalesce(lease_expires_at < now(), false);
    RETURN FOUND;
END
$function$;
