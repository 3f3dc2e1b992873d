-- 0005: per-tenant job limits (issue 16), set by an admin with PATCH /v1/tenants/{id}.
-- NULL: no limit.  Existing and new tenants get the defaults below (docs/operations.md,
-- "Tenant limits", says why these).
--   max_runtime_s     running time of one job, summed over its generations (not inference)
--   max_epochs        spec.epochs of a training job, checked at submission
--   max_steps         spec.steps of a training job (rounds x local_steps of a federated one)
--   max_memory_bytes  how much a worker's resident memory may grow while it runs one job

ALTER TABLE tenants ADD COLUMN max_runtime_s INTEGER DEFAULT 86400;
ALTER TABLE tenants ADD COLUMN max_epochs INTEGER DEFAULT 1000;
ALTER TABLE tenants ADD COLUMN max_steps INTEGER DEFAULT 10000000;
ALTER TABLE tenants ADD COLUMN max_memory_bytes INTEGER DEFAULT 8589934592;
