/* limits.c - per-tenant job limits: parsing, storing, reading, the submission check (epochs, steps,
 * and the memory a program's ranks ask for: what each type's spec module says it asks, job_cost). */
#include "server/limits.h"
#include "server/db.h"
#include "server/spec.h"

#include <stdio.h>
#include <string.h>

const char *const limit_names[LIMIT_COUNT] = {"max_runtime_s", "max_epochs", "max_steps", "max_memory_bytes"};

/* the accepted range of each limit (the upper bounds: ten years, the spec's own maxima, 1 PiB) */
static const long long limit_max[LIMIT_COUNT] = {315360000LL, 100000LL, 1000000000LL, 1LL << 50};
static const char *const limit_unit[LIMIT_COUNT] = {"seconds of running time per job", "epochs per job", "steps per job",
                                                    "bytes a worker may grow by for one job"};

int limits_parse(const json_t *body, limits_patch *p, char *field, size_t fl, char *msg, size_t ml)
{
    memset(p, 0, sizeof(*p));
    for (int i = 0; i < LIMIT_COUNT; i++) {
        json_t *v = json_object_get(body, limit_names[i]);
        if (!v) continue;
        if (!json_is_null(v) && (!json_is_integer(v) || json_integer_value(v) < 1 || json_integer_value(v) > limit_max[i])) {
            snprintf(field, fl, "%s", limit_names[i]);
            snprintf(msg, ml, "must be an integer from 1 to %lld (%s), or null for no limit", limit_max[i], limit_unit[i]);
            return -1;
        }
        p->set[i] = true;
        p->v[i] = json_is_null(v) ? -1 : (long long)json_integer_value(v);
    }
    return 0;
}

int limits_apply(sqlite3 *db, const char *tenant_id, const limits_patch *p)
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

int limits_get(sqlite3 *db, const char *tenant_id, tenant_limits *out)
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

void limits_to_json(const tenant_limits *l, json_t *obj)
{
    for (int i = 0; i < LIMIT_COUNT; i++)
        json_object_set_new(obj, limit_names[i], l->v[i] < 0 ? json_null() : json_integer((json_int_t)l->v[i]));
}

static int over(char *field, size_t fl, char *msg, size_t ml, const char *f, long long asked, long long limit, limit_kind k,
                const char *what)
{
    snprintf(field, fl, "%s", f);
    snprintf(msg, ml, "%s %lld is over your tenant's limit of %lld %s (%s; an admin can change it with PATCH /v1/tenants/{id})",
             what, asked, limit, limit_unit[k], limit_names[k]);
    return -1;
}

/* one figure the spec asks for against its limit (asked < 0 or limit < 0: nothing to check) */
static int check_item(const job_cost_item *c, long long limit, limit_kind k, char *field, size_t fl, char *msg, size_t ml)
{
    if (c->asked < 0 || limit < 0 || c->asked <= limit) return 0;
    return over(field, fl, msg, ml, c->field, c->asked, limit, k, c->what);
}

int limits_check_spec(const tenant_limits *l, const char *type, const json_t *spec, char *field, size_t fl, char *msg, size_t ml)
{
    const job_spec *js = spec_module(type); /* what the type's spec asks for: its spec module (common/jobtypes.h) */
    if (!js || !js->cost) return 0;
    job_cost c = {.epochs = {-1, NULL, NULL}, .steps = {-1, NULL, NULL}, .memory = {-1, NULL, NULL}};
    js->cost(spec, &c);
    if (check_item(&c.epochs, l->v[LIMIT_EPOCHS], LIMIT_EPOCHS, field, fl, msg, ml)) return -1;
    if (check_item(&c.steps, l->v[LIMIT_STEPS], LIMIT_STEPS, field, fl, msg, ml)) return -1;
    return check_item(&c.memory, l->v[LIMIT_MEMORY], LIMIT_MEMORY, field, fl, msg, ml);
}

void limits_to_task(const tenant_limits *l, task_msg *t)
{
    t->max_runtime_s = l->v[LIMIT_RUNTIME] > 0 ? l->v[LIMIT_RUNTIME] : 0;
    t->max_memory_bytes = l->v[LIMIT_MEMORY] > 0 ? l->v[LIMIT_MEMORY] : 0;
}
