/* api_infer.c - the Open Inference Protocol v2 endpoints, scoped to the caller's
 * tenant: model metadata and readiness from the registry and the jobs table,
 * predictions through the inference gateway (server/infer.h). */
#include "server/api.h"
#include "server/infer.h"
#include "server/jobs.h"
#include "server/models.h"
#include "server/server.h"
#include "spec/serve_spec.h"

#include <stdio.h>
#include <string.h>

/* the live job serving {name} for the caller's tenant, or an error reply (NULL) */
static json_t *serving(http_ctx *c, const char *name)
{
    json_t *job = jobs_serving(c->srv->db, c->auth.tenant_id, name);
    if (!job) {
        json_t *m = models_get_json(c->srv->db, c->auth.tenant_id, name);
        http_error(c, GERR_NOT_FOUND, "name",
                   m ? "model '%s' is registered but no inference job serves it (submit one)" : "no model '%s' in your registry",
                   name);
        json_decref(m);
    }
    return job;
}

void api_infer_ready(http_ctx *c)
{
    const char *name = http_param(c, 0);
    json_t *job = serving(c, name);
    if (!job) return;
    const char *state = json_string_value(json_object_get(job, "state")), *id = json_string_value(json_object_get(job, "id"));
    /* running is not enough: a replica's process loads the model first (seconds for a large one) */
    int ready = strcmp(state, "running") == 0 && jobs_replica_loaded(c->srv->db, id);
    json_t *o = json_pack("{s:s, s:b, s:s, s:s}", "name", name, "ready", ready, "job_id", id, "state", state);
    json_decref(job);
    if (!ready) http_add_header(c, "retry-after", "1");
    http_reply_json(c, ready ? 200 : 503, o);
}

void api_infer_metadata(http_ctx *c)
{
    const char *name = http_param(c, 0);
    json_t *m = models_get_json(c->srv->db, c->auth.tenant_id, name);
    if (!m) {
        http_error(c, GERR_NOT_FOUND, "name", "no model '%s' in your registry", name);
        return;
    }
    /* the version a live job serves (its alias may have moved), else the latest */
    json_t *job = jobs_serving(c->srv->db, c->auth.tenant_id, name), *versions = json_array(),
           *shown = json_array_get(json_object_get(m, "versions"), 0);
    json_int_t served = json_integer_value(json_object_get(json_object_get(json_object_get(job, "spec"), "resolved"), "version"));
    size_t i;
    json_t *v;
    json_array_foreach(json_object_get(m, "versions"), i, v)
    {
        json_array_append_new(versions, json_sprintf("%lld", (long long)json_integer_value(json_object_get(v, "version"))));
        if (json_integer_value(json_object_get(v, "version")) == served) shown = v;
    }
    json_decref(job);
    json_t *o, *sig = json_object_get(shown, "signature");
    if (json_is_object(sig)) { /* an uploaded TorchScript model: what its metadata declared */
        char ver[24];
        snprintf(ver, sizeof(ver), "%lld", (long long)json_integer_value(json_object_get(shown, "version")));
        o = json_pack("{s:s, s:o, s:s, s:s, s:O, s:O}", "name", name, "versions", versions, "version", ver, "platform",
                      "pytorch_torchscript", "inputs", json_object_get(sig, "inputs"), "outputs", json_object_get(sig, "outputs"));
    } else {
        json_t *input = json_object_get(json_object_get(shown, "architecture"), "input");
        json_t *shape = json_array();
        json_array_append_new(shape, json_integer(-1));
        json_array_foreach(input, i, v) json_array_append(shape, v);
        o = json_pack("{s:s, s:o, s:s, s:[{s:s, s:s, s:o}], s:[{s:s, s:s, s:[i,i]}, {s:s, s:s, s:[i]}]}", "name", name, "versions",
                      versions, "platform", "gantry", "inputs", "name", "input", "datatype", "FP32", "shape", shape, "outputs",
                      "name", "probabilities", "datatype", "FP32", "shape", -1, -1, "name", "label", "datatype", "INT64", "shape",
                      -1);
    }
    json_decref(m);
    http_reply_json(c, 200, o);
}

void api_infer(http_ctx *c)
{
    const char *name = http_param(c, 0);
    const infer_target *cached = infer_cached(c->srv->infer, c->auth.tenant_id, name);
    if (cached) {
        infer_forward(c->srv->infer, c, cached, c->req->entity.base, c->req->entity.len);
        return;
    }
    json_t *job = serving(c, name);
    if (!job) return;
    if (strcmp(json_string_value(json_object_get(job, "state")), "running") != 0) {
        http_add_header(c, "retry-after", "1");
        http_error(c, GERR_UNAVAILABLE, NULL, "model '%s' is not ready: its inference job %s is %s", name,
                   json_string_value(json_object_get(job, "id")), json_string_value(json_object_get(job, "state")));
        json_decref(job);
        return;
    }
    serve_settings s;
    serve_settings_get(json_object_get(job, "spec"), &s);
    infer_target t = {.queue_limit = s.queue_limit,
                      .timeout_ms = s.timeout_ms,
                      .cold_start_ms = s.min_replicas == 0 ? s.cold_start_ms : 0,
                      .slo_ms = s.slo_ms,
                      .slo_q = s.slo_q};
    snprintf(t.job_id, sizeof(t.job_id), "%s", json_string_value(json_object_get(job, "id")));
    snprintf(t.tenant, sizeof(t.tenant), "%s", c->auth.tenant_id);
    json_decref(job);
    infer_cache_put(c->srv->infer, c->auth.tenant_id, name, &t);
    infer_forward(c->srv->infer, c, &t, c->req->entity.base, c->req->entity.len);
}
