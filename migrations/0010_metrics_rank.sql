-- 0008: a program job's metrics lines from every rank (docs/programs.md, "Metrics"): the rank
-- whose program wrote the point.  Built-in training, inference and federated points, and a
-- program's rank 0, are rank 0; GET /v1/jobs/{id}/metrics?rank=R reads another rank's.

ALTER TABLE job_metrics ADD COLUMN rank INTEGER NOT NULL DEFAULT 0;
CREATE INDEX job_metrics_by_rank ON job_metrics (job_id, rank, seq);
