/* fed_site.h - one site of a federated job, whatever trains its model: what the built-in site
 * (workers/exec_fed.c: gantry's layer list) and the program site (workers/exec_fed_program.c: the
 * team's own program) share.
 *
 * It owns the site's place in the job: the cluster secret's check, the claim of a site (the first
 * unclaimed one labelled with this worker's label, else the first unlabelled one: workers/fed_io.h),
 * the generation's rendezvous, then the exchange (workers/fed/secagg.h over Redis streams): the
 * design's groups, the keys, the weights, one round's aggregation (SecureD-FL's ADMM or FedAvg, and
 * FedAvg's average for the consensus residual), the round's metrics point and the design in the
 * result; and, when the job is restarted, the sites' agreement on the round it continues after.  Local training and evaluation are
 * the callers'. */
#ifndef GANTRY_FED_SITE_H
#define GANTRY_FED_SITE_H

#include "common/rng.h"
#include "spec/fed_design.h"
#include "workers/executor.h"
#include "workers/fed/admm.h"
#include "workers/fed/resume.h"
#include "workers/fed/secagg.h"
#include "workers/fed/secagg_drop.h"
#include "workers/fed_io.h"

#include <jansson.h>
#include <stdint.h>

typedef struct {
    exec_ctx *ctx;
    const json_t *spec;
    int n, me, timeout_ms;
    const char *name; /* this site's name */
    /* fed_site_connect */
    fed_design d;
    fed_io io;
    fed_party S;
    int fedavg, iters;
    fed_admm_params P;
    rng_state duals; /* this site's private duals' stream */
    size_t dim;
    double *lambda, *x, *msgv, *avg;
    /* fed_site_aggregate: the last round's */
    double residual, t0, sent0, got0, aggregate_s; /* aggregate_s: the last fed_site_aggregate's wall time */
    bool moved_on;                                 /* site 0: a round completed in this generation (fed_site_checkpoint) */
    /* the dropouts' mode (FedAvg with a threshold t below n: docs/federated.md, "Dropouts"): the last round's report,
     * and the sites missing from the round before it (site 0 says when the set changes) */
    bool drop, program_weights; /* program_weights: the weights come from fed_site_weigh each round */
    int t;
    fed_drop_report last;
    uint64_t missing;
} fed_site;

/* what a protocol result (workers/fed/secagg.h) means for the job: a lost site or a stop retries the
 * generation (EXEC_RETRY), the rest fails it (EXEC_FAILED) */
int fed_site_exec_rc(int fed_rc);

/* The secret's check, the claim and the rendezvous; 0, or an EXEC_* code with err. */
int fed_site_join(fed_site *s, exec_ctx *ctx, const json_t *spec, char *err, size_t errlen);
/* The design, the transport, the keys and the weights (samples: this site's count), for models of dim
 * values; duals_seed seeds this site's duals.  0, or an EXEC_* code with err. */
int fed_site_connect(fed_site *s, size_t dim, double samples, uint64_t duals_seed, char *err, size_t errlen);
/* site 0's model v to every site, in z (dim values), by one masked sum of site 0's v and the others'
 * zeros (v is read on site 0 only).  0, or an EXEC_* code with err. */
int fed_site_from_site0(fed_site *s, const double *v, double *z, char *err, size_t errlen);
/* Where a restarted job continues (docs/federated.md, "Restarts"; the rule: workers/fed/resume.h).  This site
 * reads its worker's checkpoint of the job (workers/fed_ckpt.h; one that does not fit layout and rounds is said
 * in an event and counts as none), announces it through the generation's gang values and reads every site's;
 * the sites continue after the newest round, whose holder's copy reaches every site as its FP32 bits by two
 * masked sums (as site 0's initial model does); each site checks the SHA-256 the holder announced, and one more
 * sum confirms that every site's matched, else all start from round 1.  *round: the round the job continues
 * after (0: from the start, z untouched), with z (dim values) its global model.  Site 0 says which in an event,
 * and why when the checkpoints are not used.  0, or an EXEC_* code with err. */
int fed_site_resume(fed_site *s, const tensorfile_header *layout, int rounds, double *z, int *round, char *err, size_t errlen);
/* z, the global model after round (of rounds), as this worker's checkpoint of the job; a failure is logged, not
 * fatal (the run goes on; only a restart would miss it) */
void fed_site_checkpoint(fed_site *s, const tensorfile_header *layout, const double *z, int round, int rounds);
/* this site's weight from its sample count now (a sum of the counts; in the dropouts' mode no sum: the weight rides
 * in the round's sum); 0, or an EXEC_* code with err */
int fed_site_weigh(fed_site *s, double samples, char *err, size_t errlen);
/* starts a round's clock and byte counts (fed_site_point reports them) */
void fed_site_round_start(fed_site *s);
/* One round's aggregation of this site's model w (dim values) into the global model z (every site's
 * equal), and the residual against FedAvg's average.  In the dropouts' mode the round completes with the t or more
 * sites that deliver (the mean of their models, weighted; the sites the scheduler recorded as lost are not waited
 * for), and site 0 says which sites a round went without.  0, or an EXEC_* code with err. */
int fed_site_aggregate(fed_site *s, const double *w, double *z, char *err, size_t errlen);
/* site 0's round as a metrics point (new reference): round, step, residual, bytes sent and received,
 * round_s (local training included), aggregate_s (the aggregation, waits for the peers included), sites, and
 * delivered (the sites whose model is in the round's) */
json_t *fed_site_point(const fed_site *s, int round);
/* result.design: {"kind", "classes", "groups": the sites' names per group per class} (new reference) */
json_t *fed_site_design(const fed_site *s);
void fed_site_free(fed_site *s);

#endif
