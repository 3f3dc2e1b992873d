/* spec.h - validation of a job submission {"type","name","priority","preemptible","spec"}.
 * Each type's spec is checked by its spec module, found in the job type table
 * (common/jobtypes.h): a jansson-only library beside the code that runs the type
 * (spec/place_spec.h, spec/train_spec.h, spec/serve_spec.h,
 * spec/fed_spec.h), so that the server validates exactly what the worker will
 * accept without linking the worker's code. */
#ifndef GANTRY_SPEC_H
#define GANTRY_SPEC_H

#include <jansson.h>
#include <stddef.h>

#include "common/jobtypes.h"
#include "server/jobs.h"

/* 0 and fills type, name, priority, slots, spec (borrowed from body); or -1 with the field path and a message */
int spec_validate_job(json_t *body, job_new *out, char *field, size_t field_len, char *msg, size_t msg_len);

/* components.schemas of the API document: JobSubmission and each type's spec
 * schema, written from the shapes the validation above uses (new reference) */
json_t *spec_job_schemas(void);

/* Paths a spec names (training datasets, a program's workdir: a directory) must resolve under the
 * tenant's roots (a JSON array); 0, or -1 with the field and the reason. */
int spec_confine_paths(const json_t *spec, const char *type, const json_t *roots, char *field, size_t field_len, char *msg,
                       size_t msg_len);

/* the spec module of a type in the table, or NULL */
const job_spec *spec_module(const char *type);

#endif
