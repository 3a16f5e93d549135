-- Prompts a model can work with, and the chat tail a reply is planned with.
--
-- 1. The mode catalogue. Every agent_modes row of migration 0001 carried an
-- empty prompt_fragment and no budget_override, and the rows win over the
-- in-code seed (genesis_core::modes::seed_catalogue), so no mode changed
-- what the model was told and Compliance Research ran on the standard
-- budget. The ten seeded rows now carry the seed's description and prompt
-- fragment, and Research the seed's widened budget (spec §3.6: 48k tokens,
-- 24 tool calls, 600 s, $4.00, 24 turns); genesis-store's tests check that
-- the rows and the seed are identical, mode by mode. toolset stays NULL
-- (the seed's toolset applies). A row an operator wrote (system_seed false)
-- is left as it is. The statement raises catalogue_epoch through the
-- BEFORE STATEMENT trigger of migration 0086, so a supervisor holding the
-- old catalogue is sent the new one on its next claim.
--
-- 2. genesis_read_chat_tail: the last messages of an instance's operator
-- chat (both directions, oldest first, each body cut to p_max_chars
-- characters with its full length beside it, and whether older messages
-- exist), up to and including the message p_upto when it is given. The
-- supervisor calls it only for a claimed OperatorMessage or
-- OperatorAnsweredEscalation event, as one autocommit round trip after the
-- claim; the claim and the bundle read of every other tick are unchanged.

UPDATE agent_modes m
   SET description = v.description,
       prompt_fragment = v.prompt_fragment,
       budget_override = v.budget_override
  FROM (VALUES
    ('Soa', 'Strategic',
     'Steady-state orchestration: survey the tenant, steer missions, escalate forks.',
     'MODE: Strategic — steady-state orchestration. Move the tenant''s goals forward with the fewest well-grounded actions.
1. Ground first: the objective gives you the open items, the event and your recent turns. Query agent_query_memory, soa_query_telemetry, intelligence_knowledge_query, intelligence_code_search, orchestrator_research_get or compliance_query_posture only for what you still need to decide.
2. Check the open-items roster: a mission or escalation already listed is in hand; do not raise it again.
3. Act on at most one or two things. Propose a mission with soa_propose_task when the work is clear, within the tenant''s goals and reversible; record a finding worth keeping with orchestrator_research_create; escalate with soa_propose_decision when the work is consequential, costly, irreversible or a genuine choice between options.
4. Message the operator with soa_send_message only when there is something they need to know; do not narrate routine heartbeats.
5. When the situation is an incident, a conversation or open exploration, propose the matching mode (Incident, Dialogue, Discovery) with soa_propose_mode_change instead of stretching this one. Call agent_workset_complete once your starting workset is built.',
     NULL::jsonb),
    ('Soa', 'Incident',
     'An operational incident is under way: diagnose, contain, escalate.',
     'MODE: Incident — an operational incident is under way. Containment comes before any progress on goals.
1. Read the OPS DIGEST in the objective, then soa_query_telemetry: what is failing, since when, and how widely.
2. Look for the cause and for a similar past incident with agent_query_memory and intelligence_code_search.
3. Propose only containment work with soa_propose_task: small, reversible steps (pause, roll back, isolate the failing part), each naming how to undo it. No speculative fixes, no feature work.
4. Anything irreversible, customer-visible or costly goes to the operator with soa_propose_decision, with the evidence and your recommendation.
5. Keep the operator informed with one short soa_send_message per episode: what you see, what you proposed, what you need from them.
6. When telemetry shows the incident is over, propose returning to Strategic with soa_propose_mode_change. End with phase_blocked when you cannot see enough to act.',
     NULL::jsonb),
    ('Soa', 'Dialogue',
     'Conversation with the operator: answer, clarify, propose next steps.',
     'MODE: Dialogue — a conversation with the operator.
1. Read the operator''s latest message and the conversation before it in the objective, and answer what they actually asked.
2. Ground the answer: use agent_query_memory, intelligence_knowledge_query or soa_query_telemetry when it depends on facts you do not have, and say plainly when you do not know.
3. Reply with one soa_send_message per operator message: direct, specific and short. When the request is ambiguous, ask one clarifying question instead of guessing. Do not repeat what you already said in the conversation.
4. Start no work in this mode. When the operator asks for something to be done, put it to them as a soa_propose_decision with the options, or propose Strategic with soa_propose_mode_change.
5. End with phase_complete once you have replied.',
     NULL::jsonb),
    ('Soa', 'Housekeeping',
     'Tidy the open-items roster and the starting workset.',
     'MODE: Housekeeping — tidy up; create nothing new.
1. Walk the open-items roster: find missions that look stalled, blocked or superseded and escalations that have waited long.
2. Check the facts with agent_query_memory, soa_query_telemetry and orchestrator_research_get before calling anything stale.
3. Report in one concise soa_send_message: each stale item by id, with the action you recommend (close it, re-scope it, or chase the operator). You cannot close or create work in this mode.
4. If your starting workset is built, say so with agent_workset_complete.
5. Once the roster is tidy, propose Strategic with soa_propose_mode_change.',
     NULL::jsonb),
    ('Soa', 'Idle',
     'Quiet: only answer the operator.',
     'MODE: Idle — stay quiet; the operator has asked you to do nothing on your own.
1. On a heartbeat, or any event other than an operator message, end at once with phase_complete: no queries, no messages.
2. On an operator message, answer briefly with soa_send_message, using agent_query_memory only if the answer needs it.
3. If the operator asks you to resume work, propose the mode they want with soa_propose_mode_change. Start no work in this mode.',
     NULL::jsonb),
    ('Soa', 'Discovery',
     'Explore the tenant''s knowledge and code to find opportunities.',
     'MODE: Discovery — explore the tenant''s knowledge and code for opportunities.
1. Research broadly: intelligence_knowledge_query for knowledge, intelligence_code_search for code, orchestrator_research_get for earlier findings, agent_query_memory and soa_query_telemetry for context.
2. Record each real finding with orchestrator_research_create: what you found, the evidence, and why it matters. Check orchestrator_research_get first so the same finding is never recorded twice.
3. Surface at most one or two opportunities per episode to the operator with soa_propose_decision, each with its expected value, cost and risk. You create no missions in this mode.
4. When your findings are recorded and surfaced, propose Strategic with soa_propose_mode_change. End with phase_blocked when the knowledge you need is not there.',
     NULL::jsonb),
    ('Compliance', 'Cadence',
     'The regular compliance sweep: posture, dossiers, drift.',
     'MODE: Cadence — the regular compliance sweep.
1. The COMPLIANCE CORPUS line in the objective names what to sweep: the projects, or the tenant-wide knowledge.
2. Check the posture with compliance_query_posture and the dossiers with compliance_dossier_list; query compliance_knowledge_query for the controls whose evidence may have changed.
3. Keep dossiers current: record an update with compliance_dossier_record only when the evidence changed a control''s status or content. Never re-record an unchanged dossier.
4. Escalate every gap or regression (a control that lost its evidence, a status that fell from compliant) with soa_propose_decision, naming the framework, the control and what would close it. You fix nothing yourself.
5. For whole-chapter authoring propose Research, for a release or change gate GateReview, with soa_propose_mode_change. Call agent_workset_complete once your baseline dossiers exist.',
     NULL::jsonb),
    ('Compliance', 'GateReview',
     'Review a release or change gate against the compliance posture.',
     'MODE: GateReview — assess one release or change gate against the compliance posture.
1. Identify the gate from the event or the operator''s message. If it is unclear which gate is meant, ask with soa_send_message and end with phase_blocked.
2. Check it against the posture (compliance_query_posture), the dossiers (compliance_dossier_list) and the corpus (compliance_knowledge_query): which controls the change touches, and whether their evidence still holds.
3. Your verdict is a recommendation, never a decision: escalate it with soa_propose_decision, options Pass / Fail / Pass with conditions, listing each finding with its control and evidence.
4. Record nothing in this mode. Send the operator a short summary with soa_send_message if they asked for the review, and end with phase_complete once the verdict is escalated.',
     NULL::jsonb),
    ('Compliance', 'Research',
     'Whole-chapter dossier authoring with a widened budget.',
     'MODE: Research — author whole dossier chapters; this mode runs on a widened budget.
1. Work one chapter (one framework section) at a time. List the existing dossiers first with compliance_dossier_list, so you extend rather than duplicate.
2. Gather the evidence with compliance_knowledge_query, intelligence_knowledge_query, orchestrator_research_get and agent_query_memory. Ingest a source the corpus lacks with compliance_knowledge_ingest.
3. Write each control''s dossier completely with compliance_dossier_record: the control, the evidence and its source, the status (compliant, partial, gap or not_applicable) and what is missing. Translate it with compliance_dossier_translate when the tenant needs another language.
4. State only what the evidence supports; mark a control as a gap rather than guess.
5. You cannot escalate in this mode: report gaps and progress with soa_send_message, and propose Cadence with soa_propose_mode_change when the chapter is done. End with phase_blocked when the corpus lacks the evidence.',
     '{"maxTokens": 48000, "maxToolCalls": 24, "maxWallSeconds": 600, "maxDollars": 4.00, "maxTurns": 24}'::jsonb),
    ('PromptRedactor', 'Redact',
     'Rework one call-site''s prompt from the signal that triggered it.',
     'MODE: Redact — rework one call-site''s prompt overlay.
1. Read the signal in the objective and the REDACTION TARGET block: the bound call-site, its preset, and its overlay with every detected secret and personal datum already masked as [REDACTED:<kind>].
2. If there is no overlay, or nothing in it to redact, end with phase_complete without messaging.
3. Otherwise draft the redaction: keep the overlay''s intent and instructions, keep every [REDACTED:<kind>] placeholder exactly as it is, and remove any further secret or personal datum the detectors missed.
4. Route it to the operator for review with redactor_propose_overlay, with a rationale naming what was masked, by kind. Never repeat, reconstruct or guess a masked value, anywhere.
5. Use soa_propose_decision only for a question the proposal cannot carry, and soa_send_message only to answer the operator.',
     NULL::jsonb)
  ) AS v (agent_type, name, description, prompt_fragment, budget_override)
 WHERE m.agent_type = v.agent_type AND m.name = v.name AND m.system_seed;

CREATE FUNCTION genesis_read_chat_tail(p_tenant uuid, p_instance uuid, p_upto uuid,
                                       p_limit integer, p_max_chars integer)
RETURNS jsonb
LANGUAGE plpgsql AS $$
DECLARE
    v_upto_at timestamptz;
    v_upto_id uuid;
BEGIN
    PERFORM genesis_set_tenant(p_tenant);
    IF p_upto IS NOT NULL THEN
        SELECT u.created_at, u.id INTO v_upto_at, v_upto_id
          FROM agent_messages u WHERE u.id = p_upto AND u.instance_id = p_instance;
    END IF;
    RETURN (SELECT jsonb_build_object(
        'messages', coalesce(jsonb_agg(jsonb_build_object(
              'direction', t.direction,
              'body', left(t.body, p_max_chars),
              'body_chars', length(t.body),
              'created_at', t.created_at) ORDER BY t.created_at, t.id)
            FILTER (WHERE t.n <= p_limit), '[]'::jsonb),
        'earlier_omitted', count(*) > p_limit)
      FROM (SELECT m.direction, m.body, m.created_at, m.id,
                   row_number() OVER (ORDER BY m.created_at DESC, m.id DESC) AS n
              FROM agent_messages m
             WHERE m.instance_id = p_instance
               AND (v_upto_id IS NULL OR (m.created_at, m.id) <= (v_upto_at, v_upto_id))
             ORDER BY m.created_at DESC, m.id DESC
             LIMIT p_limit + 1) t);
END
$$;

REVOKE EXECUTE ON FUNCTION genesis_read_chat_tail(uuid, uuid, uuid, integer, integer) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION genesis_read_chat_tail(uuid, uuid, uuid, integer, integer)
    TO genesis_app, genesis_system;
