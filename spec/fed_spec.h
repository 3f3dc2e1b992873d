/* fed_spec.h - the federated job's spec module (validated by the server, read by the sites); jansson
 * and the training spec module only (fed_spec_dep).
 *
 *   {"model": {...}, "optimizer": {...}, "batch_size": 32, "local_steps": 50, "rounds": 10, "seed": 1,
 *    "sites": [{"name": "a", "label": "site=a", "dataset": DATASET}, ...],   3 to 64 sites, names unique
 *    "test": DATASET (optional: the first site's test set),
 *    "aggregation": "securedfl" | "fedavg",
 *    "admm": {"iterations": 7, "rho": 0.1, "decay": 0.9, "decay_every": 2},
 *    "masking": true, "exchange_timeout_s": 120, "threshold": T}
 *
 * DATASET is a training dataset (workers/train/train.h), and the built-in one may be split:
 * {"name": "fashion-mnist", "partition": {"sites": 9, "index": 2, "alpha": 0.5, "seed": 1}}
 * (partition.h: that site's part of a Dirichlet label-skew split; the test set whole).
 * A site with a label ("site=NAME") runs on a worker started with --labels site=NAME;
 * a site without one on any free worker, one site per worker.  Without masking the
 * iterations are capped at the design's P (a site would see a peer's message
 * twice, which reveals its model): the spec is refused beyond.
 *
 * The program variant (spec.program: docs/federated.md, "Your own PyTorch model"): each site runs the team's
 * own program, sandboxed as a program job's rank (spec/program_spec.h), instead of gantry's layer list:
 *
 *   {"program": {"command": [...], "workdir": "...", "env": {...}},   as a program job's (spec.program)
 *    "resources": {...}, "max_runtime_s": 3600, "grace_s": 30,          as a program job's, per site
 *    "rounds": 10, "update_timeout_s": 3600,
 *    "sites": [{"name": "a", "label": "site=a", "env": {"DATA": "..."}}, ...],   env: the site's own variables
 *    "aggregation", "admm", "masking", "exchange_timeout_s", "threshold": as above}
 *
 * The built-in members (model, optimizer, batch_size, local_steps, seed, test, a site's dataset) are refused
 * by name; each site's program spec (fed_site_program_spec) is validated by the program module, so its
 * errors name spec.program... and spec.resources... as a program job's do. */
#ifndef GANTRY_FED_SPEC_H
#define GANTRY_FED_SPEC_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "common/jobtypes.h"
#include "common/schema.h"

#define FED_MAX_JOB_SITES 64

/* the built-in variant's shape and the program variant's (the API document has both), the admm and partition
 * members' (their defaults) */
extern const sch fed_spec_shape, fed_program_spec_shape, fed_admm_shape, fed_partition_shape;

typedef enum { FED_BUILTIN, FED_PROGRAM } fed_variant;
/* which variant a spec is: FED_PROGRAM when it has "program" */
fed_variant fed_spec_variant(const json_t *spec);
/* whether a (valid) spec aggregates by SecureD-FL's ADMM: "aggregation": "securedfl", or no "aggregation" but an
 * "admm" (a spec written when securedfl was the default keeps its meaning); otherwise FedAvg, the default: every
 * sum is masked over all sites, so ADMM's iterations reveal no less than FedAvg's one sum and reach its model
 * (docs/federated.md, "Which aggregation") */
bool fed_spec_securedfl(const json_t *spec);

int fed_spec_validate(const json_t *spec, char *field, size_t fl, char *msg, size_t ml);

/* The dropouts' mode (docs/federated.md, "Dropouts"; workers/fed/secagg_drop.h): a FedAvg round completes when t of
 * the n sites deliver.  The default t for n sites: ceil(2n/3), and more than n/2 (two views of one round could
 * otherwise collect both kinds of shares of a site), and at least 3 when n >= 3 (a sum of two inputs tells each the
 * other's): 3 of 3, 3 of 4, 4 of 5, 6 of 9, 10 of 15.  check: 0 when t is within those bounds (and at most n), else
 * -1.  fed_spec_threshold: the t of a valid spec (spec.threshold, else the default; n for securedfl). */
int fed_drop_threshold_default(int n);
int fed_drop_threshold_check(int n, int t);
int fed_spec_threshold(const json_t *spec);
/* the training spec of site s's local steps (new reference): model, optimizer, its dataset, batch_size, seed */
json_t *fed_site_train_spec(const json_t *spec, int s);
/* the program variant: the program job spec site s runs (new reference; spec/program_spec.h): program (its env with
 * the site's env added), resources, max_runtime_s, grace_s, max_restarts 0 (the federated job's generation is
 * retried as a whole) */
json_t *fed_site_program_spec(const json_t *spec, int s);

/* the federated row's spec module (common/jobtypes.h): the sites' names and labels without control
 * characters, a slot per site, every site's dataset paths, rounds x local_steps against max_steps */
extern const job_spec fed_job_spec;

#endif
