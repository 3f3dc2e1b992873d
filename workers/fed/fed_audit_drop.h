/* fed_audit_drop.h - the privacy audit of the threshold mode's dropout path (secagg_drop.h; gantry-fed-sim
 * --privacy-audit; tests/unit/test_fed_drop.c).
 *
 * For each n it runs one round of the threshold mode (the job's protocol code, n threads over the logging
 * in-memory transport) in each scenario: nobody dropped; one site killed before its input (its masks
 * recovered); one site late (its input after the close); one killed after its input, before its shares; two
 * killed before their inputs (when n - t >= 2).  Then, from the bytes written, for each observer - Redis (no
 * key), each single site and each pair of sites (their pair keys, the job's broadcast key, their own round
 * secrets, every share sealed to them or revealed) - it rebuilds every secret of which the observer holds t
 * shares (checked against the published key and hash), unmasks every input it can and compares it with the
 * site's true input (a mismatch fails the audit: a message it cannot explain), and adds the inputs the
 * revealed total determines (the survivors less the observers).  A site's input is "determined" when the
 * observer gets it exactly.  As a control, the first t sites together must determine every other input that
 * was written (t shares of everything: the bound the threshold sets). */
#ifndef GANTRY_FED_AUDIT_DROP_H
#define GANTRY_FED_AUDIT_DROP_H

#include <stddef.h>
#include <stdio.h>

typedef struct {
    long single;  /* other sites' inputs determined by Redis or one site, over n and scenarios */
    long pairs;   /* ... by pairs of sites */
    long views;   /* (n, scenario, observer) audited */
    long t_sites; /* the control: what t sites together determine (every other input written: the threshold's bound) */
} fed_audit_drop_result;

/* sizes: numbers of sites (4 .. 64); out: one line per (n, scenario), or NULL.  0, or -1 with err: the
 * protocol failed, or an observer's unmasking gave something that is not the site's input */
int fed_audit_drop(const int *sizes, int nsizes, FILE *out, fed_audit_drop_result *res, char *err, size_t errlen);

#endif
