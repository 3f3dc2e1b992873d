/* search_spec.c - spec.search of a program training job (search_spec.h): its shape, the rules between
 * its fields and its settings with the defaults the shape documents.  The shape is the one source of
 * the validation, the defaults and the API document's schema. */
#include "spec/search_spec.h"
#include "common/fielderr.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- the shape (common/schema.h) ---- */

static const sch bound_s = {SCH_NUM, .desc = "a bound"};
static const sch pair_s = {SCH_ARRAY, SCH_IN(2, 2), .items = &bound_s, .msg = "must be [lo, hi]: two numbers"};
static const sch ibound_s = {SCH_INT, SCH_IN(-SCH_MAX_SAFE_INT, SCH_MAX_SAFE_INT), .desc = "a bound"};
static const sch ipair_s = {SCH_ARRAY, SCH_IN(2, 2), .items = &ibound_s, .msg = "must be [lo, hi]: two integers"};
static const sch choice_item_s = {SCH_ANY, .desc = "a value (number, string, boolean)"};
static const sch choice_s = {SCH_ARRAY, SCH_IN(1, SEARCH_MAX_CHOICES), .items = &choice_item_s,
                             .msg = "must be a list of 1 to 256 values (numbers, strings or booleans)"};
static const sch_member param_m[] = {
    {"loguniform", &pair_s, 0}, {"uniform", &pair_s, 0}, {"int", &ipair_s, 0}, {"choice", &choice_s, 0}, {0}};
static const sch param_s = {SCH_OBJECT, .members = param_m,
                            .desc = "exactly one distribution: {\"loguniform\": [lo, hi]} (0 < lo < hi), {\"uniform\": [lo, "
                                    "hi]} (lo < hi), {\"int\": [lo, hi]} (integers, lo <= hi, both included) or {\"choice\": "
                                    "[values]}"};
static const sch space_s = {SCH_OBJECT,
                            .flags = SCH_LO | SCH_HI | SCH_OPEN,
                            .lo = 1,
                            .hi = SEARCH_MAX_PARAMS,
                            .items = &param_s,
                            .desc = "the parameters {name: distribution}: names [A-Za-z_][A-Za-z0-9_]* (up to 64 characters); "
                                    "each is the trial's variable NAME upper-cased, and in GANTRY_TRIAL_PARAMS",
                            .msg = "must be an object of 1 to 32 parameters {name: distribution}"};
static const char *const algorithm_v[] = {"random", "grid", "asha", NULL};
static const sch algorithm_s = {SCH_STR, .values = algorithm_v, .dflt = "\"random\"",
                                .desc = "random: max_trials draws; grid: every combination of the choice and int parameters "
                                        "(in name order, the last name fastest); asha: random draws stopped early at the "
                                        "budget's rungs (asynchronous successive halving)"};
static const sch metric_s = {SCH_STR, SCH_IN(1, SEARCH_NAME_MAX),
                             .desc = "the metrics field (a GANTRY_METRICS line's member) that ranks trials"};
static const char *const mode_v[] = {"max", "min", NULL};
static const sch mode_s = {SCH_STR, .values = mode_v, .dflt = "\"max\"", .desc = "whether a higher or a lower metric is better"};
static const sch max_trials_s = {SCH_INT, SCH_IN(1, SEARCH_MAX_TRIALS), .dflt = "10",
                                 .desc = "trials to run in all (grid: at most the grid's size, which is the default)"};
static const sch parallel_s = {SCH_INT, SCH_IN(1, SEARCH_MAX_PARALLEL), .dflt = "2",
                               .desc = "trials queued or running at once, at most (each is scheduled like any job, under the "
                                       "tenant's quota and fair share)"};
static const sch resource_s = {SCH_STR, SCH_IN(1, SEARCH_NAME_MAX), .dflt = "\"epoch\"",
                               .desc = "the metrics field that counts what a trial has spent (epochs)"};
static const sch rmin_s = {SCH_NUM, SCH_ABOVE(0), .dflt = "1", .desc = "the first rung: the resource every trial gets"};
static const sch rmax_s = {SCH_NUM, SCH_ABOVE(0), .desc = "the most a trial gets (GANTRY_TRIAL_MAX_RESOURCE)"};
static const sch reduction_s = {SCH_INT, SCH_IN(2, 100), .dflt = "3",
                                .desc = "eta: rungs at min x eta^k below max; 1 in eta trials continues past each rung"};
static const sch_member budget_m[] = {
    {"resource", &resource_s, 0}, {"min", &rmin_s, 0}, {"max", &rmax_s, 1}, {"reduction", &reduction_s, 0}, {0}};
static const sch budget_s = {SCH_OBJECT, .members = budget_m,
                             .desc = "what a trial may spend (required by asha; min < max there); the trial reads max from "
                                     "GANTRY_TRIAL_MAX_RESOURCE"};
static const sch seed_s = {SCH_INT, SCH_IN(0, SCH_MAX_SAFE_INT), .dflt = "1",
                           .desc = "the draws: trial i's parameters follow from (seed, i) alone"};
static const sch failures_s = {SCH_INT, SCH_IN(0, 100), .dflt = "2",
                               .desc = "times a failed trial is run again before it is marked failed (the search goes on)"};
static const sch pause_s = {SCH_BOOL, .dflt = "false",
                            .desc = "asha only.  false: a trial below a rung's cut is stopped as it reports (Ray Tune's "
                                    "ASHA); true: each run ends at the trial's next rung (GANTRY_TRIAL_MAX_RESOURCE), the "
                                    "trial pauses there and the best of a rung are promoted later, resuming from the trial's "
                                    "checkpoint directory (the paper's ASHA)"};
static const sch_member search_m[] = {{"space", &space_s, 1},
                                      {"algorithm", &algorithm_s, 0},
                                      {"metric", &metric_s, 1},
                                      {"mode", &mode_s, 0},
                                      {"max_trials", &max_trials_s, 0},
                                      {"parallel", &parallel_s, 0},
                                      {"budget", &budget_s, 0},
                                      {"seed", &seed_s, 0},
                                      {"max_failures", &failures_s, 0},
                                      {"pause", &pause_s, 0},
                                      {0}};
const sch search_shape = {SCH_OBJECT, .members = search_m,
                          .desc = "A hyper-parameter search (docs/search.md): the server runs the program once per trial, "
                                  "each trial a job of its own with its parameters in its environment.  Rules beyond the "
                                  "schema: one distribution per parameter with lo < hi; grid only over choice and int "
                                  "parameters (at most 1000 points); asha needs a budget with min < max."};

/* a trial's own spec member, written by the server's search controller (never by a user: the server
 * refuses it in a submission); the worker turns it into the trial's environment */
static const sch trial_id_s = {SCH_STR, SCH_IN(1, 64), .desc = "the search job's id"};
static const sch trial_index_s = {SCH_INT, SCH_IN(0, SEARCH_MAX_TRIALS), .desc = "the trial's number in the search, from 0"};
static const sch trial_params_s = {SCH_OBJECT, .flags = SCH_OPEN, .desc = "the trial's parameters {name: value}"};
static const sch budget_max_s = {SCH_NUM, SCH_ABOVE(0),
                                 .desc = "with pause: the budget's max (max_resource is where this run of the trial ends)"};
static const sch trial_rung_s = {SCH_INT, SCH_IN(0, SEARCH_MAX_RUNGS),
                                 .desc = "with pause: the rungs this trial was promoted past before this run"};
static const sch_member trial_m[] = {{"search", &trial_id_s, 1},         {"index", &trial_index_s, 1},
                                     {"params", &trial_params_s, 1},     {"metric", &metric_s, 0},
                                     {"resource", &resource_s, 0},       {"max_resource", &rmax_s, 0},
                                     {"budget_max", &budget_max_s, 0},   {"rung", &trial_rung_s, 0},
                                     {"checkpoint_job", &trial_id_s, 0}, {0}};
const sch search_trial_shape = {SCH_OBJECT, .members = trial_m,
                                .desc = "set by gantry on a search's trials (refused in a submission): the search, the trial's "
                                        "number and parameters, the budget's resource and where this run ends; with pause, "
                                        "the budget's max, the rung and the job whose checkpoint directory the trial keeps"};

/* ---- the rules between fields ---- */

static bool variable_name(const char *s)
{
    if (!s[0] || (s[0] >= '0' && s[0] <= '9') || strlen(s) > SEARCH_NAME_MAX) return false;
    for (; *s; s++)
        if (!((*s >= 'A' && *s <= 'Z') || (*s >= 'a' && *s <= 'z') || (*s >= '0' && *s <= '9') || *s == '_')) return false;
    return true;
}

static int param_rules(const char *name, const json_t *p, search_algorithm alg, double *points, char *field, size_t fl, char *msg,
                       size_t ml)
{
    char path[160];
    snprintf(path, sizeof path, "spec.search.space.%s", name);
    if (!variable_name(name))
        return field_fail(field, fl, msg, ml, path,
                          "must be a parameter name: letters, digits and _, not starting with a digit, at most 64 characters");
    if (json_object_size(p) != 1)
        return field_fail(field, fl, msg, ml, path,
                          "must have exactly one distribution: loguniform, uniform, int or choice (e.g. {\"uniform\": [0, 1]})");
    const char *kind = json_object_iter_key(json_object_iter((json_t *)p));
    json_t *v = json_object_iter_value(json_object_iter((json_t *)p));
    char sub[200];
    snprintf(sub, sizeof sub, "%s.%s", path, kind);
    if (strcmp(kind, "choice") == 0) {
        size_t i;
        json_t *c;
        json_array_foreach(v, i, c) if (!json_is_number(c) && !json_is_string(c) && !json_is_boolean(c))
        {
            snprintf(sub + strlen(sub), sizeof sub - strlen(sub), "[%zu]", i);
            return field_fail(field, fl, msg, ml, sub, "must be a number, a string or a boolean");
        }
        *points = (double)json_array_size(v);
        return 0;
    }
    double lo = json_number_value(json_array_get(v, 0)), hi = json_number_value(json_array_get(v, 1));
    if (strcmp(kind, "int") == 0) {
        if (lo > hi) return field_fail(field, fl, msg, ml, sub, "must be [lo, hi] with lo <= hi");
        *points = hi - lo + 1;
        return 0;
    }
    if (!(lo < hi) || !isfinite(lo) || !isfinite(hi)) return field_fail(field, fl, msg, ml, sub, "must be [lo, hi] with lo < hi");
    if (strcmp(kind, "loguniform") == 0 && lo <= 0)
        return field_fail(field, fl, msg, ml, sub, "must be [lo, hi] with 0 < lo < hi (drawn uniformly in log space)");
    if (alg == SEARCH_GRID)
        return field_fail(field, fl, msg, ml, sub,
                          "a grid takes only choice and int parameters (a %s range has no finite set of points): use "
                          "\"random\" or \"asha\", or list the values with choice",
                          kind);
    *points = INFINITY;
    return 0;
}

static search_algorithm algorithm_of(const json_t *search)
{
    const char *a = json_string_value(json_object_get(search, "algorithm"));
    return !a || strcmp(a, "random") == 0 ? SEARCH_RANDOM : strcmp(a, "grid") == 0 ? SEARCH_GRID : SEARCH_ASHA;
}

int search_spec_validate(const json_t *search, char *field, size_t fl, char *msg, size_t ml)
{
    if (sch_check(&search_shape, search, "spec.search", field, fl, msg, ml)) return -1;
    search_algorithm alg = algorithm_of(search);
    const char *name;
    json_t *p;
    double grid = 1;
    json_object_foreach((json_t *)search, name, p) if (strcmp(name, "metric") == 0 || strcmp(name, "budget") == 0)
    {
        const char *s = json_string_value(strcmp(name, "metric") == 0 ? p : json_object_get(p, "resource"));
        if (s && !variable_name(s))
            return field_fail(field, fl, msg, ml,
                              strcmp(name, "metric") == 0 ? "spec.search.metric" : "spec.search.budget.resource",
                              "must be a metrics field's name: letters, digits and _, not starting with a digit");
    }
    json_object_foreach(json_object_get(search, "space"), name, p)
    {
        double points = 0;
        if (param_rules(name, p, alg, &points, field, fl, msg, ml)) return -1;
        grid *= points;
    }
    if (alg == SEARCH_GRID && grid > SEARCH_MAX_GRID)
        return field_fail(field, fl, msg, ml, "spec.search.space", "a grid of %.0f points is over the limit of %d", grid,
                          SEARCH_MAX_GRID);
    json_t *budget = json_object_get(search, "budget");
    if (alg == SEARCH_ASHA && !budget)
        return field_fail(field, fl, msg, ml, "spec.search.budget",
                          "asha needs a budget: {\"resource\": \"epoch\", \"min\": 1, \"max\": 9, \"reduction\": 3}");
    if (budget) {
        double lo = sch_number(&budget_s, budget, "min", 1), hi = json_number_value(json_object_get(budget, "max"));
        if (lo > hi) return field_fail(field, fl, msg, ml, "spec.search.budget.max", "must be at least budget.min");
        if (alg == SEARCH_ASHA && !(lo < hi))
            return field_fail(field, fl, msg, ml, "spec.search.budget.max",
                              "must be above budget.min: asha stops trials at rungs below max");
        if (alg == SEARCH_ASHA && hi / lo > pow(sch_number(&budget_s, budget, "reduction", 3), SEARCH_MAX_RUNGS))
            return field_fail(field, fl, msg, ml, "spec.search.budget.max", "gives more than %d rungs: raise min or reduction",
                              SEARCH_MAX_RUNGS);
    }
    if (json_is_true(json_object_get(search, "pause")) && alg != SEARCH_ASHA)
        return field_fail(field, fl, msg, ml, "spec.search.pause",
                          "only asha pauses and promotes trials: give \"algorithm\": \"asha\"");
    json_t *mt = json_object_get(search, "max_trials");
    if (alg == SEARCH_GRID && mt && (double)json_integer_value(mt) > grid)
        return field_fail(field, fl, msg, ml, "spec.search.max_trials", "must be at most the grid's %.0f points", grid);
    return 0;
}

/* ---- the settings ---- */

static int by_name(const void *a, const void *b)
{
    return strcmp(((const search_param *)a)->name, ((const search_param *)b)->name);
}

void search_settings_get(const json_t *search, search_settings *s)
{
    memset(s, 0, sizeof(*s));
    s->algorithm = algorithm_of(search);
    const char *name;
    json_t *p;
    double grid = 1;
    json_object_foreach(json_object_get(search, "space"), name, p)
    {
        if (s->nparams >= SEARCH_MAX_PARAMS) break;
        search_param *q = &s->params[s->nparams++];
        snprintf(q->name, sizeof q->name, "%s", name);
        const char *kind = json_object_iter_key(json_object_iter(p));
        json_t *v = json_object_iter_value(json_object_iter(p));
        q->kind = !kind                             ? PARAM_CHOICE
                  : strcmp(kind, "loguniform") == 0 ? PARAM_LOGUNIFORM
                  : strcmp(kind, "uniform") == 0    ? PARAM_UNIFORM
                  : strcmp(kind, "int") == 0        ? PARAM_INT
                                                    : PARAM_CHOICE;
        if (q->kind == PARAM_CHOICE) {
            q->choices = v;
            grid *= (double)json_array_size(v);
        } else {
            q->lo = json_number_value(json_array_get(v, 0));
            q->hi = json_number_value(json_array_get(v, 1));
            grid *= q->kind == PARAM_INT ? q->hi - q->lo + 1 : INFINITY;
        }
    }
    qsort(s->params, (size_t)s->nparams, sizeof(s->params[0]), by_name);
    s->metric = json_string_value(json_object_get(search, "metric"));
    const char *mode = json_string_value(json_object_get(search, "mode"));
    s->maximize = !mode || strcmp(mode, "max") == 0;
    json_t *mt = json_object_get(search, "max_trials");
    s->max_trials = mt ? (int)json_integer_value(mt) : (int)sch_number(&search_shape, search, "max_trials", 10);
    if (s->algorithm == SEARCH_GRID && (!mt || s->max_trials > grid)) s->max_trials = (int)fmin(grid, SEARCH_MAX_GRID);
    s->parallel = (int)sch_number(&search_shape, search, "parallel", 2);
    json_t *b = json_object_get(search, "budget");
    s->has_budget = b != NULL;
    s->resource = b && json_object_get(b, "resource") ? json_string_value(json_object_get(b, "resource")) : "epoch";
    s->min_r = sch_number(&budget_s, b, "min", 1);
    s->max_r = b ? json_number_value(json_object_get(b, "max")) : 0;
    s->reduction = (int)sch_number(&budget_s, b, "reduction", 3);
    s->seed = (unsigned long long)sch_number(&search_shape, search, "seed", 1);
    s->max_failures = (int)sch_number(&search_shape, search, "max_failures", 2);
    s->pause = s->algorithm == SEARCH_ASHA && json_is_true(json_object_get(search, "pause"));
}

const char *search_algorithm_name(search_algorithm a)
{
    return algorithm_v[a == SEARCH_RANDOM ? 0 : a == SEARCH_GRID ? 1 : 2];
}
