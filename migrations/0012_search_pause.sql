-- 0012: asha's paused variant (spec.search.pause, docs/search.md): a trial waits at a rung, 'paused',
-- until its search promotes it (trial_rungs.continued then means promoted) or ends.  SQLite cannot
-- change a CHECK in place: the table is rebuilt, rows kept.

CREATE TABLE trials_new (
    search_id     TEXT NOT NULL REFERENCES jobs (id),
    idx           INTEGER NOT NULL,               -- the trial's number, from 0
    job_id        TEXT NOT NULL UNIQUE,           -- the job that runs it now (a retry or a promotion is a new job)
    jobs          TEXT NOT NULL DEFAULT '[]',     -- every job that ran it, oldest first (JSON)
    params        TEXT NOT NULL,                  -- {name: value} (JSON)
    state         TEXT NOT NULL DEFAULT 'running'
                  CHECK (state IN ('running', 'paused', 'succeeded', 'stopped', 'failed', 'cancelled')),
    failures      INTEGER NOT NULL DEFAULT 0,
    last_value    REAL,                           -- the metric in its last point, and the resource there
    last_resource REAL,
    reason        TEXT NOT NULL DEFAULT '',
    PRIMARY KEY (search_id, idx)
);
INSERT INTO trials_new (search_id, idx, job_id, jobs, params, state, failures, last_value, last_resource, reason)
    SELECT search_id, idx, job_id, jobs, params, state, failures, last_value, last_resource, reason FROM trials;
DROP TABLE trials;
ALTER TABLE trials_new RENAME TO trials;
