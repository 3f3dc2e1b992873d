/* fed_spec.h - the federated job's spec module (validated by the server, read by the sites); jansson
 * and the training spec module only (fed_spec_dep).
 *
 *   {"model": {...}, "optimizer": {...}, "batch_size": 32, "local_steps": 50, "rounds": 10, "seed": 1,
 *    "sites": [{"name": "a", "label": "site=a", "dataset": DATASET}, ...],   3 to 64 sites, names unique
 *    "test": DATASET (optional: the first site's test set),
 *    "aggregation": "securedfl" | "fedavg",
 *    "admm": {"iterations": 7, "rho": 0.1, "decay": 0.9, "decay_every": 2},
 *    "masking": true, "exchange_timeout_s": 120}
 *
 * DATASET is a training dataset (workers/train/train.h), and the built-in one may be split:
 * {"name": "fashion-mnist", "partition": {"sites": 9, "index": 2, "alpha": 0.5, "seed": 1}}
 * (partition.h: that site's part of a Dirichlet label-skew split; the test set whole).
 * A site with a label ("site=NAME") runs on a worker started with --labels site=NAME;
 * a site without one on any free worker, one site per worker.  Without masking the
 * iterations are capped at the design's P (a site would see a peer's message
 * twice, which reveals its model): the spec is refused beyond. */
#ifndef GANTRY_FED_SPEC_H
#define GANTRY_FED_SPEC_H

#include <jansson.h>
#include <stddef.h>

#include "common/jobtypes.h"
#include "common/schema.h"

#define FED_MAX_JOB_SITES 64

/* the spec's shape (in the API document), its admm and partition members' (their defaults) */
extern const sch fed_spec_shape, fed_admm_shape, fed_partition_shape;

int fed_spec_validate(const json_t *spec, char *field, size_t fl, char *msg, size_t ml);
/* the training spec of site s's local steps (new reference): model, optimizer, its dataset, batch_size, seed */
json_t *fed_site_train_spec(const json_t *spec, int s);

/* the federated row's spec module (common/jobtypes.h): the sites' names and labels without control
 * characters, a slot per site, every site's dataset paths, rounds x local_steps against max_steps */
extern const job_spec fed_job_spec;

#endif
