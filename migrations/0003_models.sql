-- 0003: the model registry.  A finished training (or federated) job registers its
-- model here; inference jobs serve a (name, version).

CREATE TABLE models (
    seq          INTEGER PRIMARY KEY AUTOINCREMENT,
    tenant_id    TEXT NOT NULL REFERENCES tenants (id),
    name         TEXT NOT NULL,
    version      INTEGER NOT NULL,
    job_id       TEXT NOT NULL UNIQUE,           -- one model per job: a replayed event registers nothing
    architecture TEXT NOT NULL DEFAULT '{}',
    metrics      TEXT NOT NULL DEFAULT '{}',
    artifact     TEXT NOT NULL DEFAULT '',       -- path of the weights on the model store
    created_at   INTEGER NOT NULL,
    UNIQUE (tenant_id, name, version)
);
CREATE INDEX models_by_tenant ON models (tenant_id, name, version);
