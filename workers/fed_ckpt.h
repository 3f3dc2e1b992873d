/* fed_ckpt.h - a federated job's global model, checkpointed on the worker that runs one of its sites after every
 * round (docs/federated.md, "Restarts"): <state>/jobs/<job>/fed/global-<worker>.safetensors, the bytes of
 * workers/fed/resume.h (the model's tensors, the round, the values' SHA-256), written aside, fsync'd and renamed
 * (workers/fed_progfile.h), so that a machine that stops at any moment leaves the previous round's file or this
 * one, whole.  One file per worker, even where workers share a state directory: what a worker holds is what it
 * would hold on a host of its own.  Outside the program's sandbox: a site's program cannot change it.  Read back
 * without following a link, and checked (job, rounds, layout, digest) before it is announced. */
#ifndef GANTRY_FED_CKPT_H
#define GANTRY_FED_CKPT_H

#include "workers/executor.h"
#include "workers/fed/resume.h"
#include "workers/fed/tensorfile.h"

#include <stddef.h>

/* z (layout->total values), the global model after round of rounds, as this worker's checkpoint of the job;
 * 0, or -1 with err */
int fed_ckpt_save(exec_ctx *ctx, const tensorfile_header *layout, const double *z, int round, int rounds, char *err, size_t errlen);

/* This worker's checkpoint of the job: 1 with *have and *v (layout->total values, malloc'd) when it has one that
 * fits the job and the model; 0 when it has none, or (why not empty) one that cannot be used, saying why. */
int fed_ckpt_load(exec_ctx *ctx, const tensorfile_header *layout, int rounds, fed_resume_have *have, double **v, char *why,
                  size_t whylen);

#endif
