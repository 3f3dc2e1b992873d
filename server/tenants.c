/* tenants.c - the tenants table (tenants.h): every statement that reads or writes a tenant. */
#include "server/tenants.h"
#include "common/clock.h"
#include "server/db.h"
#include "server/jobs.h"

#include <stdio.h>

static void bind_quota(sqlite3_stmt *st, int i, long long v)
{
    if (v < 0)
        sqlite3_bind_null(st, i);
    else
        sqlite3_bind_int64(st, i, v);
}

int tenants_create(sqlite3 *db, const char *id, const char *name, const tenant_settings *s)
{
    sqlite3_stmt *st = db_stmt(db, "INSERT OR IGNORE INTO tenants (id, name, created_at, weight, max_slots, max_queued, "
                                   "roots) VALUES (?,?,?,?,?,?,coalesce(?7, '[]'))");
    if (!st) return -1;
    sqlite3_bind_text(st, 1, id, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 2, name, -1, SQLITE_STATIC);
    sqlite3_bind_int64(st, 3, clock_now_ms());
    sqlite3_bind_double(st, 4, s->weight);
    bind_quota(st, 5, s->max_slots);
    bind_quota(st, 6, s->max_queued);
    if (s->roots) sqlite3_bind_text(st, 7, s->roots, -1, SQLITE_STATIC);
    int rc = db_step(st) == SQLITE_DONE ? 0 : -1;
    db_release(st);
    if (rc != 0) return -1;
    if (sqlite3_changes(db) != 1) return 1;
    return tenants_set_limits(db, id, &s->limits);
}

int tenants_update(sqlite3 *db, const char *id, const tenant_settings *s)
{
    sqlite3_stmt *st = db_stmt(db, "UPDATE tenants SET weight = CASE WHEN ?2 THEN ?3 ELSE weight END, "
                                   "max_slots = CASE WHEN ?4 THEN ?5 ELSE max_slots END, "
                                   "max_queued = CASE WHEN ?6 THEN ?7 ELSE max_queued END, "
                                   "roots = coalesce(?8, roots) WHERE id = ?1");
    if (!st) return -1;
    sqlite3_bind_text(st, 1, id, -1, SQLITE_STATIC);
    sqlite3_bind_int(st, 2, s->has_weight);
    sqlite3_bind_double(st, 3, s->weight);
    sqlite3_bind_int(st, 4, s->has_max_slots);
    bind_quota(st, 5, s->max_slots);
    sqlite3_bind_int(st, 6, s->has_max_queued);
    bind_quota(st, 7, s->max_queued);
    if (s->roots) sqlite3_bind_text(st, 8, s->roots, -1, SQLITE_STATIC);
    int rc = db_step(st) == SQLITE_DONE ? 0 : -1;
    db_release(st);
    if (rc != 0) return -1;
    if (sqlite3_changes(db) != 1) return 2;
    return tenants_set_limits(db, id, &s->limits);
}

bool tenants_exists(sqlite3 *db, const char *id)
{
    sqlite3_stmt *st = db_stmt(db, "SELECT 1 FROM tenants WHERE id = ?");
    if (!st) return false;
    sqlite3_bind_text(st, 1, id, -1, SQLITE_STATIC);
    bool exists = db_step(st) == SQLITE_ROW;
    db_release(st);
    return exists;
}

json_t *tenants_json(sqlite3 *db, const char *id)
{
    sqlite3_stmt *st = db_stmt(db, "SELECT t.id, t.name, t.created_at, t.weight, t.max_slots, t.max_queued, "
                                   "t.roots, t.max_runtime_s, "
                                   "t.max_epochs, t.max_steps, t.max_memory_bytes FROM tenants t WHERE "
                                   "?1 IS NULL OR t.id = ?1 ORDER BY t.created_at, t.name");
    if (!st) return NULL;
    if (id) sqlite3_bind_text(st, 1, id, -1, SQLITE_TRANSIENT);
    json_t *list = json_array();
    while (db_step(st) == SQLITE_ROW) {
        char iso[32];
        clock_iso8601(sqlite3_column_int64(st, 2), iso, sizeof(iso));
        json_t *t = json_pack("{s:s, s:s, s:s, s:f, s:I}", "id", sqlite3_column_text(st, 0), "name", sqlite3_column_text(st, 1),
                              "created_at", iso, "weight", sqlite3_column_double(st, 3), "jobs",
                              (json_int_t)jobs_count_of_tenant(db, (const char *)sqlite3_column_text(st, 0)));
        for (int col = 4; col <= 5; col++)
            json_object_set_new(t, col == 4 ? "max_slots" : "max_queued",
                                sqlite3_column_type(st, col) == SQLITE_NULL ? json_null()
                                                                            : json_integer(sqlite3_column_int64(st, col)));
        json_t *roots = json_loads((const char *)sqlite3_column_text(st, 6), 0, NULL);
        json_object_set_new(t, "roots", roots ? roots : json_array());
        tenant_limits lim;
        for (int i = 0; i < LIMIT_COUNT; i++)
            lim.v[i] = sqlite3_column_type(st, 7 + i) == SQLITE_NULL ? -1 : (long long)sqlite3_column_int64(st, 7 + i);
        limits_to_json(&lim, t);
        json_array_append_new(list, t);
    }
    db_release(st);
    if (!id) return list;
    json_t *one = json_incref(json_array_get(list, 0));
    json_decref(list);
    return one;
}

json_t *tenants_roots(sqlite3 *db, const char *id)
{
    sqlite3_stmt *st = db_stmt(db, "SELECT roots FROM tenants WHERE id = ?");
    json_t *roots = NULL;
    if (st) {
        sqlite3_bind_text(st, 1, id, -1, SQLITE_STATIC);
        if (db_step(st) == SQLITE_ROW) roots = json_loads((const char *)sqlite3_column_text(st, 0), 0, NULL);
        db_release(st);
    }
    return roots ? roots : json_array();
}

int tenants_set_limits(sqlite3 *db, const char *tenant_id, const limits_patch *p)
{
    sqlite3_stmt *st = db_stmt(db, "UPDATE tenants SET max_runtime_s = CASE WHEN ?2 THEN ?3 ELSE max_runtime_s END, "
                                   "max_epochs = CASE WHEN ?4 THEN ?5 ELSE max_epochs END, "
                                   "max_steps = CASE WHEN ?6 THEN ?7 ELSE max_steps END, "
                                   "max_memory_bytes = CASE WHEN ?8 THEN ?9 ELSE max_memory_bytes END WHERE id = ?1");
    if (!st) return -1;
    sqlite3_bind_text(st, 1, tenant_id, -1, SQLITE_STATIC);
    for (int i = 0; i < LIMIT_COUNT; i++) {
        sqlite3_bind_int(st, 2 + 2 * i, p->set[i]);
        if (p->v[i] < 0)
            sqlite3_bind_null(st, 3 + 2 * i);
        else
            sqlite3_bind_int64(st, 3 + 2 * i, p->v[i]);
    }
    int rc = db_step(st) == SQLITE_DONE ? 0 : -1;
    db_release(st);
    return rc;
}

int tenants_limits(sqlite3 *db, const char *tenant_id, tenant_limits *out)
{
    for (int i = 0; i < LIMIT_COUNT; i++)
        out->v[i] = -1;
    sqlite3_stmt *st = db_stmt(db, "SELECT max_runtime_s, max_epochs, max_steps, max_memory_bytes FROM tenants WHERE id = ?");
    if (!st) return -1;
    sqlite3_bind_text(st, 1, tenant_id, -1, SQLITE_STATIC);
    int rc = -1;
    if (db_step(st) == SQLITE_ROW) {
        for (int i = 0; i < LIMIT_COUNT; i++)
            out->v[i] = sqlite3_column_type(st, i) == SQLITE_NULL ? -1 : (long long)sqlite3_column_int64(st, i);
        rc = 0;
    }
    db_release(st);
    return rc;
}

void tenants_each_share(sqlite3 *db, void (*fn)(void *arg, const char *id, double weight, long long max_slots), void *arg)
{
    sqlite3_stmt *st = db_stmt(db, "SELECT id, weight, max_slots FROM tenants");
    if (!st) return;
    while (db_step(st) == SQLITE_ROW)
        fn(arg, (const char *)sqlite3_column_text(st, 0), sqlite3_column_double(st, 1),
           sqlite3_column_type(st, 2) == SQLITE_NULL ? -1 : (long long)sqlite3_column_int64(st, 2));
    db_release(st);
}
