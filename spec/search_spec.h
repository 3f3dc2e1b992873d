/* search_spec.h - a hyper-parameter search over a program training job: the shape of spec.search,
 * its validation and its settings with their defaults.  jansson only (+ common/schema, common/fielderr):
 * the server validates a submission with it (through spec/program_spec.c) and its search controller
 * (server/search.c) reads the settings; the algorithms that use them are spec/search_algo.h.
 * docs/search.md.
 *
 *   "search": {"space": {"lr": {"loguniform": [1e-4, 1e-1]}, "dropout": {"uniform": [0, 0.5]},
 *                        "batch": {"int": [32, 256]}, "width": {"choice": [16, 32, 64]}},
 *              "algorithm": "random" | "grid" | "asha",       default "random"
 *              "metric": "test_accuracy", "mode": "max" | "min",   metric required, mode default "max"
 *              "max_trials": 24,     default 10 (grid: the grid's size)
 *              "parallel": 4,        trials at once, default 2
 *              "budget": {"resource": "epoch", "min": 1, "max": 9, "reduction": 3},   required by asha
 *              "seed": 1, "max_failures": 2,
 *              "pause": false}       asha: true pauses trials at rungs and promotes the best later
 *
 * Rules beyond the shape: each parameter has exactly one distribution; bounds lo < hi (int lo <= hi,
 * loguniform lo > 0); a parameter name is a variable name (it becomes one in the trial's
 * environment: program_spec.c checks the upper-cased name is not one gantry sets); grid takes only
 * choice and int parameters and at most SEARCH_MAX_GRID points; asha needs a budget with min < max
 * and at least one rung below max. */
#ifndef GANTRY_SEARCH_SPEC_H
#define GANTRY_SEARCH_SPEC_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "common/schema.h"

#define SEARCH_MAX_PARAMS 32
#define SEARCH_MAX_CHOICES 256
#define SEARCH_MAX_TRIALS 1000
#define SEARCH_MAX_PARALLEL 64
#define SEARCH_MAX_GRID SEARCH_MAX_TRIALS
#define SEARCH_MAX_RUNGS 32
#define SEARCH_NAME_MAX 64

typedef enum { SEARCH_RANDOM, SEARCH_GRID, SEARCH_ASHA } search_algorithm;
typedef enum { PARAM_LOGUNIFORM, PARAM_UNIFORM, PARAM_INT, PARAM_CHOICE } search_param_kind;

typedef struct {
    char name[SEARCH_NAME_MAX + 1];
    search_param_kind kind;
    double lo, hi;         /* loguniform, uniform, int */
    const json_t *choices; /* choice: the array (borrowed from the spec) */
} search_param;

typedef struct {
    search_param params[SEARCH_MAX_PARAMS]; /* sorted by name: the order of the grid and of the draws */
    int nparams;
    search_algorithm algorithm;
    const char *metric;      /* borrowed */
    bool maximize;           /* mode "max" */
    int max_trials;          /* grid: at most the grid's size */
    int parallel;            /* trials running at once, at most */
    bool has_budget;         /* budget given (asha: always) */
    const char *resource;    /* the metrics field that counts the budget ("epoch"); borrowed */
    double min_r, max_r;     /* budget.min, budget.max */
    int reduction;           /* budget.reduction (eta) */
    unsigned long long seed; /* the draws of random search */
    int max_failures;        /* retries of a failed trial before it is marked failed */
    bool pause;              /* asha: pause at rungs and promote (the paper's), not stop */
} search_settings;

/* spec.search's shape (a member of the program spec's shape: spec/program_spec.c), and spec.trial's:
 * {"search": id, "index": i, "params": {..}, "metric", "resource", "max_resource", and with pause "budget_max",
 * "rung", "checkpoint_job"}, which the server
 * writes into each trial's spec and the worker reads (workers/exec_program.c: the trial's variables) */
extern const sch search_shape, search_trial_shape;

/* 0 when search (spec.search) is valid: its shape, then the rules above; else -1 with field
 * ("spec.search.space.lr.loguniform", "spec.search.budget") and msg */
int search_spec_validate(const json_t *search, char *field, size_t field_len, char *msg, size_t msg_len);

/* a valid spec.search's settings, defaults applied (strings and choices borrowed from search) */
void search_settings_get(const json_t *search, search_settings *out);

/* the algorithm's name as the spec spells it */
const char *search_algorithm_name(search_algorithm a);

#endif
