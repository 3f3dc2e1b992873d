/* train_spec_policies.c - the adaptation policies of a training spec ("policies", workers/train/adapt.h has what each
 * does): each policy's shape (validation, defaults, the API document), the rules a shape cannot
 * say, and the names.  Part of the jansson-only training spec module (spec.h); adapt.c runs the
 * policies and reads their parameters' defaults from these shapes. */
#include "spec/train_spec.h"

#include "common/fielderr.h"

#include <stdio.h>
#include <string.h>

#define GNS "gns"
#define ADAPTIVE_BATCH "adaptive_batch"
#define STRATEGY_SWITCH "strategy_switch"

static const sch every_s = {SCH_INT, SCH_IN(1, 1000000), .dflt = "10", .desc = "steps between measurements"};

/* ---- gns: the monitor ---- */

static const char *const gns_v[] = {GNS, NULL};
static const sch gns_name_s = {SCH_STR, .values = gns_v};
static const sch alpha_s = {SCH_NUM, SCH_IN_LO_OPEN(0, 1), .dflt = "0.05", .desc = "the smoothing of the estimates"};
static const sch_member gns_m[] = {{"name", &gns_name_s, 1}, {"every_steps", &every_s, 0}, {"alpha", &alpha_s, 0}, {0}};
static const sch gns_s = {SCH_OBJECT, .members = gns_m, .desc = "monitor the gradient noise scale (shown with the curves)"};

/* ---- adaptive_batch ---- */

static const char *const ab_v[] = {ADAPTIVE_BATCH, NULL}, *const scale_v[] = {"none", "linear", "sqrt", NULL};
static const sch ab_name_s = {SCH_STR, .values = ab_v};
static const sch ab_min_s = {SCH_INT, SCH_IN(1, 65536), .dflt = "1", .desc = "the smallest global batch"};
static const sch ab_max_s = {SCH_INT, SCH_IN(1, 65536), .dflt = "65536", .desc = "the largest global batch (at least min)"};
static const sch ab_every_s = {SCH_INT, SCH_IN(1, 1000000), .dflt = "100", .desc = "steps between decisions"};
static const sch ab_warmup_s = {SCH_INT, SCH_IN(0, 1000000000), .dflt = "100", .desc = "steps before the first decision"};
static const sch scale_lr_s = {SCH_STR, .values = scale_v, .dflt = "\"none\"", .desc = "how the learning rate follows the batch"};
static const sch_member ab_m[] = {{"name", &ab_name_s, 1},
                                  {"min", &ab_min_s, 0},
                                  {"max", &ab_max_s, 0},
                                  {"every_steps", &ab_every_s, 0},
                                  {"warmup_steps", &ab_warmup_s, 0},
                                  {"scale_lr", &scale_lr_s, 0},
                                  {0}};
static const sch ab_s = {SCH_OBJECT, .members = ab_m,
                         .desc = "double or halve the global batch toward the gradient noise scale (within [min, max])"};

static int ab_rules(const json_t *j, const char *prefix, char *field, size_t fl, char *msg, size_t ml)
{
    if (sch_number(&ab_s, j, "min", 0) > sch_number(&ab_s, j, "max", 0))
        return fielderr_fail(&(const fielderr){prefix, field, fl, msg, ml}, ".max", "must not be below min");
    return 0;
}

/* ---- strategy_switch ---- */

static const char *const ss_v[] = {STRATEGY_SWITCH, NULL};
static const sch ss_name_s = {SCH_STR, .values = ss_v};
static const sch threshold_s = {SCH_NUM,       .flags = SCH_LO | SCH_LO_OPEN | SCH_HI | SCH_HI_OPEN,
                                .lo = 0,       .hi = 1,
                                .dflt = "0.8", .desc = "switch when throughput falls below this share of the reference"};
static const sch window_s = {SCH_INT, SCH_IN(1, 1000000), .dflt = "50", .desc = "steps per throughput window"};
static const sch_member ss_m[] = {{"name", &ss_name_s, 1}, {"threshold", &threshold_s, 0}, {"window_steps", &window_s, 0}, {0}};
static const sch ss_s = {SCH_OBJECT, .members = ss_m,
                         .desc = "vote to switch the all-reduce strategy (ring, tree, star) when throughput falls"};

/* ---- the table: name, shape and rules beyond the shape, in train_policy_kind order ---- */

typedef struct {
    const char *name;
    int (*rules)(const json_t *j, const char *prefix, char *field, size_t fl, char *msg, size_t ml);
} policy_row;

static const policy_row rows[TRAIN_NPOLICIES] = {
    [TRAIN_POLICY_GNS] = {GNS, NULL},
    [TRAIN_POLICY_ADAPTIVE_BATCH] = {ADAPTIVE_BATCH, ab_rules},
    [TRAIN_POLICY_STRATEGY_SWITCH] = {STRATEGY_SWITCH, NULL},
};
const sch *const train_policy_shapes[TRAIN_NPOLICIES] = {
    [TRAIN_POLICY_GNS] = &gns_s,
    [TRAIN_POLICY_ADAPTIVE_BATCH] = &ab_s,
    [TRAIN_POLICY_STRATEGY_SWITCH] = &ss_s,
};

static const sch *const policy_alts[] = {&gns_s, &ab_s, &ss_s, NULL};
static const sch policy_s = {SCH_ONEOF, .alts = policy_alts, .tag = "name"};
const sch train_policies_shape = {SCH_ARRAY, SCH_IN(0, TRAIN_MAX_POLICIES), .items = &policy_s,
                                  .desc = "adaptation policies, each at most once"};

int train_policy_find(const char *name)
{
    for (int i = 0; name && i < TRAIN_NPOLICIES; i++)
        if (!strcmp(rows[i].name, name)) return i;
    return -1;
}

int train_policies_validate(const json_t *spec, char *field, size_t fl, char *msg, size_t ml)
{
    const json_t *ps = json_object_get(spec, "policies");
    if (!ps) return 0;
    if (sch_check(&train_policies_shape, ps, "spec.policies", field, fl, msg, ml)) return -1;
    size_t i;
    json_t *p;
    json_array_foreach(ps, i, p)
    {
        char prefix[48];
        snprintf(prefix, sizeof prefix, "spec.policies[%zu]", i);
        int k = train_policy_find(json_string_value(json_object_get(p, "name")));
        if (rows[k].rules && rows[k].rules(p, prefix, field, fl, msg, ml)) return -1;
        for (size_t j = 0; j < i; j++)
            if (train_policy_find(json_string_value(json_object_get(json_array_get(ps, j), "name"))) == k)
                return fielderr_fail(&(const fielderr){prefix, field, fl, msg, ml}, ".name", "is given twice");
    }
    return 0;
}
