/* fed_audit.h - the privacy audit of the federated exchange (gantry-fed-sim
 * --privacy-audit; tests/unit/test_fed.c).
 *
 * For each number of sites n and each T = 1 .. 3P it runs one round of
 * SecureD-FL with T ADMM iterations - the job's own protocol code (secagg.h),
 * n threads over the in-memory transport (memnet.h), which logs every message
 * written - and then asks, for each observer, which other sites' models that
 * observer's view determines.  Observers: Redis (every byte written, no key),
 * each single site (every byte written, plus the keys it holds) and, for
 * small n, every coalition of two and of three sites (their keys and secrets
 * pooled).  The run has a mixed roster (sites 0, 2, 4, ... pinned: their
 * public keys and broadcasts signed); a signature is public, checked against
 * the roster, and a message that should carry one and does not fails.
 *
 * The view is taken from the bytes, not from the protocol's description:
 * - an observer opens a message when one of its keys authenticates it (keys
 *   carried by messages it can open count too: the job's key); a message no
 *   key opens is in the clear if it parses as a masked vector, else opaque (an
 *   unknown of its own, which tells nothing);
 * - each vector is decomposed, exactly, into pair masks and a value: the run
 *   has coordinates where every secret is 0, and on those the message is a
 *   sum of +/- pair mask streams, identified by solving over GF(2) (then its
 *   sign, modulo 4) against every pair's stream of that exchange, and checked
 *   modulo 2^64 on every coordinate;
 * - the value is a linear function of the sites' secrets (model w_j and first
 *   duals lambda_j, per coordinate): its coefficients come from probe
 *   coordinates (w_j = 2^16 in one, 0 elsewhere), checked against a coordinate
 *   with random secrets.  A message that is not so explained fails the audit.
 * Unknown to an observer: every secret but its own, and every mask whose pair
 * it is not in.  Per exchange the masks are eliminated (Gaussian elimination
 * over their columns); on what remains, w_j is determined iff its unit vector
 * lies in the row space (SVD, relative tolerance 1e-9). */
#ifndef GANTRY_FED_AUDIT_H
#define GANTRY_FED_AUDIT_H

#include <stddef.h>
#include <stdio.h>

#define FED_AUDIT_MAX_COALITION 3

typedef struct {
    int legacy;           /* audit the exchange before issue 18 (group masks, every message readable) */
    int coalitions_upto;  /* coalitions of 2 sites for n <= this (0: none) */
    int coalitions3_upto; /* coalitions of 3 sites for n <= this (0: none) */
    int t_min, t_max;     /* iterations audited (t_max 0: 3P) */
    int random_groups;    /* each class's groups drawn at random (triples, the rest in the last group) instead of the
                           * design's: pairs may meet more than once; what the groups contribute to privacy */
    FILE *out;            /* one line per (n, observer, T); NULL: none */
} fed_audit_opts;

typedef struct {
    long single;     /* other sites' models determined, summed over n, T and observers: Redis or one site */
    long coalition;  /* ... by coalitions of two sites */
    long coalition3; /* ... by coalitions of three sites */
    long views;      /* (n, observer, T) audited */
} fed_audit_result;

/* 0, or -1 with err: the protocol failed, or wrote a message the audit cannot explain */
int fed_audit(const int *sizes, int nsizes, const fed_audit_opts *o, fed_audit_result *res, char *err, size_t errlen);

#endif
