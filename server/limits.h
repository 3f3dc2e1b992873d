/* limits.h - per-tenant job limits (issue 16): max_runtime_s, max_epochs, max_steps and
 * max_memory_bytes, columns of the tenants table (migrations/0005_tenant_limits.sql) that an
 * admin sets with POST/PATCH /v1/tenants and everyone reads in GET /v1/tenants and /v1/whoami.
 *
 * Epochs and steps are checked here, when a job is submitted (400 naming the spec's field), and so
 * is the memory a program job's ranks ask for (spec.resources.memory_mb against max_memory_bytes).
 * Runtime and memory travel with the task (wire/msg.h) and the worker enforces them
 * (workers/main.c; a program's ranks: their cgroup, capped at max_memory_bytes): a job over either
 * fails with the reason.  Defaults and what each limit
 * means: docs/operations.md, "Tenant limits".  Pure: the columns are read and written by
 * tenants.h (tenants_limits, tenants_set_limits). */
#ifndef GANTRY_LIMITS_H
#define GANTRY_LIMITS_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "wire/msg.h"

typedef enum { LIMIT_RUNTIME, LIMIT_EPOCHS, LIMIT_STEPS, LIMIT_MEMORY, LIMIT_COUNT } limit_kind;

/* the API field (and column) of each limit: max_runtime_s, max_epochs, max_steps, max_memory_bytes */
extern const char *const limit_names[LIMIT_COUNT];

typedef struct {
    long long v[LIMIT_COUNT]; /* < 0: no limit */
} tenant_limits;

typedef struct {
    bool set[LIMIT_COUNT];    /* named in the request */
    long long v[LIMIT_COUNT]; /* < 0: null, no limit */
} limits_patch;

/* The limits a request body names: an integer in the limit's range, or null for none.
 * 0, or -1 with the field and a message for a 400. */
int limits_parse(const json_t *body, limits_patch *p, char *field, size_t field_len, char *msg, size_t msg_len);
/* sets the four members on obj, null for no limit */
void limits_to_json(const tenant_limits *l, json_t *obj);
/* A (valid) spec that asks for more epochs, steps or memory than the tenant allows: -1 with the
 * field (spec.epochs, spec.steps, spec.rounds, spec.resources.memory_mb) and a message naming the
 * limit; else 0. */
int limits_check_spec(const tenant_limits *l, const char *type, const json_t *spec, char *field, size_t field_len, char *msg,
                      size_t msg_len);
/* the limits a worker enforces, into the task it runs */
void limits_to_task(const tenant_limits *l, task_msg *t);

#endif
