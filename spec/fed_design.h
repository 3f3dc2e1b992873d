/* fed_design.h - the communication groups of SecureD-FL: resolvable designs.
 *
 * A design on n sites is a list of parallel classes; each class partitions the
 * sites into groups of at least 3, and two sites share a group at most once
 * over all classes (so no site sees another's messages twice through one
 * group).  fed_design picks, for n sites:
 *
 * - n = 3^k: the Kirkman triple system of the lines of AG(k, 3) (a class per
 *   direction: (n - 1)/2 classes, every pair exactly once);
 * - n = 2q + 1, q a prime = 1 (mod 6): a Kirkman triple system from one base
 *   class developed over GF(q) (q classes, every pair exactly once; the
 *   construction and its proof are in fed_design.c);
 * - n = p^2, p an odd prime: the affine plane AG(2, p) (p + 1 classes of
 *   groups of p);
 * - otherwise: a resolvable packing found by a seeded search (triples, and one
 *   group of 4 or 5 when 3 does not divide n), as many classes as it finds.
 *
 * fed_design_verify checks a design whatever its origin (the job runs it at
 * start).  Pure: no I/O. */
#ifndef GANTRY_FED_DESIGN_H
#define GANTRY_FED_DESIGN_H

#include <stddef.h>

#define FED_MAX_SITES 256

typedef struct {
    int n;         /* sites 0..n-1 */
    int classes;   /* P */
    int *group;    /* group[c * n + i]: site i's group in class c (0-based) */
    int *ngroups;  /* groups per class */
    char kind[48]; /* which construction ("KTS from AG(2,3)", "affine plane AG(2,5)", "searched packing", ...) */
    int exact;     /* every pair shares a group exactly once */
} fed_design;

/* 0, or -1 with err (n < 3, n > FED_MAX_SITES, or no design found) */
int fed_design_make(int n, fed_design *d, char *err, size_t errlen);
void fed_design_free(fed_design *d);
/* 0 when classes partition the sites, groups have >= 3 members and pairs meet at most once;
 * -1 with err naming the first violation */
int fed_design_verify(const fed_design *d, char *err, size_t errlen);
/* the members of site i's group in class c, written to out (at most n); returns how many */
int fed_design_members(const fed_design *d, int c, int i, int *out);

#endif
