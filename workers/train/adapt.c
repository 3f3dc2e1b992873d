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
    int (*validate)(const json_t *j, const char *prefix, char *field, size_t fl, char *msg, size_t ml);
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

static int opt_int(const json_t *j, const char *key, long lo, long hi, const char *prefix, char *field, size_t fl, char *msg,
                   size_t ml)
{
    json_t *v = json_object_get(j, key);
    if (!v) return 0;
    if (!json_is_integer(v) || json_integer_value(v) < lo || json_integer_value(v) > hi) {
        char m[96];
        snprintf(m, sizeof m, "must be an integer in [%ld, %ld]", lo, hi);
        return fail(field, fl, msg, ml, prefix, key, m);
    }
    return 0;
}

static long get_int(const json_t *j, const char *key, long def)
{
    json_t *v = json_object_get(j, key);
    return json_is_integer(v) ? (long)json_integer_value(v) : def;
}

static double get_num(const json_t *j, const char *key, double def)
{
    json_t *v = json_object_get(j, key);
    return json_is_number(v) ? json_number_value(v) : def;
}

/* ---- gns: the monitor ---- */

static int gns_validate(const json_t *j, const char *prefix, char *field, size_t fl, char *msg, size_t ml)
{
    if (opt_int(j, "every_steps", 1, 1000000, prefix, field, fl, msg, ml)) return -1;
    json_t *a = json_object_get(j, "alpha");
    if (a && (!json_is_number(a) || !(json_number_value(a) > 0 && json_number_value(a) <= 1)))
        return fail(field, fl, msg, ml, prefix, "alpha", "must be a number in (0, 1]");
    return 0;
}

static const kind gns_kind = {"gns", gns_validate, NULL, NULL, NULL, NULL};

/* ---- adaptive_batch ---- */

static int ab_validate(const json_t *j, const char *prefix, char *field, size_t fl, char *msg, size_t ml)
{
    if (opt_int(j, "min", 1, 65536, prefix, field, fl, msg, ml) || opt_int(j, "max", 1, 65536, prefix, field, fl, msg, ml) ||
        opt_int(j, "every_steps", 1, 1000000, prefix, field, fl, msg, ml) ||
        opt_int(j, "warmup_steps", 0, 1000000000, prefix, field, fl, msg, ml))
        return -1;
    if (get_int(j, "min", 1) > get_int(j, "max", 65536)) return fail(field, fl, msg, ml, prefix, "max", "must not be below min");
    json_t *s = json_object_get(j, "scale_lr");
    const char *v = json_string_value(s);
    if (s && (!v || (strcmp(v, "none") && strcmp(v, "linear") && strcmp(v, "sqrt"))))
        return fail(field, fl, msg, ml, prefix, "scale_lr", "must be \"none\", \"linear\" or \"sqrt\"");
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

static const kind ab_kind = {"adaptive_batch", ab_validate, NULL, ab_after_step, NULL, NULL};

/* ---- strategy_switch ---- */

static int ss_validate(const json_t *j, const char *prefix, char *field, size_t fl, char *msg, size_t ml)
{
    json_t *t = json_object_get(j, "threshold");
    if (t && (!json_is_number(t) || !(json_number_value(t) > 0 && json_number_value(t) < 1)))
        return fail(field, fl, msg, ml, prefix, "threshold", "must be a number in (0, 1)");
    return opt_int(j, "window_steps", 1, 1000000, prefix, field, fl, msg, ml);
}

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

static const kind ss_kind = {"strategy_switch", ss_validate, ss_before_train, ss_after_step, NULL, NULL};

static const kind *kinds[] = {&gns_kind, &ab_kind, &ss_kind};
#define NKINDS (sizeof kinds / sizeof kinds[0])

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
    if (!json_is_array(ps) || json_array_size(ps) > MAX_POLICIES) {
        snprintf(field, fl, "spec.policies");
        snprintf(msg, ml, "must be a list of at most %d policies ({\"name\": ..., parameters})", MAX_POLICIES);
        return -1;
    }
    size_t i;
    json_t *p;
    json_array_foreach(ps, i, p)
    {
        char prefix[48];
        snprintf(prefix, sizeof prefix, "spec.policies[%zu]", i);
        const kind *k = json_is_object(p) ? find(json_string_value(json_object_get(p, "name"))) : NULL;
        if (!k) return fail(field, fl, msg, ml, prefix, "name", "must be one of gns, adaptive_batch, strategy_switch");
        if (k->validate(p, prefix, field, fl, msg, ml)) return -1;
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
    train_gns_init(&all->gns, 0.05);
    all->gns_every = 10;
    size_t i;
    json_t *j;
    json_array_foreach(ps, i, j)
    {
        const kind *k = find(json_string_value(json_object_get(j, "name")));
        if (!k || all->n == MAX_POLICIES) continue;
        pol *p = &all->p[all->n++];
        p->k = k;
        p->every = get_int(j, "every_steps", k == &ab_kind ? 100 : 10);
        p->warmup = get_int(j, "warmup_steps", 100);
        p->min = get_int(j, "min", 1);
        p->max = get_int(j, "max", 65536);
        p->window = get_int(j, "window_steps", 50);
        p->threshold = get_num(j, "threshold", 0.8);
        const char *s = json_string_value(json_object_get(j, "scale_lr"));
        p->scale_lr = s && !strcmp(s, "linear") ? 1 : s && !strcmp(s, "sqrt") ? 2 : 0;
        if (k == &gns_kind) {
            all->gns_on = true, all->gns_every = p->every;
            train_gns_init(&all->gns, get_num(j, "alpha", 0.05));
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
