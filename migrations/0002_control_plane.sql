-- 0002: what the control plane needs: quota lookups by state, token expiry,
-- idempotency keys bound to the request body, the cluster timeline.

CREATE INDEX jobs_by_tenant_state ON jobs (tenant_id, state);
CREATE INDEX jobs_by_finish ON jobs (finished_at);
CREATE INDEX jobs_by_state ON jobs (state);
ALTER TABLE tokens ADD COLUMN expires_at INTEGER;          -- NULL: never
ALTER TABLE idempotency_keys ADD COLUMN body_sha256 BLOB;  -- same key + other body -> 422
ALTER TABLE jobs ADD COLUMN preemptible INTEGER NOT NULL DEFAULT 0;
-- directories this tenant's job specs may name (JSON array of absolute paths; see common/paths.h)
ALTER TABLE tenants ADD COLUMN roots TEXT NOT NULL DEFAULT '[]';
