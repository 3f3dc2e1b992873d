/* limits.c - per-tenant job limits: parsing, the JSON form, the submission check (epochs, steps,
 * and the memory a program's ranks ask for: what each type's spec module says it asks, job_cost). */
#include "server/limits.h"
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
