-- Every change to a stored token (revocation, expiry edits, deletion)
-- notifies `genesis_api_tokens`, so a service that keeps admitted tokens in
-- memory (genesis_store::token_cache::TokenCache) drops them as soon as the
-- change commits. Inserts need no notice: only admitted tokens are kept,
-- and a token that did not exist was never admitted. The notice carries no
-- payload: a listener forgets everything it holds, which is cheap, and no
-- hash travels on the channel.
CREATE OR REPLACE FUNCTION public.genesis_notify_api_tokens()
 RETURNS trigger
 LANGUAGE plpgsql
AS $function$
BEGIN
    PERFORM pg_notify('genesis_api_tokens', '');
    RETURN NULL;
END;
$function$;
