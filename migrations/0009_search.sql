-- 0008: hyper-parameter searches over a program (docs/search.md, server/search.c).  A search is a
-- training job the server runs itself (never published to the scheduler); each trial is an ordinary
-- job of the same tenant, queued and scheduled like any other.  Everything the controller decides
-- with is here, so a restarted server goes on where it was.

CREATE TABLE searches (
    job_id   TEXT PRIMARY KEY REFERENCES jobs (id),
    started  INTEGER NOT NULL DEFAULT 0           -- trials begun so far: the next trial's index
);

CREATE TABLE trials (
    search_id     TEXT NOT NULL REFERENCES jobs (id),
    idx           INTEGER NOT NULL,               -- the trial's number, from 0
    job_id        TEXT NOT NULL UNIQUE,           -- the job that runs it now (a retry is a new job)
    jobs          TEXT NOT NULL DEFAULT '[]',     -- every job that ran it, oldest first (JSON)
    params        TEXT NOT NULL,                  -- {name: value} (JSON)
    state         TEXT NOT NULL DEFAULT 'running'
                  CHECK (state IN ('running', 'succeeded', 'stopped', 'failed', 'cancelled')),
    failures      INTEGER NOT NULL DEFAULT 0,
    last_value    REAL,                           -- the metric in its last point, and the resource there
    last_resource REAL,
    reason        TEXT NOT NULL DEFAULT '',
    PRIMARY KEY (search_id, idx)
);

-- asha: the metric each trial had when it reached a rung, and whether it continued (one decision each)
CREATE TABLE trial_rungs (
    search_id  TEXT NOT NULL,
    rung       INTEGER NOT NULL,
    idx        INTEGER NOT NULL,
    resource   REAL NOT NULL,
    value      REAL NOT NULL,
    continued  INTEGER NOT NULL,
    PRIMARY KEY (search_id, rung, idx)
);
