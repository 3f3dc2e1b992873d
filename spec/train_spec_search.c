/* train_spec_search.c - model selection's search in a training spec ("search", workers/train/mop.h describes it):
 * its shape and the expansion into the configurations it trains, each checked as a training spec
 * of its own.  Part of the jansson-only training spec module (spec.h); mop.c trains what
 * mop_expand gives. */
#include "spec/train_spec.h"
#include "common/fielderr.h"

#include "common/rng.h"

#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MOP_MAX_PARAMS 16

/* ---- the search ---- */

/* sets the value at a dotted path of keys and array indices; the parent must exist */
static int set_path(json_t *root, const char *path, json_t *value)
{
    char buf[256];
    if (snprintf(buf, sizeof buf, "%s", path) >= (int)sizeof buf || !*buf) return -1;
    json_t *cur = root;
    char *save = NULL, *seg = strtok_r(buf, ".", &save);
    while (seg) {
        char *next = strtok_r(NULL, ".", &save);
        char *end;
        long idx = strtol(seg, &end, 10);
        bool is_index = *seg && !*end && idx >= 0;
        if (!next) {
            if (json_is_array(cur) && is_index && (size_t)idx < json_array_size(cur))
                return json_array_set(cur, (size_t)idx, value);
            if (json_is_object(cur)) return json_object_set(cur, seg, value);
            return -1;
        }
        cur = json_is_array(cur) && is_index ? json_array_get(cur, (size_t)idx)
              : json_is_object(cur)          ? json_object_get(cur, seg)
                                             : NULL;
        if (!cur) return -1;
        seg = next;
    }
    return -1;
}

/* a value for one parameter of a random search: from a list, or a {min, max[, log]} range */
static json_t *draw(const json_t *dom, rng_state *r)
{
    if (json_is_array(dom)) return json_incref(json_array_get(dom, (size_t)rng_below(r, json_array_size(dom))));
    double lo = json_number_value(json_object_get(dom, "min")), hi = json_number_value(json_object_get(dom, "max"));
    double u = (double)(rng_next(r) >> 11) * (1.0 / 9007199254740992.0);
    if (json_is_true(json_object_get(dom, "log"))) return json_real(exp(log(lo) + u * (log(hi) - log(lo))));
    if (json_is_integer(json_object_get(dom, "min")) && json_is_integer(json_object_get(dom, "max")))
        return json_integer((json_int_t)lo + (json_int_t)rng_below(r, (uint64_t)(hi - lo) + 1));
    return json_real(lo + u * (hi - lo));
}

/* ---- the search's shape (common/schema.h): validation and the API document ---- */

static const char *const search_types[] = {"grid", "random", NULL};
static const sch search_type_s = {SCH_STR, .values = search_types};
static const sch values_s = {SCH_ARRAY, SCH_IN(1, MOP_MAX_CONFIGS), .desc = "the values to try (grid or random)"};
static const sch bound_s = {SCH_NUM, .desc = "a bound of the range"};
static const sch log_s = {SCH_BOOL, .dflt = "false", .desc = "draw uniformly in log space (min > 0)"};
static const sch_member range_m[] = {{"min", &bound_s, 1}, {"max", &bound_s, 1}, {"log", &log_s, 0}, {0}};
static const sch range_s = {SCH_OBJECT, .members = range_m, .desc = "a range to draw from (random search; min <= max)"};
static const sch *const domain_alts[] = {&values_s, &range_s, NULL};
static const sch domain_s = {SCH_ONEOF, .alts = domain_alts,
                             .msg = "must be a list of values or {\"min\", \"max\", \"log\": bool} (min <= max; min > 0 with log)"};
static const sch params_s = {SCH_OBJECT,
                             .flags = SCH_LO | SCH_HI | SCH_OPEN,
                             .lo = 1,
                             .hi = MOP_MAX_PARAMS,
                             .items = &domain_s,
                             .desc = "spec paths (e.g. \"optimizer.lr\") and their domains; not dataset, workers, epochs, "
                                     "steps or search",
                             .msg = "must be an object of 1 to 16 parameters (spec paths)"};
static const sch configurations_s = {SCH_INT, SCH_IN(1, MOP_MAX_CONFIGS), .desc = "how many to draw (a random search: required)"};
static const sch search_seed_s = {SCH_INT, SCH_IN(0, SCH_MAX_SAFE_INT), .dflt = "1", .desc = "draws the random configurations"};
static const sch after_s = {SCH_INT, SCH_MIN(1), .desc = "epochs before the cut"};
static const sch keep_s = {
    SCH_NUM, .flags = SCH_LO | SCH_LO_OPEN | SCH_HI | SCH_HI_OPEN,          .lo = 0,
    .hi = 1, .desc = "the share of configurations kept (by test accuracy)", .msg = "must be a fraction in (0, 1)"};
static const sch_member early_m[] = {{"after_epochs", &after_s, 1}, {"keep", &keep_s, 1}, {0}};
static const sch early_s = {SCH_OBJECT, .members = early_m, .desc = "stop the weaker configurations early"};
static const sch_member search_m[] = {
    {"type", &search_type_s, 1}, {"params", &params_s, 1},    {"configurations", &configurations_s, 0},
    {"seed", &search_seed_s, 0}, {"early_stop", &early_s, 0}, {0}};
const sch mop_search_shape = {SCH_OBJECT, .members = search_m,
                              .desc = "Model selection (Cerebro's model hopping): train every configuration of the "
                                      "search on a fixed number of workers for whole epochs; a grid takes every "
                                      "combination (at most 256)."};

/* beyond the shape: a grid needs lists, a range needs min <= max (and min > 0 in log space) */
static int check_domain(const json_t *dom, bool grid, const char *name, char *field, size_t fl, char *msg, size_t ml)
{
    snprintf(field, fl, "spec.search.params.%s", name);
    if (json_is_array(dom)) return 0;
    if (grid) {
        snprintf(msg, ml, "must be a list of values (a grid search)");
        return -1;
    }
    double lo = json_number_value(json_object_get(dom, "min")), hi = json_number_value(json_object_get(dom, "max"));
    if (!(lo <= hi) || (json_is_true(json_object_get(dom, "log")) && !(lo > 0))) {
        snprintf(msg, ml, "%s", domain_s.msg);
        return -1;
    }
    return 0;
}

int mop_expand(const json_t *spec, json_t **out, char *field, size_t fl, char *msg, size_t ml)
{
    *out = NULL;
    const json_t *search = json_object_get(spec, "search");
    if (sch_check(&mop_search_shape, search, "spec.search", field, fl, msg, ml)) return -1;
    bool grid = !strcmp(json_string_value(json_object_get(search, "type")), "grid");
    const json_t *params = json_object_get(search, "params");
    if (!json_is_integer(json_object_get(spec, "epochs")) || json_object_get(spec, "steps"))
        return field_fail(field, fl, msg, ml, "spec.epochs", "model selection runs whole epochs: give epochs (not steps)");
    if (json_is_object(json_object_get(spec, "workers")))
        return field_fail(field, fl, msg, ml, "spec.workers", "model selection needs a fixed number of workers");
    const char *names[MOP_MAX_PARAMS];
    const json_t *doms[MOP_MAX_PARAMS];
    int np = 0;
    long n = 1;
    const char *k;
    json_t *v;
    json_object_foreach((json_t *)params, k, v)
    {
        static const char *fixed[] = {"dataset", "workers", "epochs", "steps", "search"};
        for (size_t f = 0; f < sizeof fixed / sizeof fixed[0]; f++) {
            size_t fl2 = strlen(fixed[f]);
            if (!strncmp(k, fixed[f], fl2) && (k[fl2] == '\0' || k[fl2] == '.')) {
                snprintf(field, fl, "spec.search.params.%s", k);
                snprintf(msg, ml, "the search may not change %s (every configuration shares the data and the schedule)", fixed[f]);
                return -1;
            }
        }
        if (check_domain(v, grid, k, field, fl, msg, ml)) return -1;
        names[np] = k, doms[np++] = v;
        if (grid) n *= (long)json_array_size(v);
        if (n > MOP_MAX_CONFIGS)
            return field_fail(field, fl, msg, ml, "spec.search.params", "the grid has more than 256 configurations");
    }
    json_t *nc = json_object_get(search, "configurations");
    if (!grid) {
        if (!nc)
            return field_fail(field, fl, msg, ml, "spec.search.configurations", "is required: how many to draw (a random search)");
        n = (long)json_integer_value(nc);
    }
    json_t *base = json_deep_copy(spec), *configs = json_array();
    json_object_del(base, "search");
    rng_state r;
    rng_seed(&r, rng_mix((uint64_t)sch_number(&mop_search_shape, search, "seed", 0), 23, 0));
    for (long i = 0; i < n; i++) {
        json_t *cfg = json_deep_copy(base), *chosen = json_object();
        long rest = i;
        for (int p = np - 1; p >= 0; p--) { /* grid: the last parameter varies fastest */
            json_t *val;
            if (grid) {
                size_t len = json_array_size(doms[p]);
                val = json_incref(json_array_get(doms[p], (size_t)(rest % (long)len)));
                rest /= (long)len;
            } else {
                val = NULL;
            }
            if (val) json_object_set_new(chosen, names[p], val);
        }
        for (int p = 0; !grid && p < np; p++)
            json_object_set_new(chosen, names[p], draw(doms[p], &r));
        int rc = 0;
        for (int p = 0; p < np && rc == 0; p++)
            if (set_path(cfg, names[p], json_object_get(chosen, names[p]))) {
                snprintf(field, fl, "spec.search.params.%s", names[p]);
                snprintf(msg, ml,
                         "names no field of the spec (a dotted path of keys and array indices, e.g. "
                         "\"optimizer.lr\" or \"model.layers.1.units\")");
                rc = -1;
            }
        char f2[160], m2[200];
        if (rc == 0 && train_spec_validate(cfg, f2, sizeof f2, m2, sizeof m2)) {
            char *desc = json_dumps(chosen, JSON_COMPACT | JSON_SORT_KEYS);
            snprintf(field, fl, "spec.search.params");
            snprintf(msg, ml, "configuration %ld %s is invalid: %s: %s", i, desc ? desc : "", f2, m2);
            free(desc);
            rc = -1;
        }
        if (rc) {
            json_decref(cfg), json_decref(chosen), json_decref(base), json_decref(configs);
            return -1;
        }
        json_array_append_new(configs, json_pack("{s:o, s:o}", "params", chosen, "spec", cfg));
    }
    json_decref(base);
    *out = configs;
    return 0;
}
