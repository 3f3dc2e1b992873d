/* optim.c - optimizers update every parameter through the backend; the
 * schedule is a pure function of (step, total) so a resumed run continues on
 * exactly the same learning-rate curve. */
#include "workers/train/optim.h"

#include "common/alloc.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* a member's value or the default its shape documents */
static float num(const sch *shape, const json_t *o, const char *key)
{
    return (float)sch_number(shape, o, key, 0);
}

train_optim *train_optim_create(const json_t *j, train_model *model)
{
    train_optim *o = xcalloc(1, sizeof *o);
    o->type = !strcmp(json_string_value(json_object_get(j, "type")), "adam") ? TRAIN_ADAM : TRAIN_SGD;
    o->lr = num(&train_sgd_shape, j, "lr");
    o->momentum = num(&train_sgd_shape, j, "momentum");
    o->beta1 = num(&train_adam_shape, j, "beta1");
    o->beta2 = num(&train_adam_shape, j, "beta2");
    o->eps = num(&train_adam_shape, j, "eps");
    o->n = model->nparams;
    o->params = model->params;
    o->m = xcalloc((size_t)o->n, sizeof *o->m);
    o->v = xcalloc((size_t)o->n, sizeof *o->v);
    for (int i = 0; i < o->n; i++) { /* the backend's memory (a GPU's) may run out */
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
    const char *t = json_string_value(json_object_get(j, "type"));
    s->type = !t || !strcmp(t, "constant") ? TRAIN_SCHED_CONSTANT : !strcmp(t, "step") ? TRAIN_SCHED_STEP : TRAIN_SCHED_COSINE;
    s->warmup = (long)sch_number(&train_schedule_shape, j, "warmup_steps", 0);
    s->step_size = (long)sch_number(&train_schedule_shape, j, "step_size", 0);
    s->gamma = num(&train_schedule_shape, j, "gamma");
    s->min_lr = num(&train_schedule_shape, j, "min_lr");
}

float train_schedule_lr(const train_schedule *s, float base, long step, long total)
{
    if (s->warmup > 0 && step < s->warmup) return base * (float)(step + 1) / (float)s->warmup;
    long t = step - s->warmup, span = total - s->warmup;
    switch (s->type) {
    case TRAIN_SCHED_STEP: {
        long steps = t / (s->step_size > 0 ? s->step_size : 1); /* whole steps: the rate drops in stairs */
        return base * powf(s->gamma, (float)steps);
    }
    case TRAIN_SCHED_COSINE:
        if (span <= 0 || t >= span) return s->min_lr;
        return s->min_lr + 0.5f * (base - s->min_lr) * (1.0f + cosf((float)M_PI * (float)t / (float)span));
    default:
        return base;
    }
}
