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

typedef struct delta {
    int dev, pos;
    int64_t bytes;
} delta;

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
};

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
    for (size_t d = 0; d < D; d++)
        l->stamp[d] = -1;
    return l;
}

void place_ledger_free(place_ledger *l)
{
    if (!l) return;
    for (int d = 0; l->prof && d < l->g->n_devices; d++)
        place_profile_clear(&l->prof[d]);
    free(l->prof), free(l->len), free(l->freed), free(l->step), free(l->held_at), free(l->pend), free(l->last_local);
    free(l->remote), free(l->stamp), free(l->targets), free(l->before), free(l->touched), free(l->is_touched);
    free(l->deltas), free(l->undo), free(l->flagged), free(l->held), free(l->held_pos);
    place_xfer_acc_free(l->acc);
    place_pairmap_free(l->last);
    free(l);
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
    if (place_profile_add(&l->prof[dev], pos, bytes) < 0) return -1;
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
 * the copy there may grow (xfer.h), and is held from the start. */
static int add_copy(place_ledger *l, int src, int dev, int64_t bytes, int unit_dev)
{
    if (grow((void **)&l->undo, &l->cap_undo, l->n_undo, sizeof *l->undo) < 0) return -1;
    int64_t old = place_xfer_acc_get(l->acc, src, dev);
    l->undo[l->n_undo++] = (acc_undo){src, dev, old};
    if (place_xfer_acc_set(l->acc, src, dev, old + bytes) < 0) return -1;
    int64_t more = place_xfer_bytes(l->g, src, old + bytes) - place_xfer_bytes(l->g, src, old);
    if (dev == unit_dev) l->inbound += more;
    if (flag_remote(l, src) < 0) return -1;
    return charge(l, dev, 0, more);
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
            place_profile_add(&l->prof[d->dev], d->pos, -d->bytes);
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
    return place_profile_add(&l->prof[dev], pos, -bytes);
}

/* Every consumer of p has its step: free what only they needed. */
static int release(place_ledger *l, int p)
{
    const place_graph *g = l->g;
    int home = l->where[p], nt = 0;
    if (!l->remote[p] && free_at(l, home, l->last_local[p] + 1, g->ops[p].output_bytes) < 0) return -1;
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

int place_ledger_append(place_ledger *l, int op)
{
    const place_graph *g = l->g;
    const place_op *o = &g->ops[op];
    int dev = l->where[op], i = l->len[dev]++;
    place_profile *p = &l->prof[dev];
    l->step[op] = i;
    if (l->held_at[op] >= 0 && place_profile_add(p, l->held_at[op], -(o->output_bytes + o->temp_bytes)) < 0) return -1;
    if (place_profile_add(p, i, o->output_bytes + o->temp_bytes) < 0 || place_profile_add(p, i + 1, -o->temp_bytes) < 0) return -1;
    l->held_at[op] = -1;
    l->freed[dev] += o->output_bytes + o->temp_bytes; /* the hold shrinks to the exact intervals: at most this much */
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

int64_t place_ledger_free_bytes(const place_ledger *l, int dev)
{
    return l->g->devices[dev].memory_bytes - place_profile_peak(&l->prof[dev]);
}

int place_ledger_reserve(place_ledger *l, int dev, int64_t bytes)
{
    return place_profile_add(&l->prof[dev], 0, bytes);
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
