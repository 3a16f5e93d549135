-- SECURITY DEFINER: the service roles may read the epoch but never set it;
-- only a write to a catalogue table moves it.
CREATE OR REPLACE FUNCTION public.genesis_bump_catalogue_epoch()
 RETURNS trigger
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'public', 'pg_temp'
AS $function$
BEGIN
    UPDATE catalogue_epoch SET epoch = epoch + 1;
    RETURN NULL;
END
$function$;
