-- 0011: the cancel keys still to set (server/bus.c, docs/control-plane.md).  A job cancelled (by
-- hand, with its search, or stopped by its search's asha rule) or failed gets a row here in the
-- transaction that moved it; the server sets its Redis cancel key after the commit and deletes the
-- row once Redis answered.  A server that died between the commit and the SET, or a Redis that was
-- down or refused it, leaves the row: the bus sets every such key again on each connect (a restart
-- included) and in its periodic sweep, so a worker never runs a cancelled job to its end.

CREATE TABLE cancel_outbox (
    job_id     TEXT PRIMARY KEY,
    created_at INTEGER NOT NULL    -- ms: the sweep leaves a row younger than a second to the SET in flight
);
