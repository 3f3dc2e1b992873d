/* fed_design.c - resolvable designs for SecureD-FL's groups (fed_design.h).
 *
 * KTS(2q + 1) for a prime q = 6t + 1.  Points: infinity, (a, 1) and (a, 2) for
 * a in GF(q).  Let x be a primitive root, w = x^{2t} (a cube root of unity),
 * alpha = 2 / (1 - w), beta = 2 - alpha, and S the cube-root cosets x^i H3 for
 * i = t .. 2t - 1 (so S and -S partition GF(q)*, and wS = S).  Base class:
 *   {inf, (0,1), (0,2)};
 *   {(x^i, 2), (x^i w, 2), (x^i w^2, 2)} for i = 0 .. t-1;
 *   {(alpha s, 1), (beta s, 1), (s, 2)} for s in S.
 * It partitions the points: level-2 points are H3-cosets 0..t-1 and S;
 * level-1 points alpha S and beta S = -alpha w S = -alpha S.  Differences:
 * the pure level-2 triples give u(1 - w) H6 for the t coset representatives
 * u of H6, i.e. every nonzero element once; the level-1 pairs give
 * +-(alpha - beta) s over S, i.e. (alpha - beta) GF(q)*, once each; the mixed
 * pairs give (1 - alpha) s and (1 - beta) s = -(1 - alpha) s, i.e.
 * (1 - alpha) GF(q)*, once each; the infinity block covers the mixed
 * difference 0.  So the q translates (a, l) -> (a + g, l) of the base class
 * cover every pair exactly once: q parallel classes. */
#include "spec/fed_design.h"
#include "common/alloc.h"

#include "common/rng.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int is_prime(int p)
{
    if (p < 2) return 0;
    for (int d = 2; d * d <= p; d++)
        if (p % d == 0) return 0;
    return 1;
}

static long pw(long b, long e, long m)
{
    long r = 1;
    b %= m;
    while (e > 0) {
        if (e & 1) r = r * b % m;
        b = b * b % m, e >>= 1;
    }
    return r;
}

static long primitive_root(long q)
{
    for (long g = 2; g < q; g++) {
        int ok = 1;
        long n = q - 1;
        for (long f = 2; f * f <= n && ok; f++)
            if (n % f == 0) {
                if (pw(g, (q - 1) / f, q) == 1) ok = 0;
                while (n % f == 0)
                    n /= f;
            }
        if (ok && n > 1 && pw(g, (q - 1) / n, q) == 1) ok = 0;
        if (ok) return g;
    }
    return -1;
}

static long inv(long a, long q)
{
    return pw((a % q + q) % q, q - 2, q);
}

static void alloc(fed_design *d, int n, int classes)
{
    memset(d, 0, sizeof *d);
    d->n = n, d->classes = classes;
    d->group = xmalloc(sizeof(int) * (size_t)n * (size_t)(classes > 0 ? classes : 1));
    d->ngroups = xcalloc((size_t)(classes > 0 ? classes : 1), sizeof(int));
    for (size_t i = 0; i < (size_t)n * (size_t)classes; i++)
        d->group[i] = -1;
}

/* adds a group of k sites to class c */
static void put(fed_design *d, int c, const int *sites, int k)
{
    int g = d->ngroups[c]++;
    for (int j = 0; j < k; j++)
        d->group[c * d->n + sites[j]] = g;
}

/* AG(k, 3): points are base-3 vectors; a class per direction (first nonzero digit 1) */
static int ag3(int n, int k, fed_design *d)
{
    alloc(d, n, (n - 1) / 2);
    int c = 0;
    for (int dir = 1; dir < n; dir++) {
        int t = dir, lead = 0;
        while (t % 3 == 0)
            t /= 3;
        lead = t % 3;
        if (lead != 1) continue; /* one of each pair of opposite directions */
        for (int p = 0; p < n; p++) {
            if (d->group[c * n + p] >= 0) continue;
            int line[3], q = p;
            for (int j = 0; j < 3; j++) {
                line[j] = q;
                int r = 0, m = 1; /* q + dir, digit-wise mod 3 */
                for (int i = 0; i < k; i++, m *= 3)
                    r += ((q / m % 3 + dir / m % 3) % 3) * m;
                q = r;
            }
            put(d, c, line, 3);
        }
        c++;
    }
    snprintf(d->kind, sizeof d->kind, "Kirkman triple system from AG(%d,3)", k);
    d->exact = 1;
    return 0;
}

/* KTS(2q + 1) by the construction above; sites: 0 = infinity, 1 + a = (a,1), 1 + q + a = (a,2) */
static int kts_2q1(int q, fed_design *d)
{
    int n = 2 * q + 1, t = (q - 1) / 6;
    alloc(d, n, q);
    long x = primitive_root(q), w = pw(x, 2 * t, q);
    long alpha = 2 * inv(1 - w, q) % q, beta = ((2 - alpha) % q + q) % q;
    for (int g = 0; g < q; g++) {
        int b[3];
#define L1(a) (1 + (int)(((a) + g) % q))
#define L2(a) (1 + q + (int)(((a) + g) % q))
        b[0] = 0, b[1] = L1(0), b[2] = L2(0);
        put(d, g, b, 3);
        for (int i = 0; i < t; i++) {
            long u = pw(x, i, q);
            b[0] = L2(u), b[1] = L2(u * w % q), b[2] = L2(u * w % q * w % q);
            put(d, g, b, 3);
        }
        for (int i = t; i < 2 * t; i++)
            for (int k = 0; k < 3; k++) {
                long s = pw(x, i + 2 * t * k, q);
                b[0] = L1(alpha * s % q), b[1] = L1(beta * s % q), b[2] = L2(s);
                put(d, g, b, 3);
            }
#undef L1
#undef L2
    }
    snprintf(d->kind, sizeof d->kind, "Kirkman triple system KTS(2*%d+1)", q);
    d->exact = 1;
    return 0;
}

/* AG(2, p): lines y = m x + b per slope m, and x = c */
static int affine_plane(int p, fed_design *d)
{
    int n = p * p;
    alloc(d, n, p + 1);
    int *line = xmalloc(sizeof(int) * (size_t)p);
    for (int m = 0; m <= p; m++)
        for (int b = 0; b < p; b++) {
            for (int x = 0; x < p; x++)
                line[x] = m == p ? b * p + x : x * p + (m * x + b) % p;
            put(d, m, line, p);
        }
    free(line);
    snprintf(d->kind, sizeof d->kind, "affine plane AG(2,%d)", p);
    d->exact = 1;
    return 0;
}

/* ---- the search: a seeded randomized backtracking, one class at a time ---- */

typedef struct {
    int n, *sizes, ngroups;
    unsigned char *used; /* n x n: the pair already shares a group */
    int *grp;            /* the class being built: site -> group */
    long budget;
    rng_state rng;
} search;

static int fits(const search *S, const int *members, int k, int cand)
{
    for (int j = 0; j < k; j++)
        if (S->used[members[j] * S->n + cand]) return 0;
    return 1;
}

/* fills group g (member k of sizes[g]); 1 when the class is complete */
static int fill(search *S, int g, int *members, int k)
{
    if (--S->budget < 0) return 0;
    if (g == S->ngroups) return 1;
    if (k == S->sizes[g]) { /* the group is complete (its members are marked): the next one */
        int next_members[8];
        return fill(S, g + 1, next_members, 0);
    }
    int n = S->n, start = (int)rng_below(&S->rng, (uint64_t)n);
    if (k == 0) { /* the group's first member: the lowest free site (no symmetric retries) */
        for (int i = 0; i < n; i++)
            if (S->grp[i] < 0) {
                members[0] = i;
                S->grp[i] = g;
                if (fill(S, g, members, 1)) return 1;
                S->grp[i] = -1;
                return 0;
            }
        return 0;
    }
    for (int o = 0; o < n; o++) {
        int c = (start + o) % n;
        if (S->grp[c] >= 0 || c < members[k - 1] || !fits(S, members, k, c)) continue;
        members[k] = c;
        S->grp[c] = g;
        if (fill(S, g, members, k + 1)) return 1;
        S->grp[c] = -1;
    }
    return 0;
}

static int searched(int n, fed_design *d)
{
    int big = n % 3 == 1 ? 4 : n % 3 == 2 ? 5 : 3, ngroups = (n - big) / 3 + 1;
    int maxc = (n - 1) / 2 + 1;
    int *sizes = xmalloc(sizeof(int) * (size_t)ngroups), *grp = xmalloc(sizeof(int) * (size_t)n);
    unsigned char *used = xcalloc((size_t)n * (size_t)n, 1);
    int *classes = xmalloc(sizeof(int) * (size_t)n * (size_t)maxc), found = 0;
    for (int g = 0; g < ngroups; g++)
        sizes[g] = g == 0 ? big : 3;
    search S = {n, sizes, ngroups, used, grp, 0, {0x5EEDull * (uint64_t)n}};
    for (int tries = 0; found < maxc && tries < 8; tries++) {
        for (int i = 0; i < n; i++)
            grp[i] = -1;
        S.budget = 20000;
        int members[8];
        if (!fill(&S, 0, members, 0)) continue;
        memcpy(classes + (size_t)found * (size_t)n, grp, sizeof(int) * (size_t)n);
        for (int i = 0; i < n; i++)
            for (int j = 0; j < n; j++)
                if (i != j && grp[i] == grp[j]) used[i * n + j] = 1;
        found++, tries = 0;
    }
    int rc = -1;
    if (found > 0) {
        alloc(d, n, found);
        memcpy(d->group, classes, sizeof(int) * (size_t)n * (size_t)found);
        for (int c = 0; c < found; c++)
            d->ngroups[c] = ngroups;
        snprintf(d->kind, sizeof d->kind, "searched resolvable packing");
        rc = 0;
    }
    free(sizes), free(grp), free(used), free(classes);
    return rc;
}

int fed_design_make(int n, fed_design *d, char *err, size_t errlen)
{
    memset(d, 0, sizeof *d);
    if (n < 3 || n > FED_MAX_SITES) {
        snprintf(err, errlen, "no design: %d sites (groups need 3 sites or more; at most %d sites)", n, FED_MAX_SITES);
        return -1;
    }
    int k = 0, m = n;
    while (m % 3 == 0)
        m /= 3, k++;
    int p = 1;
    while ((p + 1) * (p + 1) <= n)
        p++;
    int rc;
    if (m == 1)
        rc = ag3(n, k, d);
    else if ((n - 1) % 2 == 0 && is_prime((n - 1) / 2) && (n - 1) / 2 % 6 == 1)
        rc = kts_2q1((n - 1) / 2, d);
    else if (p * p == n && p > 2 && is_prime(p))
        rc = affine_plane(p, d);
    else
        rc = searched(n, d);
    if (rc) {
        fed_design_free(d);
        snprintf(err, errlen, "no design found for %d sites", n);
        return -1;
    }
    return fed_design_verify(d, err, errlen);
}

void fed_design_free(fed_design *d)
{
    free(d->group), free(d->ngroups);
    d->group = d->ngroups = NULL;
}

int fed_design_verify(const fed_design *d, char *err, size_t errlen)
{
    int n = d->n;
    if (n < 3 || d->classes < 1) {
        snprintf(err, errlen, "design: %d sites, %d classes", n, d->classes);
        return -1;
    }
    unsigned char *met = xcalloc((size_t)n * (size_t)n, 1);
    int *size = xcalloc((size_t)n, sizeof(int));
    int rc = 0;
    for (int c = 0; rc == 0 && c < d->classes; c++) {
        memset(size, 0, sizeof(int) * (size_t)n);
        for (int i = 0; i < n && rc == 0; i++) {
            int g = d->group[c * n + i];
            if (g < 0 || g >= d->ngroups[c] || g >= n) {
                snprintf(err, errlen, "design: class %d does not place site %d in a group", c, i);
                rc = -1;
            } else {
                size[g]++;
            }
        }
        for (int g = 0; rc == 0 && g < d->ngroups[c]; g++)
            if (size[g] < 3) {
                snprintf(err, errlen, "design: class %d group %d has %d member%s (at least 3 needed)", c, g, size[g],
                         size[g] == 1 ? "" : "s");
                rc = -1;
            }
        for (int i = 0; rc == 0 && i < n; i++)
            for (int j = i + 1; rc == 0 && j < n; j++)
                if (d->group[c * n + i] == d->group[c * n + j] && met[i * n + j]++) {
                    snprintf(err, errlen, "design: sites %d and %d share a group twice (again in class %d)", i, j, c);
                    rc = -1;
                }
    }
    for (int i = 0; rc == 0 && d->exact && i < n; i++)
        for (int j = i + 1; rc == 0 && j < n; j++)
            if (!met[i * n + j]) {
                snprintf(err, errlen, "design: sites %d and %d never share a group in a design said to be exact", i, j);
                rc = -1;
            }
    free(met), free(size);
    return rc;
}

int fed_design_members(const fed_design *d, int c, int i, int *out)
{
    int g = d->group[c * d->n + i], k = 0;
    for (int j = 0; j < d->n; j++)
        if (d->group[c * d->n + j] == g) out[k++] = j;
    return k;
}
