/* optim.c - optimizers update every parameter through the backend; the
 * schedule is a pure function of (step, total) so a resumed run continues on
 * exactly the same learning-rate curve. */
#include "workers/train/optim.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int bad(char *field, size_t fl, char *msg, size_t ml, const char *prefix, const char *key, const char *m)
{
    snprintf(field, fl, "%s%s%s", prefix, key ? "." : "", key ? key : "");
    snprintf(msg, ml, "%s", m);
    return -1;
}

/* optional number in (lo, hi] or [lo, hi] */
static int num_ok(const json_t *o, const char *key, double lo, double hi, int open_lo)
{
    json_t *v = json_object_get(o, key);
    if (!v) return 1;
    if (!json_is_number(v)) return 0;
    double x = json_number_value(v);
    return (open_lo ? x > lo : x >= lo) && x <= hi;
}

int train_optim_validate(const json_t *o, const char *prefix, char *field, size_t fl, char *msg, size_t ml)
{
    if (!json_is_object(o)) return bad(field, fl, msg, ml, prefix, NULL, "must be an object");
    const char *t = json_string_value(json_object_get(o, "type"));
    if (!t || (strcmp(t, "sgd") && strcmp(t, "adam")))
        return bad(field, fl, msg, ml, prefix, "type", "must be \"sgd\" or \"adam\"");
    if (!json_is_number(json_object_get(o, "lr")) || !num_ok(o, "lr", 0, 10, 1))
        return bad(field, fl, msg, ml, prefix, "lr", "must be a number in (0, 10]");
    if (!num_ok(o, "momentum", 0, 0.999999, 0)) return bad(field, fl, msg, ml, prefix, "momentum", "must be a number in [0, 1)");
    if (!num_ok(o, "beta1", 0, 0.999999, 0)) return bad(field, fl, msg, ml, prefix, "beta1", "must be a number in [0, 1)");
    if (!num_ok(o, "beta2", 0, 0.999999, 0)) return bad(field, fl, msg, ml, prefix, "beta2", "must be a number in [0, 1)");
    if (!num_ok(o, "eps", 0, 1, 1)) return bad(field, fl, msg, ml, prefix, "eps", "must be a number in (0, 1]");
    return 0;
}

static int int_ok(const json_t *o, const char *key, long lo)
{
    json_t *v = json_object_get(o, key);
    return !v || (json_is_integer(v) && json_integer_value(v) >= lo);
}

int train_schedule_validate(const json_t *s, const char *prefix, char *field, size_t fl, char *msg, size_t ml)
{
    if (!s) return 0;
    if (!json_is_object(s)) return bad(field, fl, msg, ml, prefix, NULL, "must be an object");
    const char *t = json_string_value(json_object_get(s, "type"));
    json_t *tj = json_object_get(s, "type");
    if (tj && (!t || (strcmp(t, "constant") && strcmp(t, "step") && strcmp(t, "cosine"))))
        return bad(field, fl, msg, ml, prefix, "type", "must be \"constant\", \"step\" or \"cosine\"");
    if (!int_ok(s, "warmup_steps", 0)) return bad(field, fl, msg, ml, prefix, "warmup_steps", "must be a non-negative integer");
    if (!int_ok(s, "step_size", 1)) return bad(field, fl, msg, ml, prefix, "step_size", "must be a positive integer");
    if (t && !strcmp(t, "step") && !json_object_get(s, "step_size"))
        return bad(field, fl, msg, ml, prefix, "step_size", "is required for a step schedule");
    if (!num_ok(s, "gamma", 0, 1, 1)) return bad(field, fl, msg, ml, prefix, "gamma", "must be a number in (0, 1]");
    if (!num_ok(s, "min_lr", 0, 10, 0)) return bad(field, fl, msg, ml, prefix, "min_lr", "must be a number in [0, 10]");
    return 0;
}

static float num(const json_t *o, const char *key, double def)
{
    json_t *v = json_object_get(o, key);
    return (float)(v ? json_number_value(v) : def);
}

train_optim *train_optim_create(const json_t *j, train_model *model)
{
    train_optim *o = calloc(1, sizeof *o);
    if (!o) return NULL;
    o->type = !strcmp(json_string_value(json_object_get(j, "type")), "adam") ? TRAIN_ADAM : TRAIN_SGD;
    o->lr = num(j, "lr", 0.01);
    o->momentum = num(j, "momentum", 0.0);
    o->beta1 = num(j, "beta1", 0.9);
    o->beta2 = num(j, "beta2", 0.999);
    o->eps = num(j, "eps", 1e-8);
    o->n = model->nparams;
    o->params = model->params;
    o->m = calloc((size_t)o->n, sizeof *o->m);
    o->v = calloc((size_t)o->n, sizeof *o->v);
    if (!o->m || !o->v) goto oom;
    for (int i = 0; i < o->n; i++) {
        if (!(o->m[i] = model->be->alloc(o->params[i]->n))) goto oom;
        if (o->type == TRAIN_ADAM && !(o->v[i] = model->be->alloc(o->params[i]->n))) goto oom;
    }
    return o;
oom:
    train_optim_free(o, model->be);
    return NULL;
}

void train_optim_free(train_optim *o, const train_backend *be)
{
    if (!o) return;
    for (int i = 0; i < o->n; i++) {
        if (o->m) be->free(o->m[i]);
        if (o->v) be->free(o->v[i]);
    }
    free(o->m);
    free(o->v);
    free(o);
}

int train_optim_buffers(const train_optim *o)
{
    return o->type == TRAIN_ADAM ? 2 : 1;
}

void train_optim_step(train_optim *o, const train_backend *be, float lr)
{
    o->t++;
    float c1 = 1.0f - powf(o->beta1, (float)o->t), c2 = 1.0f - powf(o->beta2, (float)o->t);
    for (int i = 0; i < o->n; i++) {
        train_param *p = o->params[i];
        if (o->type == TRAIN_SGD)
            be->sgd(p->n, lr, o->momentum, p->w, p->g, o->m[i]);
        else
            be->adam(p->n, lr, o->beta1, o->beta2, o->eps, c1, c2, p->w, p->g, o->m[i], o->v[i]);
    }
}

void train_schedule_init(train_schedule *s, const json_t *j)
{
    memset(s, 0, sizeof *s);
    s->gamma = 0.1f;
    if (!j) return;
    const char *t = json_string_value(json_object_get(j, "type"));
    s->type = !t || !strcmp(t, "constant") ? TRAIN_SCHED_CONSTANT : !strcmp(t, "step") ? TRAIN_SCHED_STEP : TRAIN_SCHED_COSINE;
    json_t *v;
    if ((v = json_object_get(j, "warmup_steps"))) s->warmup = (long)json_integer_value(v);
    if ((v = json_object_get(j, "step_size"))) s->step_size = (long)json_integer_value(v);
    s->gamma = num(j, "gamma", 0.1);
    s->min_lr = num(j, "min_lr", 0.0);
}

float train_schedule_lr(const train_schedule *s, float base, long step, long total)
{
    if (s->warmup > 0 && step < s->warmup) return base * (float)(step + 1) / (float)s->warmup;
    long t = step - s->warmup, span = total - s->warmup;
    switch (s->type) {
    case TRAIN_SCHED_STEP:
        return base * powf(s->gamma, (float)(t / (s->step_size > 0 ? s->step_size : 1)));
    case TRAIN_SCHED_COSINE:
        if (span <= 0 || t >= span) return s->min_lr;
        return s->min_lr + 0.5f * (base - s->min_lr) * (1.0f + cosf((float)M_PI * (float)t / (float)span));
    default:
        return base;
    }
}
