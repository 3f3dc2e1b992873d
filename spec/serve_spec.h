/* serve_spec.h - the inference job spec (see workers/serve/serve.h for the whole format): validation
 * naming the field, and the settings with their defaults.  No dependencies but
 * jansson, so the server and the scheduler link it without the model code. */
#ifndef GANTRY_SERVE_SPEC_H
#define GANTRY_SERVE_SPEC_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "common/jobtypes.h"
#include "common/schema.h"

#define SERVE_MAX_REPLICAS 64
#define SERVE_MAX_SAMPLES 1024 /* samples in one request, and max_batch */

/* the spec's shape (its JSON Schema is in the API document) */
extern const sch serve_spec_shape;

/* 0 when valid; else -1 with the field (e.g. "spec.slo.latency_ms") and a message */
int serve_spec_validate(const json_t *spec, char *field, size_t field_len, char *msg, size_t msg_len);

/* settings with their defaults applied */
typedef struct {
    const char *model;
    int version;
    double slo_ms, slo_q; /* q in (0,1), e.g. 0.99 */
    int min_replicas, max_replicas, max_batch, batch_delay_ms, queue_limit, timeout_ms;
    double weight;
    double service_ms; /* the spec's hint of the processing time per request; 0: none (measured) */
    int idle_s;        /* min_replicas 0: released after this long without a request */
    int cold_start_ms; /* min_replicas 0: a request's wait for a replica when there is none; beyond: 503 */
} serve_settings;
void serve_settings_get(const json_t *spec, serve_settings *out);

/* An inference spec's model reference: "name" (the latest version), "name@N" (version N) or
 * "name@alias" (split at the last '@').  0 with the parts (alias "" and *version 0 when absent),
 * -1 when it is malformed or a part does not fit. */
#define SERVE_ALIAS_MAX 64
int serve_model_ref(const char *ref, char *name, size_t name_len, char *alias, size_t alias_len, int *version);
/* an alias: a letter, then up to 63 letters, digits, '_' or '-' ("production", "staging-2") */
bool serve_alias_valid(const char *alias);

/* the inference row's spec module (common/jobtypes.h): the model's name without control characters,
 * spec.resolved set by the server only (the model version resolved at submission), min replicas
 * as the slots */
extern const job_spec serve_job_spec;

#endif
