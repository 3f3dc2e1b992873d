/* adapt.c - the adaptation policies at work (adapt.h); their shapes and rules are spec/train_spec_policies.c. */
#include "workers/train/adapt.h"

#include "common/alloc.h"

#include "workers/train/gns.h"

#include <math.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

static const char *strategies[] = {"ring", "tree", "star"};

const char *train_strategy_name(int s)
{
    return s >= 0 && s < TRAIN_NSTRATEGIES ? strategies[s] : "?";
}

typedef struct pol pol;

/* what a policy does while a run goes (its shape and rules: spec/train_spec_policies.c) */
typedef struct {
    void (*before_train)(pol *self, train_adapt *a);
    void (*after_step)(pol *self, train_policies *all, train_adapt *a);
    void (*after_epoch)(pol *self, train_adapt *a);
    void (*after_train)(pol *self, train_adapt *a);
} kind;

struct pol {
    int k; /* train_policy_kind */
    /* parameters */
    long every, warmup, min, max, window;
    double alpha, threshold;
    int scale_lr; /* 0 none, 1 linear, 2 sqrt */
    /* state */
    double win_sum, reference;
    long win_n, ref_batch; /* the reference holds for one global batch */
};

struct train_policies {
    pol p[TRAIN_MAX_POLICIES];
    int n;
    bool gns_on;
    long gns_every;
    train_gns gns;
};

/* a parameter's value or the default its shape documents */
static double param(int k, const json_t *j, const char *key)
{
    return sch_number(train_policy_shapes[k], j, key, 0);
}

/* ---- adaptive_batch ---- */

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

/* ---- strategy_switch ---- */

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

static const kind kinds[TRAIN_NPOLICIES] = {
    [TRAIN_POLICY_GNS] = {NULL, NULL, NULL, NULL},
    [TRAIN_POLICY_ADAPTIVE_BATCH] = {NULL, ab_after_step, NULL, NULL},
    [TRAIN_POLICY_STRATEGY_SWITCH] = {ss_before_train, ss_after_step, NULL, NULL},
};

train_policies *train_policies_create(const json_t *spec)
{
    const json_t *ps = json_object_get(spec, "policies");
    if (!json_is_array(ps) || json_array_size(ps) == 0) return NULL;
    train_policies *all = xcalloc(1, sizeof *all);
    train_gns_init(&all->gns, param(TRAIN_POLICY_GNS, NULL, "alpha")); /* adaptive_batch alone: the monitor's defaults */
    all->gns_every = (long)param(TRAIN_POLICY_GNS, NULL, "every_steps");
    size_t i;
    json_t *j;
    json_array_foreach(ps, i, j)
    {
        int k = train_policy_find(json_string_value(json_object_get(j, "name")));
        if (k < 0 || all->n == TRAIN_MAX_POLICIES) continue;
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
        if (k == TRAIN_POLICY_GNS) {
            all->gns_on = true, all->gns_every = p->every;
            train_gns_init(&all->gns, param(k, j, "alpha"));
        }
        if (k == TRAIN_POLICY_ADAPTIVE_BATCH) all->gns_on = true;
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
        if (p->p[i].k == TRAIN_POLICY_ADAPTIVE_BATCH && p->p[i].max + 64 > m)
            m = p->p[i].max + 64; /* max, rounded up to the workers */
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
        if (kinds[p->p[i].k].before_train) kinds[p->p[i].k].before_train(&p->p[i], a);
}

void train_policies_after_step(train_policies *p, train_adapt *a)
{
    for (int i = 0; p && i < p->n; i++)
        if (kinds[p->p[i].k].after_step) kinds[p->p[i].k].after_step(&p->p[i], p, a);
}

void train_policies_after_epoch(train_policies *p, train_adapt *a)
{
    for (int i = 0; p && i < p->n; i++)
        if (kinds[p->p[i].k].after_epoch) kinds[p->p[i].k].after_epoch(&p->p[i], a);
}

void train_policies_after_train(train_policies *p, train_adapt *a)
{
    for (int i = 0; p && i < p->n; i++)
        if (kinds[p->p[i].k].after_train) kinds[p->p[i].k].after_train(&p->p[i], a);
}

int train_policies_switch(train_policies *p, train_adapt *a)
{
    int next = (a->strategy + 1) % TRAIN_NSTRATEGIES;
    for (int i = 0; p && i < p->n; i++)
        if (p->p[i].k == TRAIN_POLICY_STRATEGY_SWITCH) {
            p->p[i].reference = 0, p->p[i].win_sum = 0, p->p[i].win_n = 0; /* measure the new one */
            snprintf(a->event, sizeof a->event, "strategy");
            snprintf(a->detail, sizeof a->detail,
                     "all-reduce %s -> %s: a majority of the workers measured under %.0f%% of the "
                     "reference throughput",
                     train_strategy_name(a->strategy), train_strategy_name(next), p->p[i].threshold * 100);
        }
    return next;
}
