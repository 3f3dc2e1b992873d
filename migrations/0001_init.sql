-- 0001: tenants, tokens, jobs, job events, idempotency keys, audit log.
-- Times are milliseconds since the Unix epoch (UTC).

CREATE TABLE tenants (
    id          TEXT PRIMARY KEY,
    name        TEXT NOT NULL UNIQUE,
    created_at  INTEGER NOT NULL,
    weight      REAL NOT NULL DEFAULT 1.0,
    max_slots   INTEGER,             -- NULL: unlimited (quotas arrive with the control-plane issue)
    max_queued  INTEGER
);

-- The operators' own tenant; the bootstrap admin token belongs to it.  created_at: set by 0008 (when this ran).
INSERT INTO tenants (id, name, created_at) VALUES ('t_system', 'system', 0);

CREATE TABLE tokens (
    id          TEXT PRIMARY KEY,
    tenant_id   TEXT NOT NULL REFERENCES tenants (id),
    role        TEXT NOT NULL CHECK (role IN ('admin', 'member', 'viewer')),
    name        TEXT NOT NULL DEFAULT '',
    hash        BLOB NOT NULL UNIQUE,  -- SHA-256 of the secret; the secret itself is never stored
    created_at  INTEGER NOT NULL,
    revoked_at  INTEGER
);

CREATE TABLE jobs (
    seq         INTEGER PRIMARY KEY AUTOINCREMENT,  -- keyset pagination key (newest first)
    id          TEXT NOT NULL UNIQUE,
    tenant_id   TEXT NOT NULL REFERENCES tenants (id),
    type        TEXT NOT NULL,
    name        TEXT NOT NULL,
    priority    INTEGER NOT NULL,
    slots       INTEGER NOT NULL DEFAULT 1,
    state       TEXT NOT NULL,
    spec        TEXT NOT NULL,
    result      TEXT,
    error       TEXT,
    progress    REAL,
    worker      TEXT,
    attempts    INTEGER NOT NULL DEFAULT 0,
    published   INTEGER NOT NULL DEFAULT 0,         -- outbox flag: 1 once XADDed to gantry:jobs
    created_at  INTEGER NOT NULL,
    updated_at  INTEGER NOT NULL,
    started_at  INTEGER,
    finished_at INTEGER
);
CREATE INDEX jobs_by_tenant ON jobs (tenant_id, seq);
CREATE INDEX jobs_unpublished ON jobs (seq) WHERE published = 0;

CREATE TABLE job_events (
    seq         INTEGER PRIMARY KEY AUTOINCREMENT,
    id          TEXT NOT NULL UNIQUE,               -- event id: a replayed stream entry is stored once
    job_id      TEXT NOT NULL,
    ts          INTEGER NOT NULL,
    state       TEXT NOT NULL DEFAULT '',
    reason      TEXT NOT NULL DEFAULT '',
    source      TEXT NOT NULL DEFAULT '',
    progress    REAL
);
CREATE INDEX job_events_by_job ON job_events (job_id, seq);

CREATE TABLE idempotency_keys (
    tenant_id   TEXT NOT NULL,
    key         TEXT NOT NULL,
    job_id      TEXT NOT NULL,
    created_at  INTEGER NOT NULL,
    PRIMARY KEY (tenant_id, key)
);

CREATE TABLE audit_log (
    seq         INTEGER PRIMARY KEY AUTOINCREMENT,
    ts          INTEGER NOT NULL,
    token_id    TEXT NOT NULL,
    action      TEXT NOT NULL,
    detail      TEXT NOT NULL DEFAULT ''
);
