#include "server/models.h"
#include "common/alloc.h"
#include "common/jobtypes.h"
#include "common/clock.h"
#include "server/db.h"

#include <stdlib.h>
#include <string.h>

static char *dump(const json_t *j)
{
    return j ? json_dumps(j, JSON_COMPACT) : xstrdup("{}");
}

int models_register(sqlite3 *db, const char *job_id, const json_t *result)
{
    const json_t *model = json_object_get(result, "model");
    if (!json_is_object(model)) return 0;
    sqlite3_stmt *st = db_stmt(db, "SELECT tenant_id, coalesce(json_extract(spec, '$.model_name'), name), type FROM jobs "
                                   "WHERE id = ?");
    if (!st) return -1;
    sqlite3_bind_text(st, 1, job_id, -1, SQLITE_STATIC);
    char tenant[64] = "", name[256] = "";
    if (db_step(st) == SQLITE_ROW && (job_type_traits((const char *)sqlite3_column_text(st, 2)) & JT_REGISTERS_MODEL)) {
        snprintf(tenant, sizeof(tenant), "%s", (const char *)sqlite3_column_text(st, 0));
        snprintf(name, sizeof(name), "%s", (const char *)sqlite3_column_text(st, 1));
    }
    db_release(st);
    if (!tenant[0]) return 0;
    st = db_stmt(db, "INSERT OR IGNORE INTO models (tenant_id, name, version, job_id, architecture, metrics, artifact, "
                     "created_at) VALUES (?1, ?2, (SELECT coalesce(max(version), 0) + 1 FROM models WHERE tenant_id "
                     "= ?1 AND name = ?2), ?3, ?4, ?5, ?6, ?7)");
    if (!st) return -1;
    char *arch = dump(json_object_get(model, "architecture")), *metrics = dump(json_object_get(result, "metrics"));
    const char *artifact = json_string_value(json_object_get(model, "artifact"));
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
    return rc;
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

json_t *models_get_json(sqlite3 *db, const char *tenant_id, const char *name)
{
    sqlite3_stmt *st = db_stmt(db, "SELECT version, job_id, architecture, metrics, artifact, created_at FROM models "
                                   "WHERE tenant_id = ? AND name = ? ORDER BY version DESC");
    if (!st) return NULL;
    sqlite3_bind_text(st, 1, tenant_id, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 2, name, -1, SQLITE_STATIC);
    json_t *versions = json_array();
    while (db_step(st) == SQLITE_ROW)
        json_array_append_new(
            versions, json_pack("{s:I, s:s, s:o, s:o, s:s, s:o}", "version", (json_int_t)sqlite3_column_int64(st, 0), "job_id",
                                (const char *)sqlite3_column_text(st, 1), "architecture", parsed(st, 2), "metrics", parsed(st, 3),
                                "artifact", models_public_artifact((const char *)sqlite3_column_text(st, 4)), "created_at",
                                iso(sqlite3_column_int64(st, 5))));
    db_release(st);
    if (json_array_size(versions) == 0) {
        json_decref(versions);
        return NULL;
    }
    return json_pack("{s:s, s:o}", "name", name, "versions", versions);
}

int models_resolve(sqlite3 *db, const char *tenant_id, const char *name, int version, json_t **resolved)
{
    *resolved = NULL;
    sqlite3_stmt *st = db_stmt(db, version > 0 ? "SELECT version, architecture, artifact FROM models WHERE tenant_id = ? AND "
                                                 "name = ? AND version = ?"
                                               : "SELECT version, architecture, artifact FROM models WHERE tenant_id = ? AND "
                                                 "name = ? ORDER BY version DESC LIMIT 1");
    if (!st) return -1;
    sqlite3_bind_text(st, 1, tenant_id, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 2, name, -1, SQLITE_STATIC);
    if (version > 0) sqlite3_bind_int(st, 3, version);
    int rc = 1;
    if (db_step(st) == SQLITE_ROW && sqlite3_column_bytes(st, 2) > 0) {
        json_t *arch = parsed(st, 1);
        json_t *input = json_object_get(arch, "input");
        *resolved = json_pack("{s:I, s:s, s:O}", "version", (json_int_t)sqlite3_column_int64(st, 0), "artifact",
                              (const char *)sqlite3_column_text(st, 2), "input", input ? input : json_null());
        json_decref(arch);
        rc = *resolved ? 0 : -1;
    }
    db_release(st);
    return rc;
}
