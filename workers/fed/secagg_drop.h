/* secagg_drop.h - the threshold mode of a sum (docs/federated.md, "Dropouts"): a FedAvg round completes
 * when at least t of the n sites deliver, as in Bonawitz et al. 2017 ("Practical Secure Aggregation").
 * Transport-agnostic like secagg.h, and run after its setup (the pair AEAD keys and the broadcast key).
 *
 * One try of a round (exchange e; channels "dk:e", "dc1:e", "dy:e", "dc2:e", "ds:e"):
 *   1. each site draws a fresh X25519 mask key pair s_i and a self-mask seed b_i, publishes s_i's public key
 *      and SHA-256(b_i), authenticated by the same function as the setup's hello (fed_key_auth), and for
 *      every other site j its Shamir share (threshold t) of s_i's private key and of b_i, sealed under the
 *      pair's AEAD key;
 *   2. a site closes the phase once all n keys arrived, or close_ms after the t-th arrived (up to the party's
 *      timeout for those t: sites train at their own pace): it publishes the set it saw; the first valid close
 *      in the channel (a stream: totally ordered) is U1 for everyone;
 *   3. each site of U1 publishes, sealed under the broadcast key, y_i = enc(w_i v_i, w_i) + PRG(b_i) +
 *      sum_{j in U1, j != i} +-PRG(DH(s_i, s_j)); the same close gives U2, the sites whose y arrived;
 *   4. each site of U2 publishes its shares: of b_j for every j in U2, of s_d for every d in U1 \ U2 (never
 *      both for one site); with t shares of each, every site removes the survivors' self-masks and the
 *      dropped sites' pair masks: the total over U2 is all it learns.  A late y_d stays masked by b_d.
 * |U1| or |U2| below t: the round is tried again with fresh masks (retries times), then FED_LOST.  A
 * malformed or unauthenticated message drops its sender for the try (an event in the report); a mask key
 * whose tag does not verify is a forged key and fails the job (FED_TAMPERED), as in the setup. */
#ifndef GANTRY_FED_SECAGG_DROP_H
#define GANTRY_FED_SECAGG_DROP_H

#include "spec/fed_spec.h"
#include "workers/fed/secagg.h"

#include <stdint.h>

/* the threshold mode's message types (after secagg.h's) */
enum {
    FED_MSG_DKEY = 10,   /* a round's mask key, with its sealed shares */
    FED_MSG_DSEAL = 11,  /* one site's share of another's secrets, sealed under their pair's key */
    FED_MSG_CLOSE1 = 12, /* the sites whose mask keys arrived (U1) */
    FED_MSG_MASKED = 13, /* a masked input */
    FED_MSG_CLOSE2 = 14, /* the sites whose masked inputs arrived (U2) */
    FED_MSG_REVEAL = 15, /* a survivor's shares: of b for U2, of s for U1 \ U2 */
};

/* what a survivor reveals for a site (the REVEAL message: n entries of one kind byte and 32 share bytes) */
enum { FED_REVEAL_NONE = 0, FED_REVEAL_SELF = 1, FED_REVEAL_PAIR = 2 };
#define FED_REVEAL_ENTRY 33
/* a mask key message: header, public key, tag, SHA-256(b), then for every other site in order one sealed share
 * (its share of the private key, then of b) */
#define FED_DKEY_HEAD (FED_HDR_LEN + 32 + 32 + 32)
#define FED_DKEY_SHARE (FED_HDR_LEN + 64 + FED_TAG_LEN)

typedef struct {
    int t;        /* the threshold (fed_drop_threshold_check) */
    int close_ms; /* how long a site waits, once t keys or inputs are in, for the others' before it closes a phase */
    int retries;  /* tries after the first when fewer than t sites deliver */
    /* the sites still expected (one bit per site; 0: all): a phase closes once they are in, without waiting close_ms
     * for a site known lost (the job: the scheduler's record of the generation's live sites, wire/requeue.h) */
    uint64_t expect;
} fed_drop_opts;

typedef struct {
    int tries;        /* this round's tries */
    int delivered;    /* |U2| of the try that completed */
    uint64_t u1, u2;  /* the sets, one bit per site */
    int in;           /* 1 when this site's input is in the total */
    double weight;    /* the delivered sites' weights, summed (what the total was divided by) */
    char events[512]; /* sites dropped for a malformed message, "; "-separated */
} fed_drop_report;

/* the threshold's bounds and default: spec/fed_spec.h (fed_drop_threshold_default, fed_drop_threshold_check) */
/* one sum with dropouts: total[0..dim) = sum_{i in U2} weight_i v_i / sum_{i in U2} weight_i.  A site that
 * is alive gets the total even when its own input did not make it (r->in = 0).  FED_OK, FED_LOST (below t
 * after the retries, or fewer than t survivors' shares in timeout_ms), FED_STOPPED, FED_TAMPERED (a forged
 * mask key, or shares that do not reconstruct their secret), FED_BROKEN; err says which */
int fed_party_sum_drop(fed_party *p, const fed_drop_opts *o, const double *v, double weight, double *total, fed_drop_report *r,
                       char *err, size_t errlen);

#endif
