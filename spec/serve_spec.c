/* serve_spec.c - the inference job's spec (serve_spec.h): its shape, the model it serves (name,
 * name@alias or name@N) checked and resolved, what the server asks of it (serve_job_spec). */
#include "spec/serve_spec.h"
#include "common/fielderr.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/schema.h"
#include "common/utf8.h"

/* ---- the shape (schema.h): validation, defaults and the API document ---- */

static const sch model_s = {SCH_STR, SCH_IN(1, 200),
                            .desc = "a registered model: its name (the latest version), name@N (version N) or name@alias "
                                    "(the version the alias names; the replicas follow when it moves)",
                            .msg = "required: a registered model's name, name@N or name@alias (1 to 200 characters)"};
static const sch version_s = {SCH_INT, SCH_IN(1, 1000000000), .desc = "the model version to serve; absent: the latest",
                              .msg = "must be a positive integer (default: the latest version)"};
static const sch latency_s = {SCH_NUM, SCH_IN_LO_OPEN(0, 3600000), .dflt = "100", .desc = "the latency objective, milliseconds",
                              .msg = "must be a positive number of milliseconds"};
static const sch percentile_s = {SCH_NUM, SCH_IN_HI_OPEN(50, 100), .dflt = "99",
                                 .desc = "the share of requests (percent) that must meet latency_ms",
                                 .msg = "must be a number in [50, 100), e.g. 99"};
static const sch_member slo_m[] = {{"latency_ms", &latency_s, 0}, {"percentile", &percentile_s, 0}, {0}};
static const sch slo_s = {SCH_OBJECT, .members = slo_m, .desc = "the latency objective the autoscaler keeps",
                          .msg = "must be an object {latency_ms, percentile}"};
static const sch replica_count_s = {SCH_INT, SCH_IN(1, SERVE_MAX_REPLICAS)};
static const sch replica_min_s = {SCH_INT, SCH_IN(0, SERVE_MAX_REPLICAS), .dflt = "1",
                                  .desc = "0: scale to zero (no replica after idle_s without a request; the next request "
                                          "waits up to cold_start_ms for one)"};
static const sch replica_max_s = {SCH_INT, SCH_IN(1, SERVE_MAX_REPLICAS), .desc = "at least min; absent: min"};
static const sch_member replicas_m[] = {{"min", &replica_min_s, 0}, {"max", &replica_max_s, 0}, {0}};
static const sch replicas_range_s = {SCH_OBJECT, .members = replicas_m, .desc = "the autoscaler's range"};
static const sch *const replicas_alts[] = {&replica_count_s, &replicas_range_s, NULL};
static const sch replicas_s = {SCH_ONEOF, .alts = replicas_alts, .desc = "a fixed number of replicas, or {min, max} to autoscale",
                               .msg = "must be an integer in [1, 64] or {\"min\",\"max\"}"};
static const sch weight_s = {SCH_NUM, SCH_IN_LO_OPEN(0, 1000), .dflt = "1",
                             .desc = "the job's weight when the autoscaler shares the cluster",
                             .msg = "must be a positive number (at most 1000)"};
static const sch max_batch_s = {SCH_INT, SCH_IN(1, SERVE_MAX_SAMPLES), .dflt = "32", .desc = "samples per batch at most"};
static const sch batch_delay_s = {SCH_INT, SCH_IN(0, 1000), .dflt = "2",
                                  .desc = "how long a replica waits to fill a batch under load, ms"};
static const sch queue_limit_s = {SCH_INT, SCH_IN(1, 1000000), .dflt = "1000", .desc = "queued requests at most; beyond: 429"};
static const sch timeout_s = {SCH_INT, SCH_IN(1, 600000), .dflt = "5000", .desc = "a request's deadline, ms; beyond: 504"};
static const sch idle_s = {SCH_INT, SCH_IN(1, 86400), .dflt = "300",
                           .desc = "with replicas.min 0: seconds without a request after which the job's replicas are released"};
static const sch cold_start_s = {SCH_INT, SCH_IN(1, 600000), .dflt = "60000",
                                 .desc = "with replicas.min 0: how long a request waits for a replica to start when the job "
                                         "has none, ms; beyond: 503 with Retry-After"};
static const sch service_s = {SCH_NUM, SCH_IN_LO_OPEN(0, 600000),
                              .desc = "a hint of the processing time per request, ms, until the replicas have measured it"};
static const sch resolved_s = {SCH_OBJECT, .flags = SCH_OPEN, .desc = "set by the server: the model version resolved at submission",
                               .msg = "is set by the server"};
static const sch_member spec_m[] = {{"model", &model_s, 1},
                                    {"version", &version_s, 0},
                                    {"slo", &slo_s, 0},
                                    {"replicas", &replicas_s, 0},
                                    {"weight", &weight_s, 0},
                                    {"max_batch", &max_batch_s, 0},
                                    {"batch_delay_ms", &batch_delay_s, 0},
                                    {"queue_limit", &queue_limit_s, 0},
                                    {"timeout_ms", &timeout_s, 0},
                                    {"service_ms", &service_s, 0},
                                    {"idle_s", &idle_s, 0},
                                    {"cold_start_ms", &cold_start_s, 0},
                                    {JOB_SPEC_RESOLVED, &resolved_s, 0},
                                    {0}};
const sch serve_spec_shape = {SCH_OBJECT, .members = spec_m,
                              .desc = "An inference job: serve a registered model under a latency objective "
                                      "(Open Inference Protocol v2 at /v2/models/{model}/infer). See docs/inference.md."};

int serve_spec_validate(const json_t *spec, char *field, size_t fl, char *msg, size_t ml)
{
    if (sch_check(&serve_spec_shape, spec, "spec", field, fl, msg, ml)) return -1;
    json_t *rep = json_object_get(spec, "replicas"), *mn = json_object_get(rep, "min"), *mx = json_object_get(rep, "max");
    if (mn && mx && json_integer_value(mx) < json_integer_value(mn)) {
        snprintf(field, fl, "spec.replicas.max");
        snprintf(msg, ml, "must not be below replicas.min");
        return -1;
    }
    if (mn && json_integer_value(mn) == 0 && !mx) {
        snprintf(field, fl, "spec.replicas.max");
        snprintf(msg, ml, "is required with replicas.min 0 (scale to zero): the most replicas the job may grow to");
        return -1;
    }
    return 0;
}

void serve_settings_get(const json_t *spec, serve_settings *s)
{
    const sch *slo_shape = sch_member_shape(&serve_spec_shape, "slo");
    json_t *slo = json_object_get(spec, "slo"), *rep = json_object_get(spec, "replicas"),
           *res = json_object_get(spec, JOB_SPEC_RESOLVED);
    /* the bare name (spec.model may be name@alias): what replies and events call the model */
    s->model = json_string_value(json_object_get(res, "name"));
    if (!s->model) s->model = json_string_value(json_object_get(spec, "model"));
    s->version = (int)sch_number(&resolved_s, res, "version", sch_number(&serve_spec_shape, spec, "version", 1));
    s->slo_ms = sch_number(slo_shape, slo, "latency_ms", 0);
    s->slo_q = sch_number(slo_shape, slo, "percentile", 0) / 100.0;
    s->min_replicas = json_is_integer(rep) ? (int)json_integer_value(rep) : (int)sch_number(&replicas_range_s, rep, "min", 0);
    s->max_replicas = json_is_integer(rep) ? s->min_replicas : (int)sch_number(&replicas_range_s, rep, "max", s->min_replicas);
    if (s->max_replicas < s->min_replicas) s->max_replicas = s->min_replicas;
    s->weight = sch_number(&serve_spec_shape, spec, "weight", 0);
    s->max_batch = (int)sch_number(&serve_spec_shape, spec, "max_batch", 0);
    s->batch_delay_ms = (int)sch_number(&serve_spec_shape, spec, "batch_delay_ms", 0);
    s->queue_limit = (int)sch_number(&serve_spec_shape, spec, "queue_limit", 0);
    s->timeout_ms = (int)sch_number(&serve_spec_shape, spec, "timeout_ms", 0);
    s->service_ms = sch_number(&serve_spec_shape, spec, "service_ms", 0);
    s->idle_s = (int)sch_number(&serve_spec_shape, spec, "idle_s", 0);
    s->cold_start_ms = (int)sch_number(&serve_spec_shape, spec, "cold_start_ms", 0);
}

int serve_model_ref(const char *ref, char *name, size_t nl, char *alias, size_t al, int *version)
{
    name[0] = alias[0] = '\0';
    *version = 0;
    const char *at = ref ? strrchr(ref, '@') : NULL;
    if (!ref || !*ref || at == ref) return -1;
    size_t n = at ? (size_t)(at - ref) : strlen(ref);
    if (n >= nl) return -1;
    memcpy(name, ref, n);
    name[n] = '\0';
    if (!at) return 0;
    const char *tail = at + 1;
    if (*tail >= '1' && *tail <= '9' && strspn(tail, "0123456789") == strlen(tail) && strlen(tail) <= 9) {
        *version = atoi(tail);
        return 0;
    }
    return serve_alias_valid(tail) && strlen(tail) < al ? (snprintf(alias, al, "%s", tail), 0) : -1;
}

bool serve_alias_valid(const char *alias)
{
    size_t n = alias ? strlen(alias) : 0;
    if (n < 1 || n > SERVE_ALIAS_MAX || !((alias[0] >= 'a' && alias[0] <= 'z') || (alias[0] >= 'A' && alias[0] <= 'Z')))
        return false;
    return strspn(alias, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-") == n;
}

/* ---- what the server asks of an inference spec (common/jobtypes.h) ---- */

static int admit(const json_t *spec, char *field, size_t fl, char *msg, size_t ml)
{
    if (utf8_has_control(json_string_value(json_object_get(spec, "model")))) /* printed by the dashboard and the CLI */
        return field_fail(field, fl, msg, ml, "spec.model", "%s", JOB_NO_CONTROL_MSG);
    if (json_object_get(spec, JOB_SPEC_RESOLVED))
        return field_fail(field, fl, msg, ml, "spec." JOB_SPEC_RESOLVED, "%s", resolved_s.msg);
    char name[201], alias[SERVE_ALIAS_MAX + 1];
    int version;
    const char *model = json_string_value(json_object_get(spec, "model"));
    if (strchr(model, '@') && serve_model_ref(model, name, sizeof(name), alias, sizeof(alias), &version) != 0)
        return field_fail(field, fl, msg, ml, "spec.model",
                          "after '@' give a version number (name@3) or an alias: a letter, then letters, digits, _ or - "
                          "(name@production)");
    if (strchr(model, '@') && json_object_get(spec, "version"))
        return field_fail(field, fl, msg, ml, "spec.version",
                          "give the version either here or in spec.model (name@N or name@alias), not both");
    return 0;
}

/* the replicas start together; the autoscaler adds more.  A job that scales to zero starts with one (its
 * model checked loadable, the first requests served warm) and releases it after idle_s */
static int slots(const json_t *spec)
{
    serve_settings s;
    serve_settings_get(spec, &s);
    return s.min_replicas > 0 ? s.min_replicas : 1;
}

/* the model to serve, resolved to one version at submission */
static int model(const json_t *spec, job_model_ref *out)
{
    json_t *version = json_object_get(spec, "version");
    out->model = json_string_value(json_object_get(spec, "model")); /* may be name@N or name@alias (serve_model_ref) */
    out->version = version ? (int)json_integer_value(version) : 0;
    out->field = version ? "spec.version" : "spec.model";
    return 1;
}

const job_spec serve_job_spec = {
    .shape = &serve_spec_shape, .validate = serve_spec_validate, .admit = admit, .slots = slots, .model = model};
