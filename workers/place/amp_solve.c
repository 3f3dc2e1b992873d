/* amp_solve.c - the strategy search's result as JSON: the problem parsed
 * (spec/amp_problem.c), searched (amp.c) and timed; {"best", "strategies", "metrics"}. */
#include "workers/place/amp.h"

#include "common/clock.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

static json_t *ms(double x)
{
    return json_real(round(x * 1000.0) / 1000.0);
}

static json_t *stages_json(const amp_problem *p, const amp_strategy *s)
{
    json_t *a = json_array();
    for (int k = 0; k < s->pp; k++) {
        int end = k + 1 < s->pp ? s->first[k + 1] : p->n_layers;
        json_array_append_new(a, json_pack("{s:s,s:s,s:i,s:o,s:f,s:I}", "first_layer", p->layers[s->first[k]].name, "last_layer",
                                           p->layers[end - 1].name, "layers", end - s->first[k], "time_ms", ms(s->stage_ms[k]),
                                           "speed", s->speed[k], "memory_bytes", (json_int_t)ceil(s->memory[k])));
    }
    return a;
}

static void label(const amp_strategy *s, char *buf, size_t len)
{
    snprintf(buf, len, "mp%d-dp%d-pp%d-mbs%d", s->mp, s->dp, s->pp, s->mbs);
}

static json_t *strategy_json(const amp_problem *p, const amp_strategy *s)
{
    char name[64];
    label(s, name, sizeof name);
    json_t *cuts = json_array();
    for (int k = 1; k < s->pp; k++)
        json_array_append_new(cuts, json_integer(s->first[k]));
    json_t *o =
        json_pack("{s:s,s:i,s:i,s:i,s:i,s:i,s:o,s:o,s:o,s:o,s:o}", "name", name, "mp", s->mp, "dp", s->dp, "pp", s->pp,
                  "micro_batch_size", s->mbs, "micro_batches", s->micro_batches, "iteration_ms", ms(s->iteration_ms), "pipeline_ms",
                  ms(s->pipeline_ms), "allreduce_ms", ms(s->allreduce_ms), "cuts", cuts, "stages", stages_json(p, s));
    if (!s->exact) json_object_set_new(o, "exact", json_false());
    return o;
}

json_t *amp_solve(const json_t *strategy, const char *prefix, char *err, size_t err_len)
{
    char field[160], msg[320];
    amp_problem *p = amp_problem_parse(strategy, prefix, field, sizeof field, msg, sizeof msg);
    if (!p) {
        snprintf(err, err_len, "%s: %s", field, msg);
        return NULL;
    }
    amp_strategy *s = NULL;
    int evaluated, rejected;
    int64_t start = clock_mono_us();
    int n = amp_search(p, &s, &evaluated, &rejected);
    double search_ms = (double)(clock_mono_us() - start) / 1000.0;
    json_t *r = NULL;
    if (n < 0)
        snprintf(err, err_len, "out of memory");
    else if (n == 0 && rejected > 0)
        snprintf(err, err_len,
                 "%s.cluster.gpu_memory_bytes: no strategy fits: each of the %d tried needs more memory on some GPU than it has "
                 "(parameters x state_bytes_per_param, plus the stashed activations of the micro-batches in flight)",
                 prefix, rejected);
    else if (n == 0)
        snprintf(err, err_len,
                 "%s: no strategy fits: global_batch %d is not divisible by any data-parallel degree, or there are fewer layers "
                 "than pipeline stages",
                 prefix, p->global_batch);
    else {
        json_t *list = json_array();
        for (int i = 0; i < n; i++)
            json_array_append_new(list, strategy_json(p, &s[i]));
        char best[64];
        label(&s[0], best, sizeof best);
        r = json_pack("{s:s,s:o,s:{s:o,s:i,s:i,s:i,s:o}}", "best", best, "strategies", list, "metrics", "iteration_ms",
                      ms(s[0].iteration_ms), "gpus", p->nodes * p->gpus_per_node, "evaluated", evaluated, "rejected_memory",
                      rejected, "search_ms", ms(search_ms));
    }
    amp_strategies_free(s, n > 0 ? n : 0);
    amp_problem_free(p);
    return r;
}
