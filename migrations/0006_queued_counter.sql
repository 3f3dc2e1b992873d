-- 0006: a per-tenant counter of waiting jobs (issue 17), so that max_queued is checked with one
-- row lookup, not a count over the tenant's jobs on every submission.
--   queued_jobs  the tenant's jobs in state 'queued' or 'scheduled' (what max_queued limits)
-- Triggers keep it in the transaction that inserts a job or changes its state, whatever statement
-- does it (submission, cancel, events from the scheduler and workers: succeed, fail, requeue), so
-- it is right after a crash or a restart by construction; it starts from one count here.

ALTER TABLE tenants ADD COLUMN queued_jobs INTEGER NOT NULL DEFAULT 0;

UPDATE tenants SET queued_jobs = (SELECT count(*) FROM jobs j WHERE j.tenant_id = tenants.id AND j.state IN ('queued', 'scheduled'));

CREATE TRIGGER jobs_queued_insert AFTER INSERT ON jobs WHEN NEW.state IN ('queued', 'scheduled')
BEGIN
    UPDATE tenants SET queued_jobs = queued_jobs + 1 WHERE id = NEW.tenant_id;
END;

CREATE TRIGGER jobs_queued_update AFTER UPDATE OF state, tenant_id ON jobs
WHEN (OLD.state IN ('queued', 'scheduled')) != (NEW.state IN ('queued', 'scheduled')) OR OLD.tenant_id IS NOT NEW.tenant_id
BEGIN
    UPDATE tenants SET queued_jobs = queued_jobs - 1 WHERE id = OLD.tenant_id AND OLD.state IN ('queued', 'scheduled');
    UPDATE tenants SET queued_jobs = queued_jobs + 1 WHERE id = NEW.tenant_id AND NEW.state IN ('queued', 'scheduled');
END;

CREATE TRIGGER jobs_queued_delete AFTER DELETE ON jobs WHEN OLD.state IN ('queued', 'scheduled')
BEGIN
    UPDATE tenants SET queued_jobs = queued_jobs - 1 WHERE id = OLD.tenant_id;
END;
