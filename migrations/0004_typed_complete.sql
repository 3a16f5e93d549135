-- The completion write takes typed parameters: every value genesis-core's
-- AgentTickSupervisor decided (including the STUCK halt notice's words)
-- and every value the pod recorded arrives as its own parameter, in place
-- of one JSON object read field by field in PL/pgSQL. The previous form is
-- dropped so exactly one definition of the name remains.
DROP FUNCTION IF EXISTS public.genesis_apply_complete(uuid, uuid, uuid, jsonb, jsonb, jsonb);
\ir ../services/store/sql/genesis_apply_complete.sql
