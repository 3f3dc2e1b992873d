/* ledger.c - the memory bound over execution steps (why: ledger.h).
 *
 * An attempt adds deltas to device profiles and records each one, and each
 * change to the received-tensor map and to the "read elsewhere" flags, in
 * undo logs, so aborting costs what the attempt did. */
#include "workers/place/ledger.h"

#include "common/alloc.h"
#include "workers/place/pairmap.h"
#include "workers/place/profile.h"
#include "workers/place/xfer.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct delta {
    int dev, pos;
    int64_t bytes;
} delta;

/* An output read on other devices, waiting on its home device for a step
 * that surely runs after its transfers (see watch_output). */
typedef struct watch {
    int op, off, n; /* need[off..off+n): (device, step of its first consumer there) */
} watch;

typedef struct watchlist {
    watch *w;
    size_t n, cap;
} watchlist;

typedef struct acc_undo {
    int src, dev;
    int64_t old;
} acc_undo;

struct place_ledger {
    const place_graph *g;
    const int *where;
    place_profile *prof;
    int *len;             /* per device: ops appended */
    int64_t *freed;       /* per device: bytes freed since take_freed */
    int *step;            /* per op: its step on its device, -1 */
    int *held_at;         /* per op: where its output + temp are held until appended, -1 */
    int *pend;            /* per op: consumer edges not yet appended */
    int *last_local;      /* per op: step of its last consumer on its own device */
    char *remote;         /* per op: some consumer runs elsewhere */
    place_xfer_acc *acc;  /* (producer, device) -> edge bytes received */
    place_pairmap *last;  /* (producer, device) -> step of its last consumer there */
    int *stamp, *targets; /* scratch per device */
    /* the pending attempt */
    delta *deltas;
    size_t n_deltas, cap_deltas;
    acc_undo *undo;
    size_t n_undo, cap_undo;
    int *flagged; /* ops whose remote flag the attempt set */
    size_t n_flagged, cap_flagged;
    int *held; /* ops of the attempt, held at held_pos[i] once committed */
    int *held_pos;
    size_t n_held, cap_held, cap_held_pos;
    int64_t *before; /* per device: peak before the attempt, valid while touched */
    int *touched;
    char *is_touched;
    int n_touched;
    int64_t inbound; /* bytes the attempt's device receives */
    uint64_t changed;
    int64_t peak_sum;    /* sum of every device's peak, kept by prof_add */
    int64_t cap_sum;     /* sum of the capacities */
    int64_t freed_total; /* bytes freed so far on any device (frees, holds shrunk, reserves released) */
    watchlist *watching; /* per device, with l->after */
    int *need_dev, *need_step;
    size_t n_need, cap_need, cap_need_step;
    size_t n_watched; /* over every device: while 0, the need pool is reused */
    int *after; /* op x device: a copy of the op's output can reach the device no earlier than this step (see add_copy); NULL above
                   ANC_MAX_DEVICES */
};

/* Above this many devices the op x device table of add_copy costs too much
 * memory; copies are then charged from step 0. */
#define ANC_MAX_DEVICES 32

static int grow(void **a, size_t *cap, size_t n, size_t size)
{
    if (n < *cap) return 0;
    size_t c = *cap ? 2 * *cap : 64;
    *a = xreallocarray(*a, c, size);
    *cap = c;
    return 0;
}

place_ledger *place_ledger_new(const place_graph *g, const int *where)
{
    place_ledger *l = xcalloc(1, sizeof *l);
    size_t N = (size_t)g->n_ops, D = (size_t)g->n_devices;
    l->g = g, l->where = where;
    l->prof = xcalloc(D, sizeof *l->prof), l->len = xcalloc(D, sizeof(int)), l->freed = xcalloc(D, sizeof(int64_t));
    l->step = xmalloc(N * sizeof(int)), l->held_at = xmalloc(N * sizeof(int)), l->pend = xmalloc(N * sizeof(int));
    l->last_local = xmalloc(N * sizeof(int)), l->remote = xcalloc(N, 1);
    l->acc = place_xfer_acc_new(g->n_devices), l->last = place_pairmap_new(g->n_devices);
    l->stamp = xmalloc(D * sizeof(int)), l->targets = xmalloc(D * sizeof(int));
    l->before = xcalloc(D, sizeof(int64_t)), l->touched = xcalloc(D, sizeof(int)), l->is_touched = xcalloc(D, 1);
    for (size_t i = 0; i < N; i++) {
        l->step[i] = l->held_at[i] = l->last_local[i] = -1;
        l->pend[i] = g->out_off[i + 1] - g->out_off[i];
    }
    if (D <= ANC_MAX_DEVICES) l->after = xcalloc(N * D, sizeof(int)), l->watching = xcalloc(D, sizeof *l->watching);
    for (size_t d = 0; d < D; d++) {
        l->stamp[d] = -1;
        l->cap_sum += g->devices[d].memory_bytes;
    }
    return l;
}

void place_ledger_free(place_ledger *l)
{
    if (!l) return;
    for (int d = 0; l->prof && d < l->g->n_devices; d++)
        place_profile_clear(&l->prof[d]);
    for (int d = 0; l->watching && d < l->g->n_devices; d++)
        free(l->watching[d].w);
    free(l->watching), free(l->need_dev), free(l->need_step);
    free(l->prof), free(l->len), free(l->freed), free(l->step), free(l->held_at), free(l->pend), free(l->last_local);
    free(l->remote), free(l->stamp), free(l->targets), free(l->before), free(l->touched), free(l->is_touched);
    free(l->deltas), free(l->undo), free(l->flagged), free(l->held), free(l->held_pos), free(l->after);
    place_xfer_acc_free(l->acc);
    place_pairmap_free(l->last);
    free(l);
}

/* Every change to a profile goes through here, so peak_sum stays exact. */
static int prof_add(place_ledger *l, int dev, int pos, int64_t bytes)
{
    place_profile *p = &l->prof[dev];
    int64_t old = place_profile_peak(p);
    int rc = place_profile_add(p, pos, bytes);
    l->peak_sum += place_profile_peak(p) - old;
    return rc;
}

/* ---- attempts ---- */

static int charge(place_ledger *l, int dev, int pos, int64_t bytes)
{
    if (bytes == 0) return 0;
    if (!l->is_touched[dev]) {
        l->is_touched[dev] = 1;
        l->touched[l->n_touched++] = dev;
        l->before[dev] = place_profile_peak(&l->prof[dev]);
    }
    if (grow((void **)&l->deltas, &l->cap_deltas, l->n_deltas, sizeof *l->deltas) < 0) return -1;
    if (prof_add(l, dev, pos, bytes) < 0) return -1;
    l->deltas[l->n_deltas++] = (delta){dev, pos, bytes};
    return 0;
}

static int flag_remote(place_ledger *l, int op)
{
    if (l->remote[op]) return 0;
    if (grow((void **)&l->flagged, &l->cap_flagged, l->n_flagged, sizeof *l->flagged) < 0) return -1;
    l->remote[op] = 1;
    l->flagged[l->n_flagged++] = op;
    return 0;
}

/* The tensor of `src` is now also read on `dev` through an edge of `bytes`:
 * the copy there may grow (xfer.h).  It is held from the first step at
 * which it can exist: its transfer starts after src ends, src ends after
 * every one of its ancestors, and an ancestor that ran at step j of `dev`
 * has ended before dev's step j + 1 begins (a device runs its ops one at a
 * time), so the copy cannot be allocated before that step (frees come
 * before allocations at equal times, sim.h).  l->after holds that step per
 * device for every op appended; otherwise (not appended yet, or too many
 * devices) the copy is held from the start. */
static int add_copy(place_ledger *l, int src, int dev, int64_t bytes, int unit_dev)
{
    if (grow((void **)&l->undo, &l->cap_undo, l->n_undo, sizeof *l->undo) < 0) return -1;
    int64_t old = place_xfer_acc_get(l->acc, src, dev);
    l->undo[l->n_undo++] = (acc_undo){src, dev, old};
    if (place_xfer_acc_set(l->acc, src, dev, old + bytes) < 0) return -1;
    int64_t more = place_xfer_bytes(l->g, src, old + bytes) - place_xfer_bytes(l->g, src, old);
    if (dev == unit_dev) l->inbound += more;
    if (flag_remote(l, src) < 0) return -1;
    int from = l->after && l->step[src] >= 0 ? l->after[(size_t)src * (size_t)l->g->n_devices + (size_t)dev] : 0;
    return charge(l, dev, from, more);
}

static int charge_op(place_ledger *l, int op, int dev)
{
    const place_graph *g = l->g;
    const place_op *o = &g->ops[op];
    if (charge(l, dev, 0, o->persistent_bytes) < 0 || charge(l, dev, l->len[dev], o->output_bytes + o->temp_bytes) < 0) return -1;
    if (grow((void **)&l->held, &l->cap_held, l->n_held, sizeof *l->held) < 0) return -1;
    if (grow((void **)&l->held_pos, &l->cap_held_pos, l->n_held, sizeof *l->held_pos) < 0) return -1;
    l->held[l->n_held] = op;
    l->held_pos[l->n_held++] = o->output_bytes + o->temp_bytes ? l->len[dev] : -1;
    for (int k = g->in_off[op]; k < g->in_off[op + 1]; k++) {
        const place_edge *e = &g->edges[g->in_edge[k]];
        int from = l->where[e->src];
        if (from >= 0 && from != dev && add_copy(l, e->src, dev, e->bytes, dev) < 0) return -1;
    }
    for (int k = g->out_off[op]; k < g->out_off[op + 1]; k++) {
        const place_edge *e = &g->edges[g->out_edge[k]];
        int to = l->where[e->dst];
        if (to >= 0 && to != dev && add_copy(l, op, to, e->bytes, dev) < 0) return -1;
    }
    return 0;
}

static void end_attempt(place_ledger *l, int keep)
{
    for (int i = 0; i < l->n_touched; i++) {
        if (keep) l->changed |= UINT64_C(1) << (l->touched[i] & 63);
        l->is_touched[l->touched[i]] = 0;
    }
    l->n_touched = 0;
    l->inbound = 0;
    if (!keep) {
        while (l->n_deltas > 0) { /* the positions exist: cannot fail */
            const delta *d = &l->deltas[--l->n_deltas];
            prof_add(l, d->dev, d->pos, -d->bytes);
        }
        while (l->n_undo > 0) {
            const acc_undo *u = &l->undo[--l->n_undo];
            place_xfer_acc_set(l->acc, u->src, u->dev, u->old); /* the key exists: cannot fail */
        }
        while (l->n_flagged > 0)
            l->remote[l->flagged[--l->n_flagged]] = 0;
    }
    for (size_t i = 0; keep && i < l->n_held; i++)
        l->held_at[l->held[i]] = l->held_pos[i];
    l->n_deltas = l->n_undo = l->n_flagged = l->n_held = 0;
}

void place_ledger_commit(place_ledger *l)
{
    end_attempt(l, 1);
}

void place_ledger_abort(place_ledger *l)
{
    end_attempt(l, 0);
}

int64_t place_unit_memory(const place_graph *g, const int *ops, int n)
{
    int64_t own = 0;
    for (int i = 0; i < n; i++)
        own += place_op_memory(g, ops[i]);
    return own;
}

static void note_miss(place_ledger *l, int dev, int over, int64_t worst, place_miss *miss)
{
    const place_graph *g = l->g;
    if (!miss || (miss->dev >= 0 && worst >= miss->missing)) return;
    int64_t need = place_profile_peak(&l->prof[dev]) - (l->is_touched[dev] ? l->before[dev] : place_profile_peak(&l->prof[dev]));
    int64_t before = l->is_touched[over] ? l->before[over] : place_profile_peak(&l->prof[over]);
    *miss = (place_miss){dev, over, worst, need, l->inbound, g->devices[over].memory_bytes - before};
}

int place_ledger_try(place_ledger *l, const int *ops, int n, int dev, place_miss *miss)
{
    const place_graph *g = l->g;
    for (int i = 0; i < n; i++)
        if (charge_op(l, ops[i], dev) < 0) {
            place_ledger_abort(l);
            return -1;
        }
    int over = dev;
    int64_t worst = INT64_MIN;
    for (int i = 0; i < l->n_touched; i++) {
        int d = l->touched[i];
        int64_t excess = place_profile_peak(&l->prof[d]) - g->devices[d].memory_bytes;
        if (excess > worst) worst = excess, over = d;
    }
    if (worst <= 0 || l->n_touched == 0) return 1;
    note_miss(l, dev, over, worst, miss);
    place_ledger_abort(l);
    return 0;
}

/* ---- steps and frees ---- */

static int free_at(place_ledger *l, int dev, int pos, int64_t bytes)
{
    if (bytes == 0) return 0;
    l->freed[dev] += bytes;
    l->freed_total += bytes;
    return prof_add(l, dev, pos, -bytes);
}

/* p's output is read on other devices, so its home device keeps it until
 * its transfers are done, which depends on timing.  But a step x of the
 * home device whose op has, on every such device, an ancestor that ran no
 * earlier than p's first consumer there (l->after), begins after those
 * consumers ended, hence after the transfers they waited for: the output
 * is freed from x on (every local consumer ran before x, which comes
 * later in the home device's order).  So p waits on its home device for
 * such a step; without one, it stays to the end. */
static int watch_output(place_ledger *l, int p)
{
    const place_graph *g = l->g;
    int home = l->where[p];
    watchlist *wl = &l->watching[home];
    if (grow((void **)&wl->w, &wl->cap, wl->n, sizeof *wl->w) < 0) return -1;
    watch *w = &wl->w[wl->n++];
    l->n_watched++;
    *w = (watch){p, (int)l->n_need, 0};
    for (int k = g->out_off[p]; k < g->out_off[p + 1]; k++) {
        int c = g->edges[g->out_edge[k]].dst, dc = l->where[c], j;
        if (dc == home) continue;
        for (j = 0; j < w->n && l->need_dev[w->off + j] != dc; j++)
            ;
        if (j < w->n) {
            if (l->step[c] < l->need_step[w->off + j]) l->need_step[w->off + j] = l->step[c];
            continue;
        }
        if (grow((void **)&l->need_dev, &l->cap_need, l->n_need, sizeof(int)) < 0 ||
            grow((void **)&l->need_step, &l->cap_need_step, l->n_need, sizeof(int)) < 0)
            return -1;
        l->need_dev[l->n_need] = dc, l->need_step[l->n_need++] = l->step[c];
        w->n++;
    }
    return 0;
}

/* Outputs waiting on dev whose transfers are surely done by its step i (op
 * x): freed from i on.  Looks at the first WATCH_SCAN waiting outputs. */
#define WATCH_SCAN 128
static int free_watched(place_ledger *l, int dev, int x, int i)
{
    watchlist *wl = &l->watching[dev];
    const int *row = &l->after[(size_t)x * (size_t)l->g->n_devices];
    size_t keep = 0, k = 0;
    for (; k < wl->n && k < WATCH_SCAN; k++) {
        const watch *w = &wl->w[k];
        int done = 1;
        for (int j = 0; j < w->n && done; j++)
            done = row[l->need_dev[w->off + j]] > l->need_step[w->off + j];
        if (!done)
            wl->w[keep++] = *w;
        else if (free_at(l, dev, i, l->g->ops[w->op].output_bytes) < 0)
            return -1;
    }
    if (keep < k) memmove(&wl->w[keep], &wl->w[k], (wl->n - k) * sizeof *wl->w);
    wl->n -= k - keep;
    l->n_watched -= k - keep;
    if (l->n_watched == 0) l->n_need = 0; /* nothing refers to the pool: reuse it */
    return 0;
}

/* Every consumer of p has its step: free what only they needed. */
static int release(place_ledger *l, int p)
{
    const place_graph *g = l->g;
    int home = l->where[p], nt = 0;
    if (!l->remote[p] && free_at(l, home, l->last_local[p] + 1, g->ops[p].output_bytes) < 0) return -1;
    if (l->remote[p] && l->watching && g->ops[p].output_bytes > 0 && watch_output(l, p) < 0) return -1;
    for (int k = g->out_off[p]; k < g->out_off[p + 1]; k++) {
        int to = l->where[g->edges[g->out_edge[k]].dst];
        if (to == home || l->stamp[to] == p) continue;
        l->stamp[to] = p;
        l->targets[nt++] = to;
    }
    for (int i = 0; i < nt; i++) {
        double last = 0;
        place_pairmap_get(l->last, p, l->targets[i], &last);
        int64_t bytes = place_xfer_bytes(g, p, place_xfer_acc_get(l->acc, p, l->targets[i]));
        if (free_at(l, l->targets[i], (int)last + 1, bytes) < 0) return -1;
    }
    return 0;
}

/* l->after for op, from its inputs (appended before it, or ignored: a
 * later bound from fewer ancestors is still a bound). */
static void note_ancestors(place_ledger *l, int op)
{
    const place_graph *g = l->g;
    size_t D = (size_t)g->n_devices;
    int *row = &l->after[(size_t)op * D];
    for (int k = g->in_off[op]; k < g->in_off[op + 1]; k++) {
        int q = g->edges[g->in_edge[k]].src;
        if (l->step[q] < 0) continue;
        const int *qr = &l->after[(size_t)q * D];
        for (size_t d = 0; d < D; d++)
            if (qr[d] > row[d]) row[d] = qr[d];
        if (l->step[q] + 1 > row[l->where[q]]) row[l->where[q]] = l->step[q] + 1;
    }
}

int place_ledger_append(place_ledger *l, int op)
{
    const place_graph *g = l->g;
    const place_op *o = &g->ops[op];
    int dev = l->where[op], i = l->len[dev]++;
    if (l->after) note_ancestors(l, op);
    if (l->watching && l->watching[dev].n > 0 && free_watched(l, dev, op, i) < 0) return -1;
    l->step[op] = i;
    if (l->held_at[op] >= 0 && prof_add(l, dev, l->held_at[op], -(o->output_bytes + o->temp_bytes)) < 0) return -1;
    if (prof_add(l, dev, i, o->output_bytes + o->temp_bytes) < 0 || prof_add(l, dev, i + 1, -o->temp_bytes) < 0) return -1;
    l->held_at[op] = -1;
    l->freed[dev] += o->output_bytes + o->temp_bytes; /* the hold shrinks to the exact intervals: at most this much */
    l->freed_total += o->output_bytes + o->temp_bytes;
    for (int k = g->in_off[op]; k < g->in_off[op + 1]; k++) {
        int src = g->edges[g->in_edge[k]].src;
        if (l->where[src] == dev)
            l->last_local[src] = i;
        else if (place_pairmap_set(l->last, src, dev, i) < 0)
            return -1;
        if (--l->pend[src] == 0 && release(l, src) < 0) return -1;
    }
    return 0;
}

/* ---- queries ---- */

int place_ledger_reserve(place_ledger *l, int dev, int64_t bytes)
{
    if (bytes < 0) l->freed_total -= bytes;
    return prof_add(l, dev, 0, bytes);
}

int64_t place_ledger_free_total(const place_ledger *l)
{
    return l->cap_sum - l->peak_sum;
}

int64_t place_ledger_freed_total(const place_ledger *l)
{
    return l->freed_total;
}

uint64_t place_ledger_touched_mask(const place_ledger *l)
{
    uint64_t m = 0;
    for (int i = 0; i < l->n_touched; i++)
        m |= UINT64_C(1) << (l->touched[i] & 63);
    return m;
}

uint64_t place_ledger_take_changed(place_ledger *l)
{
    uint64_t m = l->changed;
    l->changed = 0;
    return m;
}

int64_t place_ledger_take_freed(place_ledger *l, int dev)
{
    int64_t f = l->freed[dev];
    l->freed[dev] = 0;
    return f;
}

void place_miss_explain(const place_graph *g, const int *ops, int n, const place_miss *m, char *reason, size_t len)
{
    char who[PLACE_MAX_NAME * 2 + 64], inbound[96] = "";
    int first = ops[0], grp = g->ops[first].group;
    if (grp >= 0 && n > 1)
        snprintf(who, sizeof who, "op '%s' (group '%s', %d ops)", g->ops[first].name, g->group_names[grp], n);
    else
        snprintf(who, sizeof who, "op '%s'", g->ops[first].name);
    if (m->dev < 0) {
        snprintf(reason, len, "%s could not be placed", who);
        return;
    }
    if (m->over_dev != m->dev) {
        snprintf(reason, len, "%s fits on no device: on '%s' the tensors it sends would overflow '%s' (missing %lld bytes)", who,
                 g->devices[m->dev].name, g->devices[m->over_dev].name, (long long)m->missing);
        return;
    }
    if (m->inbound > 0)
        snprintf(inbound, sizeof inbound, " (including %lld bytes of inputs from other devices)", (long long)m->inbound);
    snprintf(reason, len, "%s needs %lld bytes%s but the largest free device memory is %lld bytes on '%s' (missing %lld bytes)",
             who, (long long)m->need, inbound, (long long)m->free_bytes, g->devices[m->dev].name, (long long)m->missing);
}
