-- The episode journal's writers: an LLM turn is journaled with its last
-- call attempt, in that attempt's transaction (RecordCallAttempt's, the
-- completion's or the deferral's), and a tool call with its effect. The
-- write itself, shared by every writer, checks that the step's event is the
-- one its session claimed.

\ir ../services/store/sql/genesis_journal_write.sql
\ir ../services/store/sql/genesis_journal_append.sql
\ir ../services/store/sql/genesis_write_call_attempt.sql
