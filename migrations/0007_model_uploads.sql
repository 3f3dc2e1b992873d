-- 0007: uploaded models and aliases (issue 21).
-- A version is either registered by a finished job (job_id set, as before) or uploaded by a
-- member (job_id NULL, the file streamed into the server's model store).  Versions are immutable:
-- nothing updates a row of models; an alias names one version and moves.
--   format       'gantry' (workers/train's .model file) or 'torchscript'
--   sha256, size_bytes  of the artifact as stored (uploads; '' / 0 for older rows)
--   signature    the inputs and outputs it declares (workers/serve/signature.h), JSON, or NULL
--   description  the uploader's words
-- SQLite cannot drop NOT NULL from job_id in place: the table is rebuilt, rows and versions kept.

CREATE TABLE models_new (
    seq          INTEGER PRIMARY KEY AUTOINCREMENT,
    tenant_id    TEXT NOT NULL REFERENCES tenants (id),
    name         TEXT NOT NULL,
    version      INTEGER NOT NULL,
    job_id       TEXT UNIQUE,                    -- NULL for an upload; one model per job otherwise
    format       TEXT NOT NULL DEFAULT 'gantry' CHECK (format IN ('gantry', 'torchscript')),
    architecture TEXT NOT NULL DEFAULT '{}',
    metrics      TEXT NOT NULL DEFAULT '{}',
    artifact     TEXT NOT NULL DEFAULT '',       -- path of the file on the model store
    sha256       TEXT NOT NULL DEFAULT '',
    size_bytes   INTEGER NOT NULL DEFAULT 0,
    signature    TEXT,
    description  TEXT NOT NULL DEFAULT '',
    created_at   INTEGER NOT NULL,
    UNIQUE (tenant_id, name, version)
);
INSERT INTO models_new (seq, tenant_id, name, version, job_id, format, architecture, metrics, artifact, created_at)
    SELECT seq, tenant_id, name, version, job_id,
           CASE WHEN json_extract(architecture, '$.format') = 'torchscript' THEN 'torchscript' ELSE 'gantry' END,
           architecture, metrics, artifact, created_at FROM models;
DROP TABLE models;
ALTER TABLE models_new RENAME TO models;
CREATE INDEX models_by_tenant ON models (tenant_id, name, version);

CREATE TABLE model_aliases (
    tenant_id  TEXT NOT NULL REFERENCES tenants (id),
    name       TEXT NOT NULL,
    alias      TEXT NOT NULL,
    version    INTEGER NOT NULL,
    updated_at INTEGER NOT NULL,
    PRIMARY KEY (tenant_id, name, alias),
    FOREIGN KEY (tenant_id, name, version) REFERENCES models (tenant_id, name, version)
);
