/* adapt.c - the adaptation policies (adapt.h). */
#include "workers/train/adapt.h"

#include "workers/train/gns.h"

#include <math.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

#define MAX_POLICIES 8

static const char *strategies[] = {"ring", "tree", "star"};

const char *train_strategy_name(int s)
{
    return s >= 0 && s < TRAIN_NSTRATEGIES ? strategies[s] : "?";
}

typedef struct pol pol;

typedef struct {
    const char *name;
    const sch *shape; /* its parameters (common/schema.h): validation, defaults, the API document */
    int (*rules)(const json_t *j, const char *prefix, char *field, size_t fl, char *msg, size_t ml); /* beyond the shape */
    void (*before_train)(pol *self, train_adapt *a);
    void (*after_step)(pol *self, train_policies *all, train_adapt *a);
    void (*after_epoch)(pol *self, train_adapt *a);
    void (*after_train)(pol *self, train_adapt *a);
} kind;

struct pol {
    const kind *k;
    /* parameters */
    long every, warmup, min, max, window;
    double alpha, threshold;
    int scale_lr; /* 0 none, 1 linear, 2 sqrt */
    /* state */
    double win_sum, reference;
    long win_n, ref_batch; /* the reference holds for one global batch */
};

struct train_policies {
    pol p[MAX_POLICIES];
    int n;
    bool gns_on;
    long gns_every;
    train_gns gns;
};

/* ---- validation helpers ---- */

static int fail(char *field, size_t fl, char *msg, size_t ml, const char *prefix, const char *key, const char *m)
{
    snprintf(field, fl, "%s.%s", prefix, key);
    snprintf(msg, ml, "%s", m);
    return -1;
}

static const sch every_s = {SCH_INT, SCH_IN(1, 1000000), .dflt = "10", .desc = "steps between measurements"};

/* a parameter's value or the default its shape documents */
static double param(const kind *k, const json_t *j, const char *key)
{
    return sch_number(k->shape, j, key, 0);
}

/* ---- gns: the monitor ---- */

static const char *const gns_v[] = {"gns", NULL};
static const sch gns_name_s = {SCH_STR, .values = gns_v};
static const sch alpha_s = {SCH_NUM, SCH_IN_LO_OPEN(0, 1), .dflt = "0.05", .desc = "the smoothing of the estimates"};
static const sch_member gns_m[] = {{"name", &gns_name_s, 1}, {"every_steps", &every_s, 0}, {"alpha", &alpha_s, 0}, {0}};
static const sch gns_s = {SCH_OBJECT, .members = gns_m, .desc = "monitor the gradient noise scale (shown with the curves)"};
static const kind gns_kind = {"gns", &gns_s, NULL, NULL, NULL, NULL, NULL};

/* ---- adaptive_batch ---- */

static const char *const ab_v[] = {"adaptive_batch", NULL}, *const scale_v[] = {"none", "linear", "sqrt", NULL};
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
        return fail(field, fl, msg, ml, prefix, "max", "must not be below min");
    return 0;
}

static long round_to(long b, int world)
{
    long w = world < 1 ? 1 : world;
    return (b + w - 1) / w * w;
}

static void ab_after_step(pol *self, train_policies *all, train_adapt *a)
{
    (void)all;
    if (a->step < self->warmup || a->step % self->every != 0 || !(a->gns > 0)) return;
    double target = a->gns < (double)self->min ? (double)self->min : a->gns > (double)self->max ? (double)self->max : a->gns;
    long next = a->batch;
    if (target > 1.5 * (double)a->batch)
        next = a->batch * 2 > self->max ? self->max : a->batch * 2;
    else if (target < (double)a->batch / 1.5)
        next = a->batch / 2 < self->min ? self->min : a->batch / 2;
    next = round_to(next, a->world); /* may pass max by less than one row of the workers */
    if (next == a->batch || next < 1) return;
    double ratio = (double)next / (double)a->batch;
    a->new_batch = next;
    a->lr_factor = self->scale_lr == 1 ? ratio : self->scale_lr == 2 ? sqrt(ratio) : 1.0;
    snprintf(a->event, sizeof a->event, "batch_size");
    int n = snprintf(a->detail, sizeof a->detail, "global batch %ld -> %ld: gradient noise scale %.0f", a->batch, next, a->gns);
    if (a->lr_factor != 1.0)
        snprintf(a->detail + n, sizeof a->detail - (size_t)n, "; learning rate x %.3g (%s)", a->lr_factor,
                 self->scale_lr == 1 ? "linear" : "sqrt");
}

static const kind ab_kind = {"adaptive_batch", &ab_s, ab_rules, NULL, ab_after_step, NULL, NULL};

/* ---- strategy_switch ---- */

static const char *const ss_v[] = {"strategy_switch", NULL};
static const sch ss_name_s = {SCH_STR, .values = ss_v};
static const sch threshold_s = {SCH_NUM,       .flags = SCH_LO | SCH_LO_OPEN | SCH_HI | SCH_HI_OPEN,
                                .lo = 0,       .hi = 1,
                                .dflt = "0.8", .desc = "switch when throughput falls below this share of the reference"};
static const sch window_s = {SCH_INT, SCH_IN(1, 1000000), .dflt = "50", .desc = "steps per throughput window"};
static const sch_member ss_m[] = {{"name", &ss_name_s, 1}, {"threshold", &threshold_s, 0}, {"window_steps", &window_s, 0}, {0}};
static const sch ss_s = {SCH_OBJECT, .members = ss_m,
                         .desc = "vote to switch the all-reduce strategy (ring, tree, star) when throughput falls"};

static void ss_before_train(pol *self, train_adapt *a)
{
    (void)a;
    self->win_sum = 0, self->win_n = 0, self->reference = 0;
}

static void ss_after_step(pol *self, train_policies *all, train_adapt *a)
{
    (void)all;
    if (!(a->samples_per_s > 0)) return;
    if (a->batch != self->ref_batch) /* another global batch: another throughput; measure again */
        self->ref_batch = a->batch, self->reference = 0, self->win_sum = 0, self->win_n = 0;
    self->win_sum += a->samples_per_s, self->win_n++;
    if (self->win_n < self->window) return;
    double mean = self->win_sum / (double)self->win_n;
    self->win_sum = 0, self->win_n = 0;
    if (self->reference == 0)
        self->reference = mean; /* the first window after a start or a switch */
    else if (mean < self->threshold * self->reference)
        a->vote_switch = true;
}

static const kind ss_kind = {"strategy_switch", &ss_s, NULL, ss_before_train, ss_after_step, NULL, NULL};

static const kind *kinds[] = {&gns_kind, &ab_kind, &ss_kind};
#define NKINDS (sizeof kinds / sizeof kinds[0])

static const sch *const policy_alts[] = {&gns_s, &ab_s, &ss_s, NULL};
static const sch policy_s = {SCH_ONEOF, .alts = policy_alts, .tag = "name"};
const sch train_policies_shape = {SCH_ARRAY, SCH_IN(0, MAX_POLICIES), .items = &policy_s,
                                  .desc = "adaptation policies, each at most once"};

static const kind *find(const char *name)
{
    for (size_t i = 0; name && i < NKINDS; i++)
        if (!strcmp(kinds[i]->name, name)) return kinds[i];
    return NULL;
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
        const kind *k = find(json_string_value(json_object_get(p, "name")));
        if (k->rules && k->rules(p, prefix, field, fl, msg, ml)) return -1;
        for (size_t j = 0; j < i; j++)
            if (find(json_string_value(json_object_get(json_array_get(ps, j), "name"))) == k)
                return fail(field, fl, msg, ml, prefix, "name", "is given twice");
    }
    return 0;
}

train_policies *train_policies_create(const json_t *spec)
{
    const json_t *ps = json_object_get(spec, "policies");
    if (!json_is_array(ps) || json_array_size(ps) == 0) return NULL;
    train_policies *all = calloc(1, sizeof *all);
    if (!all) return NULL;
    train_gns_init(&all->gns, param(&gns_kind, NULL, "alpha")); /* adaptive_batch alone: the monitor's defaults */
    all->gns_every = (long)param(&gns_kind, NULL, "every_steps");
    size_t i;
    json_t *j;
    json_array_foreach(ps, i, j)
    {
        const kind *k = find(json_string_value(json_object_get(j, "name")));
        if (!k || all->n == MAX_POLICIES) continue;
        pol *p = &all->p[all->n++];
        p->k = k;
        p->every = (long)param(k, j, "every_steps");
        p->warmup = (long)param(k, j, "warmup_steps");
        p->min = (long)param(k, j, "min");
        p->max = (long)param(k, j, "max");
        p->window = (long)param(k, j, "window_steps");
        p->threshold = param(k, j, "threshold");
        const char *s = json_string_value(json_object_get(j, "scale_lr"));
        p->scale_lr = s && !strcmp(s, "linear") ? 1 : s && !strcmp(s, "sqrt") ? 2 : 0;
        if (k == &gns_kind) {
            all->gns_on = true, all->gns_every = p->every;
            train_gns_init(&all->gns, param(k, j, "alpha"));
        }
        if (k == &ab_kind) all->gns_on = true;
    }
    return all;
}

void train_policies_free(train_policies *p)
{
    free(p);
}

long train_policies_max_batch(const train_policies *p, long batch)
{
    long m = batch;
    for (int i = 0; p && i < p->n; i++)
        if (p->p[i].k == &ab_kind && p->p[i].max + 64 > m) m = p->p[i].max + 64; /* max, rounded up to the workers */
    return m;
}

bool train_policies_want_gns(const train_policies *p, long step)
{
    return p && p->gns_on && step % p->gns_every == 0;
}

void train_policies_gns(train_policies *p, double small_sq, double b, double big_sq, double B)
{
    if (p) train_gns_update(&p->gns, small_sq, b, big_sq, B);
}

double train_policies_gns_value(const train_policies *p)
{
    return p && p->gns_on ? train_gns_value(&p->gns) : 0;
}

void train_policies_before_train(train_policies *p, train_adapt *a)
{
    for (int i = 0; p && i < p->n; i++)
        if (p->p[i].k->before_train) p->p[i].k->before_train(&p->p[i], a);
}

void train_policies_after_step(train_policies *p, train_adapt *a)
{
    for (int i = 0; p && i < p->n; i++)
        if (p->p[i].k->after_step) p->p[i].k->after_step(&p->p[i], p, a);
}

void train_policies_after_epoch(train_policies *p, train_adapt *a)
{
    for (int i = 0; p && i < p->n; i++)
        if (p->p[i].k->after_epoch) p->p[i].k->after_epoch(&p->p[i], a);
}

void train_policies_after_train(train_policies *p, train_adapt *a)
{
    for (int i = 0; p && i < p->n; i++)
        if (p->p[i].k->after_train) p->p[i].k->after_train(&p->p[i], a);
}

int train_policies_switch(train_policies *p, train_adapt *a)
{
    int next = (a->strategy + 1) % TRAIN_NSTRATEGIES;
    for (int i = 0; p && i < p->n; i++)
        if (p->p[i].k == &ss_kind) {
            p->p[i].reference = 0, p->p[i].win_sum = 0, p->p[i].win_n = 0; /* measure the new one */
            snprintf(a->event, sizeof a->event, "strategy");
            snprintf(a->detail, sizeof a->detail,
                     "all-reduce %s -> %s: a majority of the workers measured under %.0f%% of the "
                     "reference throughput",
                     train_strategy_name(a->strategy), train_strategy_name(next), p->p[i].threshold * 100);
        }
    return next;
}
