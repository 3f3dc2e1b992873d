#include "workers/serve/spec.h"

#include <stdio.h>
#include <string.h>

static int bad(char *field, size_t fl, char *msg, size_t ml, const char *f, const char *m)
{
    snprintf(field, fl, "%s", f);
    snprintf(msg, ml, "%s", m);
    return -1;
}

/* absent, or an integer in [lo, hi] */
static int int_in(const json_t *o, const char *key, long lo, long hi)
{
    json_t *v = json_object_get(o, key);
    return !v || (json_is_integer(v) && json_integer_value(v) >= lo && json_integer_value(v) <= hi) ? 0 : -1;
}

int serve_spec_validate(const json_t *spec, char *field, size_t fl, char *msg, size_t ml)
{
    if (!json_is_object(spec)) return bad(field, fl, msg, ml, "spec", "must be an object");
    json_t *model = json_object_get(spec, "model");
    if (!json_is_string(model) || json_string_length(model) == 0 || json_string_length(model) > 200)
        return bad(field, fl, msg, ml, "spec.model", "required: the name of a registered model (1 to 200 characters)");
    if (int_in(spec, "version", 1, 1000000000L))
        return bad(field, fl, msg, ml, "spec.version", "must be a positive integer (default: the latest version)");
    json_t *slo = json_object_get(spec, "slo");
    if (slo && !json_is_object(slo)) return bad(field, fl, msg, ml, "spec.slo", "must be an object {latency_ms, percentile}");
    json_t *lat = json_object_get(slo, "latency_ms"), *pct = json_object_get(slo, "percentile");
    if (lat && (!json_is_number(lat) || !(json_number_value(lat) > 0) || json_number_value(lat) > 3600000))
        return bad(field, fl, msg, ml, "spec.slo.latency_ms", "must be a positive number of milliseconds");
    if (pct && (!json_is_number(pct) || !(json_number_value(pct) >= 50) || !(json_number_value(pct) < 100)))
        return bad(field, fl, msg, ml, "spec.slo.percentile", "must be a number in [50, 100), e.g. 99");
    json_t *rep = json_object_get(spec, "replicas");
    if (json_is_object(rep)) {
        if (int_in(rep, "min", 1, SERVE_MAX_REPLICAS))
            return bad(field, fl, msg, ml, "spec.replicas.min", "must be an integer in [1, 64]");
        if (int_in(rep, "max", 1, SERVE_MAX_REPLICAS))
            return bad(field, fl, msg, ml, "spec.replicas.max", "must be an integer in [1, 64]");
        json_t *mn = json_object_get(rep, "min"), *mx = json_object_get(rep, "max");
        if (mn && mx && json_integer_value(mx) < json_integer_value(mn))
            return bad(field, fl, msg, ml, "spec.replicas.max", "must not be below replicas.min");
    } else if (rep && (!json_is_integer(rep) || json_integer_value(rep) < 1 || json_integer_value(rep) > SERVE_MAX_REPLICAS)) {
        return bad(field, fl, msg, ml, "spec.replicas", "must be an integer in [1, 64] or {\"min\",\"max\"}");
    }
    json_t *w = json_object_get(spec, "weight");
    if (w && (!json_is_number(w) || !(json_number_value(w) > 0) || json_number_value(w) > 1000))
        return bad(field, fl, msg, ml, "spec.weight", "must be a positive number (at most 1000)");
    if (int_in(spec, "max_batch", 1, SERVE_MAX_SAMPLES))
        return bad(field, fl, msg, ml, "spec.max_batch", "must be an integer in [1, 1024]");
    if (int_in(spec, "batch_delay_ms", 0, 1000))
        return bad(field, fl, msg, ml, "spec.batch_delay_ms", "must be an integer in [0, 1000]");
    if (int_in(spec, "queue_limit", 1, 1000000))
        return bad(field, fl, msg, ml, "spec.queue_limit", "must be an integer in [1, 1000000]");
    if (int_in(spec, "timeout_ms", 1, 600000))
        return bad(field, fl, msg, ml, "spec.timeout_ms", "must be an integer in [1, 600000]");
    if (json_object_get(spec, "resolved") && !json_is_object(json_object_get(spec, "resolved")))
        return bad(field, fl, msg, ml, "spec.resolved", "is set by the server");
    return 0;
}

static double num(const json_t *o, const char *key, double def)
{
    json_t *v = json_object_get(o, key);
    return json_is_number(v) ? json_number_value(v) : def;
}

void serve_settings_get(const json_t *spec, serve_settings *s)
{
    json_t *slo = json_object_get(spec, "slo"), *rep = json_object_get(spec, "replicas"), *res = json_object_get(spec, "resolved");
    s->model = json_string_value(json_object_get(spec, "model"));
    s->version = (int)num(res, "version", num(spec, "version", 1));
    s->slo_ms = num(slo, "latency_ms", 100);
    s->slo_q = num(slo, "percentile", 99) / 100.0;
    s->min_replicas = json_is_integer(rep) ? (int)json_integer_value(rep) : (int)num(rep, "min", 1);
    s->max_replicas = json_is_integer(rep) ? s->min_replicas : (int)num(rep, "max", s->min_replicas);
    if (s->max_replicas < s->min_replicas) s->max_replicas = s->min_replicas;
    s->weight = num(spec, "weight", 1);
    s->max_batch = (int)num(spec, "max_batch", 32);
    s->batch_delay_ms = (int)num(spec, "batch_delay_ms", 2);
    s->queue_limit = (int)num(spec, "queue_limit", 1000);
    s->timeout_ms = (int)num(spec, "timeout_ms", 5000);
}
