-- 0004: training progress points (loss, accuracy, throughput per step), the
-- data behind the dashboard's curves and GET /v1/jobs/{id}/metrics.  One row
-- per progress event that carried metrics; the event id makes a replayed
-- event insert nothing.

CREATE TABLE job_metrics (
    seq      INTEGER PRIMARY KEY AUTOINCREMENT,
    job_id   TEXT NOT NULL REFERENCES jobs (id),
    event_id TEXT NOT NULL UNIQUE,
    ts       INTEGER NOT NULL,
    data     TEXT NOT NULL                 -- the metrics object as JSON
);
CREATE INDEX job_metrics_by_job ON job_metrics (job_id, seq);
