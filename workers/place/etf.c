/* etf.c - list scheduling in simulated time with heaps (m-ETF, m-SCT).
 *
 * Baechi rescans every ready op on every device at every step.  Here each
 * device keeps two heaps of the ready ops that may run on it:
 *   wait[d]  keyed by a lower bound of the op's data-ready time on d,
 *   avail[d] keyed by topological position, for ops whose data may be on
 *            d by the time d is free (those all start when d is free, and
 *            the earliest in topological order wins the tie); only its top
 *            is checked, and goes back to wait[d] when its data is later.
 * start(o, d) = max(ready(o, d), free(d)), so the best op of d is the top of
 * avail[d] if any, else the top of wait[d]; the step commits the best of the
 * D device candidates (on devices of different speeds, the chosen op then
 * goes to the device where it finishes first).  Data-ready times only grow as channels fill, so heap
 * keys are lower bounds: an entry reaching the top is re-evaluated and
 * pushed back when its key went stale (lazy re-evaluation), which keeps the
 * top exact.  Each op enters at most D heaps: O((N + E) * D * log N) plus
 * the re-pushes of stale keys.
 *
 * ready(o, d) is the latest of: end(p) for inputs p on d; the arrival time
 * recorded for p's tensor on d (sent once, reused by every consumer there);
 * and, for tensors not yet on d, transfers queued in order of their
 * producers' ends on the sender's send channel and d's receive channel (one
 * of each per device).  Committing reserves those channels.
 *
 * Memory: a unit (op or whole colocation group) may go to a device only if
 * the ledger (ledger.h) accepts it, so no plan ever exceeds capacity.  An
 * (op, device) pair that does not fit is dropped for good: charges only grow.
 * Every pass keeps the memory reserve: a pair is taken only if the devices
 * keep, in total, room for the persistent bytes of every unit not placed
 * yet (place_ledger_free_total), so early ops cannot spend what later ones
 * need.  A refused pair waits until at least its deficit was freed
 * (place_ledger_freed_total: until then it surely stays refused, so the
 * heaps commit what a rescan would); when no pair meets the reserve, one
 * step goes without it.  With plenty of memory the reserve never binds.
 * When some ready op still fits on no device the pass is stuck (Baechi
 * dies there with "cannot place op").  Then, up to MAX_RETRIES times (and
 * no more once a pinned pass commits fewer ops than the pass before: the
 * pins are not converging), the pass is rerun with every unit that got
 * stuck so far pinned, together
 * with its producers' units (so it pulls no input from another device; the
 * unit alone when the bundle does not fit), first-fit decreasing by memory
 * on the device with the most room, that device holding the room from the
 * start.  Plans found that way say so in plan->note.  There is no fallback
 * to another algorithm's plan: when every rung is stuck, the reason names
 * the op, the missing bytes and the rules tried (the solver weighs m-TOPO
 * and the single device on its own, under their own names). */
#include "workers/place/etf.h"

#include "common/alloc.h"
#include "workers/place/algo.h"
#include "workers/place/groups.h"
#include "workers/place/heap.h"
#include "workers/place/ledger.h"
#include "workers/place/pairmap.h"
#include "workers/place/xfer.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_RETRIES 3 /* 8 placed no more of test_place_props's 1,000 tight DAGs than 3 */
#define BIT(dev) (UINT64_C(1) << ((dev)&63))

enum { RUN_OK = 0, RUN_OOM = -1, RUN_STUCK = 1 };

/* How a pass runs: which units are pinned where (NULL: none), whether
 * their room is held from the start, whether the memory reserve is kept. */
typedef struct pass {
    const int *pin;
    int hold, reserve;
} pass;

typedef struct fresh {
    double ready; /* producer's end */
    int src;
    int64_t bytes; /* edge bytes from src to the op */
} fresh;

/* (op, device) pairs that did not fit, parked on the device whose memory
 * overflowed until at least the smallest missing amount was freed there. */
typedef struct blocklist {
    int *op, *dev;
    int n, cap;
    int64_t min_missing, freed;
} blocklist;

typedef struct etf {
    const place_graph *g;
    const place_etf_opts *opt;
    const int *pin; /* op -> device it must go to, or -1; NULL: none */
    place_plan *plan;
    int *where; /* plan->device: -1 until the op's unit is placed */
    place_groups gr;
    place_ledger *led;
    place_heap *wait, *avail;
    double *dev_free, *send_free, *recv_free, *end;
    int *pending; /* per op: input edges whose producer is not committed */
    char *done;
    place_pairmap *arrival;
    int n_done, oom;
    int hetero; /* devices differ in speed */
    int hold;   /* pinned units' memory is held from the start */
    blocklist *blk;
    /* scratch for data_ready */
    int64_t stamp, *seen, *sf_stamp;
    int *fidx;
    fresh *fr;
    double *sf_tmp;
    /* per device: its cached candidate and what it depends on (bit masks
     * of devices, bit dev % 64): send channels its transfers use, devices
     * its memory check charged */
    int *c_op, *c_alt; /* c_alt: with a reservation, the op the favourite child was weighed against */
    char *c_ok;
    double *c_start;
    uint64_t *c_dep, *c_fit;
    uint64_t dep_acc, fit_acc, send_changed;
    int alt;
    /* units (op, or n_ops + group) next to a unit placed by commit number
     * `epoch`: their memory charge now includes new received copies */
    int64_t *ustamp, epoch;
    /* m-SCT */
    int *last_op;  /* per device: the op it ran last, -1 */
    int *reserved; /* per device: favourite child it waits for, -1 */
    /* the memory reserve (see "Memory" above) */
    int reserve;                 /* this pass keeps room for the persistent bytes still to come */
    int relax;                   /* one step without the reserve: nothing met it */
    int64_t rem;                 /* persistent bytes of the units not placed yet (pinned units with held room excluded) */
    int64_t drop;                /* sum of every decrease of the slack (free total - rem) so far */
    int64_t slack;               /* the slack after the last step */
    int64_t surplus;             /* while a candidate is computed: its smallest slack after a fitting try */
    int short_fall;              /* the last fits_why failed on the reserve alone */
    int64_t deficit;             /* ... by this many bytes */
    int64_t *c_surplus, *c_drop; /* per device: its candidate's surplus, and drop when it was cached */
    blocklist rblk;              /* pairs refused by the reserve: back once their deficit was freed */
} etf;

/* ---- data-ready time and channel reservation ---- */

static int cmp_fresh(const void *a, const void *b)
{
    const fresh *x = a, *y = b;
    if (x->ready != y->ready) return x->ready < y->ready ? -1 : 1;
    return (x->src > y->src) - (x->src < y->src);
}

/* Collects op's inputs: returns the latest time of those already on dev and
 * fills s->fr with the producers whose tensor must still be sent there. */
static double collect_inputs(etf *s, int op, int dev, int *n_fresh)
{
    const place_graph *g = s->g;
    double t = 0;
    int nf = 0;
    s->stamp++;
    for (int k = g->in_off[op]; k < g->in_off[op + 1]; k++) {
        const place_edge *e = &g->edges[g->in_edge[k]];
        int p = e->src;
        double a;
        if (s->where[p] == dev) {
            if (s->end[p] > t) t = s->end[p];
        } else if (s->seen[p] == s->stamp) {
            if (s->fidx[p] >= 0) s->fr[s->fidx[p]].bytes += e->bytes;
        } else if (s->seen[p] = s->stamp, place_pairmap_get(s->arrival, p, dev, &a)) {
            s->fidx[p] = -1;
            if (a > t) t = a;
        } else {
            s->fidx[p] = nf;
            s->fr[nf++] = (fresh){s->end[p], p, e->bytes};
        }
    }
    *n_fresh = nf;
    return t;
}

/* When op's inputs are all on `dev`.  With commit, reserves the channels and
 * records the arrivals for reuse. */
static double data_ready(etf *s, int op, int dev, int commit)
{
    const place_graph *g = s->g;
    int nf;
    double t = collect_inputs(s, op, dev, &nf);
    if (nf == 0) return t;
    if (nf > 1) qsort(s->fr, (size_t)nf, sizeof *s->fr, cmp_fresh);
    double recv = s->recv_free[dev];
    for (int i = 0; i < nf; i++) {
        const fresh *f = &s->fr[i];
        int src = s->where[f->src];
        double sf = s->sf_stamp[src] == s->stamp ? s->sf_tmp[src] : s->send_free[src];
        double st = f->ready;
        if (sf > st) st = sf;
        if (recv > st) st = recv;
        double fin = st + place_comm_time(g, src, dev, place_xfer_bytes(g, f->src, f->bytes));
        s->sf_tmp[src] = fin;
        s->sf_stamp[src] = s->stamp;
        s->dep_acc |= BIT(src);
        recv = fin;
        if (fin > t) t = fin;
        if (!commit) continue;
        s->send_free[src] = fin;
        s->send_changed |= BIT(src);
        if (place_pairmap_set(s->arrival, f->src, dev, fin) < 0) s->oom = 1;
        if (place_plan_add_xfer(s->plan, f->src, dev) < 0) s->oom = 1;
    }
    if (commit) s->recv_free[dev] = recv;
    return t;
}

static double start_on(etf *s, int op, int dev)
{
    double dr = data_ready(s, op, dev, 0);
    return dr > s->dev_free[dev] ? dr : s->dev_free[dev];
}

/* ---- candidates ---- */

static int valid(const etf *s, int op, int dev)
{
    return !s->done[op] && (s->where[op] < 0 || s->where[op] == dev);
}

static int allowed(const etf *s, int op, int dev)
{
    if (s->where[op] >= 0) return s->where[op] == dev;
    return !s->pin || s->pin[op] < 0 || s->pin[op] == dev;
}

/* Bytes held for a pinned unit until it is placed. */
static int64_t held_for(const etf *s, int op, const int *unit, int n)
{
    return s->hold && s->pin && s->pin[op] >= 0 ? place_unit_memory(s->g, unit, n) : 0;
}

/* The persistent bytes of a unit that the reserve counts (none for a
 * pinned unit whose room is already held). */
static int64_t reserve_part(const etf *s, int op, const int *unit, int n)
{
    if (held_for(s, op, unit, n)) return 0;
    int64_t p = 0;
    for (int i = 0; i < n; i++)
        p += s->g->ops[unit[i]].persistent_bytes;
    return p;
}

/* The reserve: after placing the unit (pending in the ledger), the devices
 * must still have room, in total, for the persistent bytes of every unit
 * not placed yet.  Returns the slack left (negative: the unit breaks it). */
static int64_t surplus_after(const etf *s, int64_t part)
{
    return place_ledger_free_total(s->led) - (s->rem - part);
}

/* Whether op's unit fits on dev now (a unit already placed there does) and,
 * in a reserve pass, leaves the reserve; when it does not fit, *miss says
 * where memory ran out and by how much; when only the reserve refused it,
 * s->short_fall and s->deficit say so. */
static int fits_why(etf *s, int op, int dev, place_miss *miss)
{
    s->short_fall = 0;
    if (s->where[op] == dev) return 1;
    int n;
    const int *unit = place_unit_of(s->g, &s->gr, &op, &n);
    int64_t held = held_for(s, op, unit, n);
    if (held && place_ledger_reserve(s->led, dev, -held) < 0) s->oom = 1;
    int rc = place_ledger_try(s->led, unit, n, dev, miss);
    if (rc == 1) {
        if (s->reserve) {
            int64_t sur = surplus_after(s, reserve_part(s, op, unit, n));
            if (sur < 0 && !s->relax) {
                rc = 0, s->short_fall = 1, s->deficit = -sur;
            } else if (sur < s->surplus) {
                s->surplus = sur;
            }
        }
        if (rc == 1) s->fit_acc |= place_ledger_touched_mask(s->led);
        place_ledger_abort(s->led);
    }
    if (held && place_ledger_reserve(s->led, dev, held) < 0) s->oom = 1;
    if (rc < 0) s->oom = 1;
    return rc == 1;
}

static int fits(etf *s, int op, int dev)
{
    return fits_why(s, op, dev, NULL);
}

/* op did not fit on dev: park it until memory is freed where it ran out,
 * or, refused by the reserve, until the slack grew by its deficit (then
 * min_missing is the slack it needs). */
static void block(etf *s, int op, int dev, const place_miss *m)
{
    blocklist *b = s->short_fall ? &s->rblk : &s->blk[m->over_dev >= 0 ? m->over_dev : dev];
    int64_t missing = s->short_fall ? place_ledger_freed_total(s->led) + s->deficit : m->missing;
    if (b->n == b->cap) {
        int cap = b->cap ? 2 * b->cap : 16;
        b->op = xreallocarray(b->op, (size_t)cap, sizeof *b->op);
        b->dev = xreallocarray(b->dev, (size_t)cap, sizeof *b->dev);
        b->cap = cap;
    }
    if (b->n == 0) b->freed = 0, b->min_missing = INT64_MAX;
    if (missing < b->min_missing) b->min_missing = missing;
    b->op[b->n] = op;
    b->dev[b->n++] = dev;
}

static int push(etf *s, place_heap *h, double key, int op)
{
    if (place_heap_push(h, key, s->g->topo_pos[op], op) < 0) s->oom = 1;
    return 0;
}

/* A new entry for op on dev (its start there is at least key): the cached
 * candidate of dev stays only if it surely starts first. */
static void push_new(etf *s, int dev, double key, int op)
{
    push(s, &s->wait[dev], key, op);
    if (!s->c_ok[dev]) return;
    double bound = key > s->dev_free[dev] ? key : s->dev_free[dev];
    int c = s->c_op[dev];
    if (c < 0 || bound < s->c_start[dev] || (bound == s->c_start[dev] && s->g->topo_pos[op] < s->g->topo_pos[c])) s->c_ok[dev] = 0;
}

/* Moves wait[d] entries whose data may be on d by free(d) to avail[d],
 * unevaluated: only the top of avail[d] is checked, and sent back to
 * wait[d] when its data is in fact later. */
static void refill_avail(etf *s, int d)
{
    place_heap *w = &s->wait[d];
    double fr = s->dev_free[d];
    while (w->n > 0 && place_heap_top(w)->key <= fr) {
        int op = place_heap_top(w)->id;
        place_heap_pop(w);
        if (valid(s, op, d)) push(s, &s->avail[d], (double)s->g->topo_pos[op], op);
    }
}

/* The earliest-starting op that fits on d (ties: topological order), or -1. */
static int best_on(etf *s, int d, double *start)
{
    place_heap *w = &s->wait[d], *a = &s->avail[d];
    double fr = s->dev_free[d];
    refill_avail(s, d);
    while (a->n > 0 && !s->oom) {
        int op = place_heap_top(a)->id;
        if (!valid(s, op, d)) {
            place_heap_pop(a);
            continue;
        }
        double dr = data_ready(s, op, d, 0);
        place_miss miss = {.dev = -1};
        if (dr > fr || !fits_why(s, op, d, &miss)) {
            place_heap_pop(a);
            if (dr > fr)
                push(s, w, dr, op);
            else
                block(s, op, d, &miss);
            continue;
        }
        *start = fr;
        return op;
    }
    while (w->n > 0 && !s->oom) {
        place_hent top = *place_heap_top(w);
        if (!valid(s, top.id, d)) {
            place_heap_pop(w);
            continue;
        }
        double dr = data_ready(s, top.id, d, 0);
        place_miss miss = {.dev = -1};
        if (dr > top.key || !fits_why(s, top.id, d, &miss)) {
            place_heap_pop(w);
            if (dr > top.key)
                push(s, w, dr, top.id);
            else
                block(s, top.id, d, &miss);
            continue;
        }
        *start = dr > fr ? dr : fr;
        return top.id;
    }
    return -1;
}

/* m-SCT: may `op` (starting at `st` on d) go before the favourite child f
 * that d waits for (f could start there at `fst`)?  "Urgent" means one of:
 *  - running op first does not delay f at all: st + time(op, d) <= fst
 *    (it fills the idle gap while f's inputs are still on their way);
 *  - op is strictly more critical than f: its bottom level (longest compute
 *    + communication path from its start to the end of the graph) is larger,
 *    so holding it back would lengthen a longer remaining path than f's. */
static int urgent(const etf *s, int op, int d, double st, int f, double fst)
{
    if (st + place_op_time(s->g, op, d) <= fst) return 1;
    return s->opt->level[op] > s->opt->level[f];
}

/* Device d's candidate: its best op, or the favourite child it waits for. */
static int candidate(etf *s, int d, double *start)
{
    int op = best_on(s, d, start);
    int f = s->reserved ? s->reserved[d] : -1;
    if (f < 0 || op == f) return op;
    if (!valid(s, f, d) || !fits(s, f, d)) {
        s->reserved[d] = -1;
        return op;
    }
    double fst = start_on(s, f, d);
    if (op >= 0 && *start < fst && urgent(s, op, d, *start, f, fst)) return op;
    s->alt = op;
    *start = fst;
    return f;
}

/* ---- readiness and commit ---- */

/* m-SCT: the device that just ran f's favourite parent waits for f when f
 * starts there no later than anywhere else. */
static void reserve_favourite(etf *s, int f)
{
    int u = s->opt->fav_parent[f];
    if (u < 0 || !s->done[u]) return;
    int du = s->where[u];
    if (s->last_op[du] != u || !allowed(s, f, du)) return;
    double best = start_on(s, f, du);
    for (int d = 0; d < s->g->n_devices; d++)
        if (d != du && allowed(s, f, d) && start_on(s, f, d) < best) return;
    s->reserved[du] = f;
    s->c_ok[du] = 0;
}

static void make_ready(etf *s, int v)
{
    const place_graph *g = s->g;
    double lb = 0;
    for (int k = g->in_off[v]; k < g->in_off[v + 1]; k++) {
        double e = s->end[g->edges[g->in_edge[k]].src];
        if (e > lb) lb = e;
    }
    if (s->where[v] >= 0) {
        push_new(s, s->where[v], lb, v);
    } else if (s->pin && s->pin[v] >= 0) {
        push_new(s, s->pin[v], lb, v);
    } else {
        for (int d = 0; d < g->n_devices; d++)
            push_new(s, d, lb, v);
    }
    if (s->opt->fav_parent) reserve_favourite(s, v);
}

static int unit_key(const etf *s, int op)
{
    int k = s->g->ops[op].group;
    return k < 0 ? op : s->g->n_ops + k;
}

/* The units next to a unit just placed. */
static void stamp_neighbours(etf *s, const int *unit, int n)
{
    const place_graph *g = s->g;
    for (int i = 0; i < n; i++) {
        int m = unit[i];
        for (int k = g->in_off[m]; k < g->in_off[m + 1]; k++)
            s->ustamp[unit_key(s, g->edges[g->in_edge[k]].src)] = s->epoch;
        for (int k = g->out_off[m]; k < g->out_off[m + 1]; k++)
            s->ustamp[unit_key(s, g->edges[g->out_edge[k]].dst)] = s->epoch;
    }
}

/* The slack (free total - rem) now.  With `charged` (after a unit was
 * assigned, before its frees), its decrease accumulates in s->drop: a
 * cached candidate whose devices were not charged loses exactly that much
 * of its surplus (frees never lower a surplus). */
static void track_slack(etf *s, int charged)
{
    int64_t now = place_ledger_free_total(s->led) - s->rem;
    if (charged && now < s->slack) s->drop += s->slack - now;
    s->slack = now;
}

/* Places op's whole unit on dev in the ledger and the plan. */
static int assign_unit(etf *s, int op, int dev)
{
    int n;
    const int *unit = place_unit_of(s->g, &s->gr, &op, &n);
    int64_t held = held_for(s, op, unit, n);
    s->rem -= reserve_part(s, op, unit, n);
    place_ledger_reserve(s->led, dev, -held);
    if (place_ledger_try(s->led, unit, n, dev, NULL) != 1) return -1; /* fits() said yes and nothing changed since */
    place_ledger_commit(s->led);
    track_slack(s, 1);
    stamp_neighbours(s, unit, n);
    for (int i = 0; i < n; i++) {
        int m = unit[i];
        s->where[m] = dev;
        /* members ready earlier may have lost their entry on dev */
        if (m != op && !s->done[m] && s->pending[m] == 0) push_new(s, dev, 0, m);
    }
    return 0;
}

static int commit(etf *s, int op, int dev)
{
    const place_graph *g = s->g;
    if (s->where[op] < 0 && assign_unit(s, op, dev) < 0) return -1;
    double st = data_ready(s, op, dev, 1);
    if (s->dev_free[dev] > st) st = s->dev_free[dev];
    s->end[op] = st + place_op_time(g, op, dev);
    s->dev_free[dev] = s->end[op];
    s->done[op] = 1;
    s->plan->order[s->n_done++] = op;
    if (place_ledger_append(s->led, op) < 0) s->oom = 1;
    if (s->reserved) {
        s->last_op[dev] = op;
        if (s->reserved[dev] == op) s->reserved[dev] = -1;
    }
    for (int k = g->out_off[op]; k < g->out_off[op + 1]; k++) {
        int v = g->edges[g->out_edge[k]].dst;
        if (--s->pending[v] == 0) make_ready(s, v);
    }
    return s->oom ? -1 : 0;
}

/* Heterogeneous devices: the op chosen by earliest start goes where it
 * finishes first (ties: earlier start, lower index).  On identical devices
 * that is the device where it starts first, i.e. plain m-ETF. */
static int fastest_finish(etf *s, int op, int dev, double *start)
{
    const place_graph *g = s->g;
    double best_fin = *start + place_op_time(g, op, dev);
    for (int d = 0; d < g->n_devices; d++) {
        if (d == dev || !valid(s, op, d) || !allowed(s, op, d)) continue;
        double st = start_on(s, op, d), fin = st + place_op_time(g, op, d);
        if (fin > best_fin || (fin == best_fin && (st > *start || (st == *start && d > dev))) || !fits(s, op, d)) continue;
        best_fin = fin, *start = st, dev = d;
    }
    return dev;
}

/* Device d's candidate, from its cache when nothing it depends on changed. */
static int cached_candidate(etf *s, int d, double *start)
{
    if (s->c_ok[d] && s->c_op[d] >= 0 && !valid(s, s->c_op[d], d)) s->c_ok[d] = 0;
    if (s->c_ok[d] && s->c_alt[d] >= 0 && !valid(s, s->c_alt[d], d)) s->c_ok[d] = 0;
    if (s->opt->no_cache) s->c_ok[d] = 0;
    if (!s->c_ok[d]) {
        s->dep_acc = s->fit_acc = 0;
        s->alt = -1;
        s->surplus = INT64_MAX;
        s->c_op[d] = candidate(s, d, &s->c_start[d]);
        s->c_alt[d] = s->alt;
        s->c_surplus[d] = s->surplus, s->c_drop[d] = s->drop;
        s->c_dep[d] = s->dep_acc, s->c_fit[d] = s->fit_acc, s->c_ok[d] = 1;
    }
    *start = s->c_start[d];
    return s->c_op[d];
}

/* After a commit on dev: drop the caches it may have made wrong. */
static void invalidate(etf *s, int dev)
{
    uint64_t charged = place_ledger_take_changed(s->led);
    s->c_ok[dev] = 0;
    for (int d = 0; d < s->g->n_devices; d++) {
        if ((s->c_dep[d] & s->send_changed) || (s->c_fit[d] & charged)) s->c_ok[d] = 0;
        if (s->c_op[d] >= 0 && s->ustamp[unit_key(s, s->c_op[d])] == s->epoch) s->c_ok[d] = 0;
        if (s->c_alt[d] >= 0 && s->ustamp[unit_key(s, s->c_alt[d])] == s->epoch) s->c_ok[d] = 0;
        if (s->drop - s->c_drop[d] > s->c_surplus[d]) s->c_ok[d] = 0; /* its reserve check may no longer hold */
    }
    s->send_changed = 0;
    s->epoch++;
}

static void unpark(etf *s, blocklist *b)
{
    for (int k = 0; k < b->n; k++)
        if (valid(s, b->op[k], b->dev[k])) push_new(s, b->dev[k], 0, b->op[k]);
    b->n = 0;
}

/* Parked pairs come back once enough was freed where they ran out, or the
 * slack grew enough for the reserve. */
static void unblock(etf *s)
{
    if (s->rblk.n > 0 && place_ledger_freed_total(s->led) >= s->rblk.min_missing) unpark(s, &s->rblk);
    for (int d = 0; d < s->g->n_devices; d++) {
        blocklist *b = &s->blk[d];
        b->freed += place_ledger_take_freed(s->led, d);
        if (b->n == 0 || b->freed < b->min_missing) continue;
        unpark(s, b);
    }
}

static void forget_candidates(etf *s)
{
    for (int d = 0; d < s->g->n_devices; d++)
        s->c_ok[d] = 0;
}

/* One step: the earliest (start, topological position, finish, device). */
static int step(etf *s)
{
    const place_graph *g = s->g;
    int best = -1, best_dev = -1;
    double best_start = 0, best_fin = 0;
    for (int d = 0; d < g->n_devices; d++) {
        double st = 0;
        int op = cached_candidate(s, d, &st);
        if (op < 0) continue;
        double fin = st + place_op_time(g, op, d);
        int better = best < 0 || st < best_start ||
                     (st == best_start && (g->topo_pos[op] < g->topo_pos[best] || (op == best && fin < best_fin)));
        if (!better) continue;
        best = op, best_dev = d, best_start = st, best_fin = fin;
    }
    if (s->oom) return RUN_OOM;
    if (best < 0 && s->rblk.n > 0 && !s->relax) {
        /* nothing meets the reserve: one step without it, by the same rule */
        s->relax = 1;
        unpark(s, &s->rblk);
        forget_candidates(s);
        return RUN_OK;
    }
    if (best < 0) return RUN_STUCK;
    int waited_for = s->reserved && s->reserved[best_dev] == best;
    if (s->hetero && !waited_for) best_dev = fastest_finish(s, best, best_dev, &best_start);
    if (commit(s, best, best_dev) < 0) return RUN_OOM;
    invalidate(s, best_dev);
    if (s->relax) s->relax = 0, forget_candidates(s); /* they were weighed without the reserve */
    track_slack(s, 0);
    unblock(s);
    return s->oom ? RUN_OOM : RUN_OK;
}

/* ---- setup ---- */

static void etf_free(etf *s)
{
    for (int d = 0; s->wait && d < s->g->n_devices; d++) {
        place_heap_clear(&s->wait[d]);
        place_heap_clear(&s->avail[d]);
    }
    free(s->wait), free(s->avail);
    free(s->dev_free), free(s->send_free), free(s->recv_free), free(s->end);
    free(s->pending), free(s->done);
    free(s->seen), free(s->sf_stamp), free(s->fidx), free(s->fr), free(s->sf_tmp);
    free(s->last_op), free(s->reserved);
    for (int d = 0; s->blk && d < s->g->n_devices; d++)
        free(s->blk[d].op), free(s->blk[d].dev);
    free(s->blk);
    free(s->rblk.op), free(s->rblk.dev);
    free(s->c_surplus), free(s->c_drop);
    free(s->ustamp);
    free(s->c_op), free(s->c_alt), free(s->c_ok), free(s->c_start), free(s->c_dep), free(s->c_fit);
    place_pairmap_free(s->arrival);
    place_ledger_free(s->led);
    place_groups_clear(&s->gr);
}

static int alloc_arrays(etf *s)
{
    const place_graph *g = s->g;
    size_t N = (size_t)g->n_ops, D = (size_t)g->n_devices;
    int max_in = 1;
    for (int i = 0; i < g->n_ops; i++)
        if (g->in_off[i + 1] - g->in_off[i] > max_in) max_in = g->in_off[i + 1] - g->in_off[i];
    s->wait = xcalloc(D, sizeof *s->wait), s->avail = xcalloc(D, sizeof *s->avail), s->blk = xcalloc(D, sizeof *s->blk);
    s->dev_free = xcalloc(D, sizeof(double)), s->send_free = xcalloc(D, sizeof(double));
    s->recv_free = xcalloc(D, sizeof(double)), s->end = xcalloc(N, sizeof(double));
    s->pending = xmalloc(N * sizeof(int)), s->done = xcalloc(N, 1);
    s->seen = xcalloc(N, sizeof(int64_t)), s->fidx = xmalloc(N * sizeof(int)), s->fr = xmalloc((size_t)max_in * sizeof(fresh));
    s->sf_stamp = xcalloc(D, sizeof(int64_t)), s->sf_tmp = xmalloc(D * sizeof(double));
    s->c_op = xmalloc(D * sizeof(int)), s->c_alt = xmalloc(D * sizeof(int)), s->c_ok = xcalloc(D, 1),
    s->c_start = xcalloc(D, sizeof(double));
    s->c_dep = xcalloc(D, sizeof(uint64_t)), s->c_fit = xcalloc(D, sizeof(uint64_t));
    s->c_surplus = xcalloc(D, sizeof(int64_t)), s->c_drop = xcalloc(D, sizeof(int64_t));
    s->ustamp = xmalloc((N + (size_t)g->n_groups) * sizeof(int64_t));
    for (size_t i = 0; i < N + (size_t)g->n_groups; i++)
        s->ustamp[i] = -1;
    for (size_t d = 0; d < D; d++)
        s->c_op[d] = s->c_alt[d] = -1;
    s->arrival = place_pairmap_new(g->n_devices);
    s->led = place_ledger_new(g, s->where);
    if (s->opt->fav_child) {
        s->last_op = xmalloc(D * sizeof(int)), s->reserved = xmalloc(D * sizeof(int));
        for (size_t d = 0; d < D; d++)
            s->last_op[d] = s->reserved[d] = -1;
    }
    return place_groups_build(g, &s->gr);
}

/* Holds the room of every pinned unit on its device. */
static void hold_pins(etf *s)
{
    const place_graph *g = s->g;
    for (int i = 0; s->pin && i < g->n_ops; i++) {
        int n, op = i;
        const int *unit = place_unit_of(g, &s->gr, &op, &n);
        if (s->pin[i] >= 0 && unit[0] == i && place_ledger_reserve(s->led, s->pin[i], place_unit_memory(g, unit, n)) < 0)
            s->oom = 1;
    }
}

static int etf_init(etf *s, const place_graph *g, const place_etf_opts *o, const pass *ps, place_plan *plan)
{
    *s = (etf){.g = g, .opt = o, .pin = ps->pin, .hold = ps->hold, .reserve = ps->reserve, .plan = plan, .where = plan->device};
    for (int i = 0; i < g->n_ops; i++)
        plan->device[i] = -1;
    place_plan_clear_xfers(plan);
    for (int d = 1; d < g->n_devices; d++)
        s->hetero |= g->devices[d].speed != g->devices[0].speed;
    if (alloc_arrays(s) < 0) return -1;
    hold_pins(s);
    for (int i = 0; i < g->n_ops; i++) {
        s->pending[i] = g->in_off[i + 1] - g->in_off[i];
        if (!(s->hold && s->pin && s->pin[i] >= 0)) s->rem += g->ops[i].persistent_bytes;
    }
    s->slack = place_ledger_free_total(s->led) - s->rem;
    for (int t = 0; t < g->n_ops; t++)
        if (s->pending[g->topo[t]] == 0) make_ready(s, g->topo[t]);
    return s->oom ? -1 : 0;
}

/* The ready op that fits nowhere (first in topological order), explained. */
static int explain_stuck(etf *s, char *reason, size_t len)
{
    const place_graph *g = s->g;
    int op = -1;
    for (int t = 0; t < g->n_ops && op < 0; t++)
        if (!s->done[g->topo[t]] && s->pending[g->topo[t]] == 0) op = g->topo[t];
    if (op < 0) op = g->topo[0]; /* cannot happen in a DAG */
    int n;
    const int *unit = place_unit_of(g, &s->gr, &op, &n);
    place_miss miss = {.dev = -1};
    int64_t held = held_for(s, op, unit, n);
    for (int d = 0; d < g->n_devices; d++) {
        if (!allowed(s, op, d)) continue;
        place_ledger_reserve(s->led, d, -held);
        if (place_ledger_try(s->led, unit, n, d, &miss) == 1) place_ledger_abort(s->led);
        place_ledger_reserve(s->led, d, held);
    }
    place_miss_explain(g, unit, n, &miss, reason, len);
    return op;
}

/* One greedy pass.  RUN_STUCK sets *stuck, *done (the ops it committed)
 * and the reason. */
static int run_once(const place_graph *g, const place_etf_opts *o, const pass *ps, place_plan *plan, int *stuck, int *done,
                    char *reason, size_t len)
{
    etf s;
    int rc = etf_init(&s, g, o, ps, plan) < 0 ? RUN_OOM : RUN_OK;
    while (rc == RUN_OK && s.n_done < g->n_ops)
        rc = step(&s);
    if (rc == RUN_STUCK) *stuck = explain_stuck(&s, reason, len), *done = s.n_done;
    if (rc == RUN_OOM) snprintf(reason, len, "out of memory");
    etf_free(&s);
    return rc;
}

/* ---- retries with pinned units ---- */

typedef struct pinset {
    int *pin;  /* op -> device, -1 */
    int *mark; /* op -> epoch it was last visited in (for_bundle) */
    int epoch;
    int *units; /* first op of each pinned unit */
    int n;
    place_groups gr;
} pinset;

static int cmp_unit_mem(const void *a, const void *b)
{
    const int64_t *x = a, *y = b; /* {memory, op} pairs, largest first */
    if (x[0] != y[0]) return x[0] > y[0] ? -1 : 1;
    return (x[1] > y[1]) - (x[1] < y[1]);
}

/* Calls fn(g, ps, unit's first op, arg) for the unit of `op` and each unit
 * of its ops' producers not pinned yet (ps->pin < 0), once each: the stuck
 * unit and the inputs it would otherwise pull from other devices. */
static void for_bundle(const place_graph *g, pinset *ps, int op, void (*fn)(const place_graph *, pinset *, int, void *), void *arg)
{
    int n, m;
    const int *unit = place_unit_of(g, &ps->gr, &op, &n);
    ps->mark[unit[0]] = ++ps->epoch;
    fn(g, ps, unit[0], arg);
    for (int i = 0; i < n; i++)
        for (int k = g->in_off[unit[i]]; k < g->in_off[unit[i] + 1]; k++) {
            int src = g->edges[g->in_edge[k]].src;
            const int *pu = place_unit_of(g, &ps->gr, &src, &m);
            if (ps->pin[pu[0]] >= 0 || ps->mark[pu[0]] == ps->epoch) continue;
            ps->mark[pu[0]] = ps->epoch;
            fn(g, ps, pu[0], arg);
        }
}

static void add_memory(const place_graph *g, pinset *ps, int op, void *arg)
{
    int n;
    const int *unit = place_unit_of(g, &ps->gr, &op, &n);
    *(int64_t *)arg += place_unit_memory(g, unit, n);
}

static void pin_to(const place_graph *g, pinset *ps, int op, void *arg)
{
    int n;
    const int *unit = place_unit_of(g, &ps->gr, &op, &n);
    for (int k = 0; k < n; k++)
        ps->pin[unit[k]] = *(int *)arg;
}

/* First-fit decreasing of the pinned bundles (a stuck unit with the units
 * of its producers, so it pulls no input from another device) by own
 * memory, each on the device with the most room left; a bundle that does
 * not fit there pins its unit alone.  -1 when some unit fits nowhere. */
static int assign_pins(const place_graph *g, pinset *ps)
{
    if (g->n_devices < 1) return -1;
    int64_t *room = xmalloc((size_t)g->n_devices * sizeof *room), (*order)[2] = xmalloc((size_t)ps->n * sizeof *order);
    for (int d = 0; d < g->n_devices; d++)
        room[d] = g->devices[d].memory_bytes;
    for (int i = 0; i < ps->n; i++) {
        order[i][0] = 0;
        for_bundle(g, ps, ps->units[i], add_memory, &order[i][0]);
        order[i][1] = i;
    }
    qsort(order, (size_t)ps->n, sizeof *order, cmp_unit_mem);
    int rc = 0;
    for (int i = 0; i < ps->n && rc == 0; i++) {
        int best = 0, op = ps->units[order[i][1]];
        for (int d = 1; d < g->n_devices; d++)
            if (room[d] > room[best]) best = d;
        int64_t need = 0, alone = 0;
        for_bundle(g, ps, op, add_memory, &need); /* producers pinned by a larger bundle are not counted */
        if (room[best] < need) {                  /* the unit alone, then */
            add_memory(g, ps, op, &alone);
            if (room[best] < alone) rc = -1;
            room[best] -= alone;
            pin_to(g, ps, op, &best);
            continue;
        }
        room[best] -= need;
        for_bundle(g, ps, op, pin_to, &best);
    }
    free(room);
    free(order);
    return rc;
}

static int pin_unit(const place_graph *g, pinset *ps, int op)
{
    if (!ps->pin) {
        ps->pin = xmalloc((size_t)g->n_ops * sizeof *ps->pin);
        ps->mark = xcalloc((size_t)g->n_ops, sizeof *ps->mark);
        ps->units = xmalloc(MAX_RETRIES * sizeof *ps->units);
        if (place_groups_build(g, &ps->gr) < 0) return -1;
    }
    for (int i = 0; i < g->n_ops; i++)
        ps->pin[i] = -1;
    int n;
    ps->units[ps->n++] = place_unit_of(g, &ps->gr, &op, &n)[0];
    return assign_pins(g, ps);
}

/* Whether op's unit alone needs more than any device has. */
static int fits_no_device(const place_graph *g, int op)
{
    place_groups gr = {0};
    int n = 0;
    if (place_groups_build(g, &gr) < 0) return 0;
    const int *unit = place_unit_of(g, &gr, &op, &n);
    int64_t own = place_unit_memory(g, unit, n);
    place_groups_clear(&gr);
    for (int d = 0; d < g->n_devices; d++)
        if (own <= g->devices[d].memory_bytes) return 0;
    return 1;
}

/* The pass with the memory reserve; when it is stuck, passes pinning one
 * more stuck unit with its inputs each time (see "Memory" at the top).
 * Never another algorithm's plan: when every pass is stuck the reason is
 * the first pass's (later passes are skewed by the pins) and says which
 * rules were tried. */
int place_etf_schedule(const place_graph *g, const place_etf_opts *opts, place_plan *plan, char *reason, size_t reason_len)
{
    static const place_etf_opts none;
    const place_etf_opts *o = opts ? opts : &none;
    pinset ps = {0};
    pass p = {.pin = NULL, .hold = 1, .reserve = 1};
    int stuck = -1, pinned = 0, done = 0, before;
    char first[320];
    plan->note[0] = '\0';
    int rc = run_once(g, o, &p, plan, &stuck, &done, reason, reason_len);
    if (rc != RUN_STUCK) return rc == RUN_OK ? 0 : -1;
    snprintf(first, sizeof first, "%s", reason);
    if (fits_no_device(g, stuck)) return -1; /* the reason says it all: no rule can help */
    for (; rc == RUN_STUCK && pinned < MAX_RETRIES; pinned++) {
        if (ps.pin && ps.pin[stuck] >= 0) break;
        if (pin_unit(g, &ps, stuck) < 0) break; /* the bundle fits next to no other pinned one */
        p.pin = ps.pin;
        before = done;
        rc = run_once(g, o, &p, plan, &stuck, &done, reason, reason_len);
        if (rc == RUN_STUCK && done < before) { /* pinning made it worse: not converging */
            pinned++;
            break;
        }
    }
    free(ps.pin);
    free(ps.mark);
    free(ps.units);
    place_groups_clear(&ps.gr);
    if (rc == RUN_OK)
        snprintf(plan->note, sizeof plan->note, "greedy pass stuck (%s); placed after pinning %d unit%s with their inputs", first,
                 pinned, pinned > 1 ? "s" : "");
    if (rc == RUN_STUCK)
        snprintf(reason, reason_len, "%s; still stuck with the memory reserve and %d unit%s pinned with their inputs", first,
                 pinned, pinned == 1 ? "" : "s");
    return rc == RUN_OK ? 0 : -1;
}

int place_algo_etf(const place_graph *g, place_plan *plan, char *reason, size_t reason_len)
{
    return place_etf_schedule(g, NULL, plan, reason, reason_len);
}
