/* models.c - the model registry (models.h): the models and model_aliases tables.  What it needs of
 * a job (who registers, which jobs serve an alias, a serving job's spec.resolved, a note on it) it
 * asks jobs.c; jobs.c never calls it (bus.c registers a succeeded job's model). */
#include "server/models.h"
#include "common/alloc.h"
#include "common/clock.h"
#include "server/db.h"
#include "server/jobs.h"
#include "spec/serve_spec.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char *dump(const json_t *j)
{
    return j ? json_dumps(j, JSON_COMPACT) : xstrdup("{}");
}

int models_register_as(sqlite3 *db, const char *job_id, const char *owner_id, const json_t *result, char *name_out, size_t name_len,
                       int *version_out)
{
    if (version_out) *version_out = 0;
    if (name_out && name_len) name_out[0] = '\0';
    const json_t *model = json_object_get(result, "model");
    if (!json_is_object(model)) return 0;
    char tenant[64], name[256];
    if (jobs_model_source(db, owner_id, tenant, sizeof(tenant), name, sizeof(name)) != 0) return -1;
    if (!tenant[0]) return 0;
    sqlite3_stmt *st =
        db_stmt(db, "INSERT OR IGNORE INTO models (tenant_id, name, version, job_id, architecture, metrics, artifact, "
                    "created_at, format, signature, description, sha256, size_bytes) VALUES (?1, ?2, (SELECT "
                    "coalesce(max(version), 0) + 1 FROM models WHERE tenant_id = ?1 AND name = ?2), ?3, ?4, ?5, ?6, ?7, "
                    "?8, ?9, ?10, ?11, ?12)");
    if (!st) return -1;
    char *arch = dump(json_object_get(model, "architecture")), *metrics = dump(json_object_get(result, "metrics"));
    const char *artifact = json_string_value(json_object_get(model, "artifact"));
    /* a program's model (workers/exec_program.c): TorchScript, with the signature its register_model declared and
     * the hash and size of the output file it is (result.outputs lists them) */
    const char *format = json_string_value(json_object_get(json_object_get(model, "architecture"), "format"));
    const json_t *sig = json_object_get(model, "signature"), *file = NULL, *f;
    size_t i;
    json_array_foreach(json_object_get(json_object_get(result, "outputs"), "files"), i,
                       f) if (json_is_string(json_object_get(model, "output")) &&
                              !strcmp(json_string_value(json_object_get(f, "path")),
                                      json_string_value(json_object_get(model, "output")))) file = f;
    char *sig_text = sig ? json_dumps(sig, JSON_COMPACT) : NULL;
    format = format && !strcmp(format, "torchscript") ? "torchscript" : "gantry";
    sqlite3_bind_text(st, 8, format, -1, SQLITE_STATIC);
    if (sig_text)
        sqlite3_bind_text(st, 9, sig_text, -1, SQLITE_STATIC);
    else
        sqlite3_bind_null(st, 9);
    sqlite3_bind_text(st, 10, json_string_value(json_object_get(model, "description")) ?: "", -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 11, json_string_value(json_object_get(file, "sha256")) ?: "", -1, SQLITE_STATIC);
    sqlite3_bind_int64(st, 12, json_integer_value(json_object_get(file, "bytes")));
    sqlite3_bind_text(st, 1, tenant, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 2, name, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 3, job_id, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 4, arch, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 5, metrics, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 6, artifact ? artifact : "", -1, SQLITE_STATIC);
    sqlite3_bind_int64(st, 7, clock_now_ms());
    int rc = db_step(st) == SQLITE_DONE ? 0 : -1;
    db_release(st);
    free(arch);
    free(metrics);
    free(sig_text);
    if (rc == 0 && (name_out || version_out)) { /* the version job_id has (registered now or by a replayed event) */
        st = db_stmt(db, "SELECT name, version FROM models WHERE job_id = ?");
        if (!st) return -1;
        sqlite3_bind_text(st, 1, job_id, -1, SQLITE_STATIC);
        if (db_step(st) == SQLITE_ROW) {
            if (name_out && name_len) snprintf(name_out, name_len, "%s", (const char *)sqlite3_column_text(st, 0));
            if (version_out) *version_out = sqlite3_column_int(st, 1);
        }
        db_release(st);
    }
    return rc;
}

int models_register(sqlite3 *db, const char *job_id, const json_t *result)
{
    return models_register_as(db, job_id, job_id, result, NULL, 0, NULL);
}

const char *models_public_artifact(const char *artifact)
{
    if (!artifact) return NULL;
    const char *slash = strrchr(artifact, '/');
    return slash ? slash + 1 : artifact;
}

/* obj.key, when a string, as models_public_artifact has it */
static void publish_artifact(json_t *obj, const char *key)
{
    const char *artifact = json_string_value(json_object_get(obj, key));
    if (artifact && models_public_artifact(artifact) != artifact)
        json_object_set_new(obj, key, json_string(models_public_artifact(artifact)));
}

void models_public_job(json_t *job)
{
    publish_artifact(json_object_get(json_object_get(job, "spec"), "resolved"), "artifact");
    publish_artifact(json_object_get(json_object_get(job, "result"), "model"), "artifact");
    json_object_del(json_object_get(json_object_get(job, "result"), "outputs"), "dir"); /* a program job's (server/outputs.h) */
}

static json_t *iso(int64_t ms)
{
    char buf[32];
    clock_iso8601(ms, buf, sizeof(buf));
    return json_string(buf);
}

json_t *models_list_json(sqlite3 *db, const char *tenant_id)
{
    sqlite3_stmt *st = db_stmt(db, "SELECT name, max(version), count(*), max(created_at) FROM models WHERE tenant_id = "
                                   "? GROUP BY name ORDER BY name");
    if (!st) return NULL;
    sqlite3_bind_text(st, 1, tenant_id, -1, SQLITE_STATIC);
    json_t *list = json_array();
    while (db_step(st) == SQLITE_ROW)
        json_array_append_new(list,
                              json_pack("{s:s, s:I, s:I, s:o}", "name", (const char *)sqlite3_column_text(st, 0), "latest_version",
                                        (json_int_t)sqlite3_column_int64(st, 1), "versions",
                                        (json_int_t)sqlite3_column_int64(st, 2), "updated_at", iso(sqlite3_column_int64(st, 3))));
    db_release(st);
    return json_pack("{s:o}", "models", list);
}

static json_t *parsed(sqlite3_stmt *st, int col)
{
    json_t *j = json_loads((const char *)sqlite3_column_text(st, col), 0, NULL);
    return j ? j : json_object();
}

static json_t *parsed_or_null(sqlite3_stmt *st, int col)
{
    return sqlite3_column_type(st, col) == SQLITE_NULL ? json_null() : parsed(st, col);
}

static json_t *text_or_null(sqlite3_stmt *st, int col)
{
    return sqlite3_column_type(st, col) == SQLITE_NULL ? json_null() : json_string((const char *)sqlite3_column_text(st, col));
}

/* {alias: version} of (tenant, name) */
static json_t *aliases_json(sqlite3 *db, const char *tenant_id, const char *name)
{
    json_t *out = json_object();
    sqlite3_stmt *st = db_stmt(db, "SELECT alias, version FROM model_aliases WHERE tenant_id = ? AND name = ? ORDER BY alias");
    if (!st) return out;
    sqlite3_bind_text(st, 1, tenant_id, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 2, name, -1, SQLITE_STATIC);
    while (db_step(st) == SQLITE_ROW)
        json_object_set_new(out, (const char *)sqlite3_column_text(st, 0), json_integer(sqlite3_column_int64(st, 1)));
    db_release(st);
    return out;
}

json_t *models_get_json(sqlite3 *db, const char *tenant_id, const char *name)
{
    sqlite3_stmt *st = db_stmt(db, "SELECT version, job_id, architecture, metrics, artifact, created_at, format, sha256, "
                                   "size_bytes, signature, description FROM models WHERE tenant_id = ? AND name = ? "
                                   "ORDER BY version DESC");
    if (!st) return NULL;
    sqlite3_bind_text(st, 1, tenant_id, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 2, name, -1, SQLITE_STATIC);
    json_t *versions = json_array();
    while (db_step(st) == SQLITE_ROW)
        json_array_append_new(versions,
                              json_pack("{s:I, s:s, s:o, s:o, s:o, s:s, s:o, s:s, s:I, s:o, s:s}", "version",
                                        (json_int_t)sqlite3_column_int64(st, 0), "format", (const char *)sqlite3_column_text(st, 6),
                                        "job_id", text_or_null(st, 1), "architecture", parsed(st, 2), "metrics", parsed(st, 3),
                                        "artifact", models_public_artifact((const char *)sqlite3_column_text(st, 4)), "created_at",
                                        iso(sqlite3_column_int64(st, 5)), "sha256", (const char *)sqlite3_column_text(st, 7),
                                        "size_bytes", (json_int_t)sqlite3_column_int64(st, 8), "signature", parsed_or_null(st, 9),
                                        "description", (const char *)sqlite3_column_text(st, 10)));
    db_release(st);
    if (json_array_size(versions) == 0) {
        json_decref(versions);
        return NULL;
    }
    return json_pack("{s:s, s:o, s:o}", "name", name, "aliases", aliases_json(db, tenant_id, name), "versions", versions);
}

/* the version an alias names: > 0, 0 when it is not set, -1 on a database error */
static int alias_version(sqlite3 *db, const char *tenant_id, const char *name, const char *alias)
{
    sqlite3_stmt *st = db_stmt(db, "SELECT version FROM model_aliases WHERE tenant_id = ? AND name = ? AND alias = ?");
    if (!st) return -1;
    sqlite3_bind_text(st, 1, tenant_id, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 2, name, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 3, alias, -1, SQLITE_STATIC);
    int v = db_step(st) == SQLITE_ROW ? sqlite3_column_int(st, 0) : 0;
    db_release(st);
    return v;
}

int models_resolve(sqlite3 *db, const char *tenant_id, const char *ref, int version, json_t **resolved)
{
    *resolved = NULL;
    char name[256], alias[SERVE_ALIAS_MAX + 1];
    int at_version;
    if (serve_model_ref(ref, name, sizeof(name), alias, sizeof(alias), &at_version) != 0) return MODELS_UNKNOWN;
    if (at_version) version = at_version;
    if (alias[0]) {
        version = alias_version(db, tenant_id, name, alias);
        if (version <= 0) return version < 0 ? -1 : MODELS_NO_ALIAS;
    }
    sqlite3_stmt *st = db_stmt(db, version > 0 ? "SELECT version, architecture, artifact, format, signature, sha256 FROM models "
                                                 "WHERE tenant_id = ? AND name = ? AND version = ?"
                                               : "SELECT version, architecture, artifact, format, signature, sha256 FROM models "
                                                 "WHERE tenant_id = ? AND name = ? ORDER BY version DESC LIMIT 1");
    if (!st) return -1;
    sqlite3_bind_text(st, 1, tenant_id, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 2, name, -1, SQLITE_STATIC);
    if (version > 0) sqlite3_bind_int(st, 3, version);
    int rc = MODELS_UNKNOWN;
    if (db_step(st) == SQLITE_ROW && sqlite3_column_bytes(st, 2) > 0) {
        json_t *r = json_pack("{s:s, s:I, s:s, s:s}", "name", name, "version", (json_int_t)sqlite3_column_int64(st, 0), "artifact",
                              (const char *)sqlite3_column_text(st, 2), "format", (const char *)sqlite3_column_text(st, 3));
        if (alias[0]) json_object_set_new(r, "alias", json_string(alias));
        if (!strcmp((const char *)sqlite3_column_text(st, 3), "torchscript") && sqlite3_column_type(st, 4) == SQLITE_NULL) {
            json_decref(r); /* a program's model registered without register_model.metadata */
            db_release(st);
            return MODELS_NO_SIGNATURE;
        }
        if (!strcmp((const char *)sqlite3_column_text(st, 3), "torchscript")) {
            json_object_set_new(r, "signature", parsed_or_null(st, 4));
            json_object_set_new(r, "sha256", json_string((const char *)sqlite3_column_text(st, 5)));
        } else {
            json_t *arch = parsed(st, 1), *input = json_object_get(arch, "input");
            json_object_set(r, "input", input ? input : json_null());
            json_decref(arch);
        }
        *resolved = r;
        rc = 0;
    }
    db_release(st);
    return rc;
}

int models_add_upload(sqlite3 *db, const model_upload *u, int *version)
{
    sqlite3_stmt *st =
        db_stmt(db, "INSERT INTO models (tenant_id, name, version, job_id, format, metrics, artifact, sha256, size_bytes, "
                    "signature, description, created_at) VALUES (?1, ?2, (SELECT coalesce(max(version), 0) + 1 FROM models "
                    "WHERE tenant_id = ?1 AND name = ?2), NULL, 'torchscript', ?3, ?4, ?5, ?6, ?7, ?8, ?9) RETURNING version");
    if (!st) return -1;
    char *metrics = dump(u->metrics), *sig = dump(u->signature);
    sqlite3_bind_text(st, 1, u->tenant_id, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 2, u->name, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 3, metrics, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 4, u->artifact, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 5, u->sha256, -1, SQLITE_STATIC);
    sqlite3_bind_int64(st, 6, u->size_bytes);
    sqlite3_bind_text(st, 7, sig, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 8, u->description ? u->description : "", -1, SQLITE_STATIC);
    sqlite3_bind_int64(st, 9, clock_now_ms());
    int rc = -1;
    if (db_step(st) == SQLITE_ROW) {
        *version = sqlite3_column_int(st, 0);
        rc = 0;
    }
    db_release(st);
    free(metrics);
    free(sig);
    return rc;
}

/* the unfinished serving jobs of (tenant, name@alias): fn(arg, id, spec) for each; -1 on a database error */
static int each_alias_job(sqlite3 *db, const char *tenant_id, const char *name, const char *alias,
                          int (*fn)(sqlite3 *db, void *arg, const char *id), void *arg)
{
    json_t *ids = jobs_serving_alias(db, tenant_id, name, alias); /* collected first: fn writes to jobs */
    if (!ids) return -1;
    size_t i;
    json_t *id;
    json_array_foreach(ids, i, id) if (fn(db, arg, json_string_value(id)) != 0)
    {
        json_decref(ids);
        return -1;
    }
    json_decref(ids);
    return 0;
}

typedef struct {
    const char *tenant_id, *name, *alias;
    int version, previous;
    json_t *rolled;
} roll_ctx;

/* one serving job follows the alias: spec.resolved rewritten, an event */
static int roll_job(sqlite3 *db, void *arg, const char *id)
{
    roll_ctx *r = arg;
    char ref[400];
    snprintf(ref, sizeof(ref), "%s@%s", r->name, r->alias);
    json_t *resolved = NULL;
    if (models_resolve(db, r->tenant_id, ref, 0, &resolved) != 0) return -1;
    int rc = jobs_set_resolved(db, id, resolved);
    char why[600];
    snprintf(why, sizeof(why), "model %s@%s moved from version %d to %d: the replicas load version %d and switch to it", r->name,
             r->alias, r->previous, r->version, r->version);
    if (rc == 0) rc = jobs_note(db, id, "server", why);
    if (rc == 0)
        json_array_append_new(r->rolled, json_pack("{s:s, s:o}", "job_id", id, "resolved", resolved));
    else
        json_decref(resolved);
    return rc;
}

/* the first unfinished job serving name@alias (each_alias_job's fn): its id kept, and a stop */
static int first_job(sqlite3 *db, void *arg, const char *id)
{
    (void)db;
    char *out = arg;
    if (!out[0]) snprintf(out, 48, "%s", id);
    return 0;
}

int models_alias_set(sqlite3 *db, const char *tenant_id, const char *name, const char *alias, int version, int *previous,
                     json_t **rolled)
{
    *rolled = NULL;
    sqlite3_stmt *st = db_stmt(db, "SELECT 1 FROM models WHERE tenant_id = ? AND name = ? AND version = ?");
    if (!st) return -1;
    sqlite3_bind_text(st, 1, tenant_id, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 2, name, -1, SQLITE_STATIC);
    sqlite3_bind_int(st, 3, version);
    int found = db_step(st);
    db_release(st);
    if (found != SQLITE_ROW) return found == SQLITE_DONE ? MODELS_UNKNOWN : -1;
    *previous = alias_version(db, tenant_id, name, alias);
    if (*previous < 0) return -1;
    char ref[400], job[48] = "";
    snprintf(ref, sizeof(ref), "%s@%d", name, version);
    json_t *probe = NULL;
    int servable = models_resolve(db, tenant_id, ref, 0, &probe);
    json_decref(probe);
    if (servable < 0) return -1;
    if (servable == MODELS_NO_SIGNATURE) { /* a job on the alias could not serve it */
        if (each_alias_job(db, tenant_id, name, alias, first_job, job) != 0) return -1;
        if (job[0]) return MODELS_NO_SIGNATURE;
    }
    st = db_stmt(db, "INSERT INTO model_aliases (tenant_id, name, alias, version, updated_at) VALUES (?, ?, ?, ?, ?) "
                     "ON CONFLICT (tenant_id, name, alias) DO UPDATE SET version = excluded.version, updated_at = "
                     "excluded.updated_at");
    if (!st) return -1;
    sqlite3_bind_text(st, 1, tenant_id, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 2, name, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 3, alias, -1, SQLITE_STATIC);
    sqlite3_bind_int(st, 4, version);
    sqlite3_bind_int64(st, 5, clock_now_ms());
    int rc = db_step(st) == SQLITE_DONE ? 0 : -1;
    db_release(st);
    if (rc != 0) return -1;
    roll_ctx r = {tenant_id, name, alias, version, *previous, json_array()};
    if (*previous != version && each_alias_job(db, tenant_id, name, alias, roll_job, &r) != 0) {
        json_decref(r.rolled);
        return -1;
    }
    *rolled = r.rolled;
    return 0;
}

int models_alias_delete(sqlite3 *db, const char *tenant_id, const char *name, const char *alias, char *job_id)
{
    job_id[0] = '\0';
    if (each_alias_job(db, tenant_id, name, alias, first_job, job_id) != 0) return -1;
    if (job_id[0]) return MODELS_IN_USE;
    sqlite3_stmt *st = db_stmt(db, "DELETE FROM model_aliases WHERE tenant_id = ? AND name = ? AND alias = ?");
    if (!st) return -1;
    sqlite3_bind_text(st, 1, tenant_id, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 2, name, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 3, alias, -1, SQLITE_STATIC);
    int rc = db_step(st) == SQLITE_DONE ? (sqlite3_changes(db) ? 0 : MODELS_UNKNOWN) : -1;
    db_release(st);
    return rc;
}
