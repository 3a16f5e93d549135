-- Re-arming events a paused instance left behind (DESIGN §4, spec §3.9).
--
-- An event published while its instance is paused is claimed as
-- `not_active` and its message acknowledged, so the row keeps
-- `published_at` and no message for it remains on the stream. When the
-- instance becomes active again (StartAgent, StartCompliance, the
-- prompt-redactor feature turned on), `Instances::set_status` clears
-- `published_at` on every such unconsumed event and bumps its
-- `publish_epoch`, so the outbox publishes it again. The epoch is part of
-- the message id (`<event id>` at epoch 0, `<event id>.<epoch>` after), so
-- JetStream's duplicate window cannot drop the re-publish as a copy of the
-- first one, while a publish whose mark was lost (same epoch) still is.
ALTER TABLE agent_event_queue
    ADD COLUMN publish_epoch integer NOT NULL DEFAULT 0 CHECK (publish_epoch >= 0);
