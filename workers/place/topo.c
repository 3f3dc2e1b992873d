/* topo.c - m-TOPO: walk ops in topological order and fill device 0, then
 * device 1, and so on, each up to its real memory capacity.
 *
 * Capacity accounting is deliberately conservative.  At placement time we do
 * not know when tensors will be freed (that depends on timing across
 * devices), so a device is charged, for every op placed on it, with
 * persistent + output + temporary bytes as if all were live at once, plus
 * every tensor it receives from another device (sized by xfer.h, the rule the
 * simulator uses).  That sum bounds the device's memory at every instant of
 * any execution, so a plan m-TOPO accepts never runs out of memory in the
 * simulator nor on the workers; the price is unused headroom, and the
 * simulator reports the real peak.  (Baechi caps each device at total/D plus
 * the largest op instead, which ignores the real capacity.)
 *
 * A colocation group is placed whole, on one device, when its first op comes
 * in the order.  When the unit (op or group) does not fit on the current
 * device we move on to the next device where it fits; a unit that fits on no
 * later device may still go to an earlier one with room, so m-TOPO only fails
 * when no device at all can take it, and then it says which op and how many
 * bytes are missing. */
#include "workers/place/algo.h"
#include "workers/place/xfer.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct undo_entry {
    int src, dev;
    int64_t old;
} undo_entry;

/* The attempt that came closest to fitting, for the error message. */
typedef struct near_miss {
    int64_t missing;    /* bytes over capacity on over_dev */
    int dev;            /* device the unit was tried on */
    int over_dev;       /* device that overflowed (dev, or a receiver of the unit's outputs) */
    int64_t need;       /* bytes charged to dev */
    int64_t inbound;    /* of which tensors received from other devices */
    int64_t free_bytes; /* free bytes on over_dev */
} near_miss;

typedef struct topo_state {
    const place_graph *g;
    place_plan *plan;
    int64_t *used;   /* bytes charged per device */
    int64_t *charge; /* bytes the current attempt adds per device */
    int *touched;    /* devices with a charge in the current attempt */
    char *is_touched;
    int n_touched;
    place_xfer_acc *acc;
    undo_entry *undo;
    size_t n_undo, cap_undo;
    int *grp_off, *grp_ops; /* members of each group, in topological order */
    int cursor;
} topo_state;

static void charge_dev(topo_state *s, int dev, int64_t bytes)
{
    if (!s->is_touched[dev]) {
        s->is_touched[dev] = 1;
        s->touched[s->n_touched++] = dev;
    }
    s->charge[dev] += bytes;
}

/* Tensor of `src` now also consumed on `dev` through an edge of `bytes`. */
static int add_inbound(topo_state *s, int src, int dev, int64_t bytes)
{
    if (s->n_undo == s->cap_undo) {
        size_t cap = s->cap_undo ? 2 * s->cap_undo : 64;
        undo_entry *u = realloc(s->undo, cap * sizeof *u);
        if (!u) return -1;
        s->undo = u;
        s->cap_undo = cap;
    }
    int64_t old = place_xfer_acc_get(s->acc, src, dev);
    s->undo[s->n_undo++] = (undo_entry){src, dev, old};
    if (place_xfer_acc_set(s->acc, src, dev, old + bytes) < 0) return -1;
    charge_dev(s, dev, place_xfer_bytes(s->g, src, old + bytes) - place_xfer_bytes(s->g, src, old));
    return 0;
}

/* Charges for putting `ops` on `dev`: their own memory, tensors they receive
 * from placed producers elsewhere, tensors placed consumers elsewhere receive
 * from them.  Edges inside the unit are local and cost nothing extra. */
static int charge_unit(topo_state *s, const int *ops, int n, int dev)
{
    const place_graph *g = s->g;
    const int *where = s->plan->device;
    for (int i = 0; i < n; i++) {
        int op = ops[i];
        charge_dev(s, dev, place_op_memory(g, op));
        for (int k = g->in_off[op]; k < g->in_off[op + 1]; k++) {
            const place_edge *e = &g->edges[g->in_edge[k]];
            if (where[e->src] >= 0 && where[e->src] != dev && add_inbound(s, e->src, dev, e->bytes) < 0) return -1;
        }
        for (int k = g->out_off[op]; k < g->out_off[op + 1]; k++) {
            const place_edge *e = &g->edges[g->out_edge[k]];
            int to = where[e->dst];
            if (to >= 0 && to != dev && add_inbound(s, op, to, e->bytes) < 0) return -1;
        }
    }
    return 0;
}

static void reset_attempt(topo_state *s, int keep)
{
    for (int i = 0; i < s->n_touched; i++) {
        int d = s->touched[i];
        if (keep) s->used[d] += s->charge[d];
        s->charge[d] = 0;
        s->is_touched[d] = 0;
    }
    s->n_touched = 0;
    while (!keep && s->n_undo > 0) {
        undo_entry *u = &s->undo[--s->n_undo];
        place_xfer_acc_set(s->acc, u->src, u->dev, u->old); /* key exists: cannot fail */
    }
    s->n_undo = 0;
}

/* 1 when the unit was placed on `dev`, 0 when it does not fit (miss updated
 * if this was the closest attempt so far), -1 when out of memory. */
static int try_device(topo_state *s, const int *ops, int n, int dev, near_miss *miss)
{
    const place_graph *g = s->g;
    if (charge_unit(s, ops, n, dev) < 0) {
        reset_attempt(s, 0);
        return -1;
    }
    int over = dev;
    int64_t worst = INT64_MIN;
    for (int i = 0; i < s->n_touched; i++) {
        int d = s->touched[i];
        int64_t excess = s->used[d] + s->charge[d] - g->devices[d].memory_bytes;
        if (excess > worst) worst = excess, over = d;
    }
    if (worst <= 0) {
        for (int i = 0; i < n; i++)
            s->plan->device[ops[i]] = dev;
        reset_attempt(s, 1);
        return 1;
    }
    if (miss->dev < 0 || worst < miss->missing) {
        int64_t own = 0;
        for (int i = 0; i < n; i++)
            own += place_op_memory(g, ops[i]);
        *miss = (near_miss){worst, dev, over, s->charge[dev], s->charge[dev] - own, g->devices[over].memory_bytes - s->used[over]};
    }
    reset_attempt(s, 0);
    return 0;
}

static void explain(const topo_state *s, int first, int n, const near_miss *m, char *reason, size_t len)
{
    const place_graph *g = s->g;
    char who[PLACE_MAX_NAME * 2 + 64], inbound[96] = "";
    int grp = g->ops[first].group;
    if (grp >= 0 && n > 1)
        snprintf(who, sizeof who, "op '%s' (group '%s', %d ops)", g->ops[first].name, g->group_names[grp], n);
    else
        snprintf(who, sizeof who, "op '%s'", g->ops[first].name);
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

/* Places one unit: current device, later devices, then earlier ones. */
static int place_unit(topo_state *s, const int *ops, int n, char *reason, size_t len)
{
    int D = s->g->n_devices;
    near_miss miss = {.dev = -1};
    for (int i = 0; i < D; i++) {
        int dev = (s->cursor + i) % D;
        int rc = try_device(s, ops, n, dev, &miss);
        if (rc < 0) return snprintf(reason, len, "out of memory"), -1;
        if (rc == 0) continue;
        if (dev > s->cursor) s->cursor = dev;
        return 0;
    }
    explain(s, ops[0], n, &miss, reason, len);
    return -1;
}

static int build_groups(topo_state *s)
{
    const place_graph *g = s->g;
    s->grp_off = calloc((size_t)g->n_groups + 1, sizeof *s->grp_off);
    s->grp_ops = malloc((size_t)g->n_ops * sizeof *s->grp_ops);
    int *fill = calloc((size_t)g->n_groups + 1, sizeof *fill);
    if (!s->grp_off || !s->grp_ops || !fill) return free(fill), -1;
    for (int i = 0; i < g->n_ops; i++)
        if (g->ops[i].group >= 0) s->grp_off[g->ops[i].group + 1]++;
    for (int k = 0; k < g->n_groups; k++)
        s->grp_off[k + 1] += s->grp_off[k];
    for (int t = 0; t < g->n_ops; t++) {
        int op = g->topo[t], k = g->ops[op].group;
        if (k >= 0) s->grp_ops[s->grp_off[k] + fill[k]++] = op;
    }
    free(fill);
    return 0;
}

static void state_free(topo_state *s)
{
    free(s->used);
    free(s->charge);
    free(s->touched);
    free(s->is_touched);
    free(s->undo);
    free(s->grp_off);
    free(s->grp_ops);
    place_xfer_acc_free(s->acc);
}

static int state_init(topo_state *s, const place_graph *g, place_plan *plan)
{
    size_t D = (size_t)g->n_devices;
    *s = (topo_state){.g = g, .plan = plan};
    s->used = calloc(D, sizeof *s->used);
    s->charge = calloc(D, sizeof *s->charge);
    s->touched = calloc(D, sizeof *s->touched);
    s->is_touched = calloc(D, 1);
    s->acc = place_xfer_acc_new(g->n_devices);
    if (!s->used || !s->charge || !s->touched || !s->is_touched || !s->acc) return -1;
    return build_groups(s);
}

int place_algo_topo(const place_graph *g, place_plan *plan, char *reason, size_t reason_len)
{
    topo_state s;
    if (state_init(&s, g, plan) < 0) {
        state_free(&s);
        snprintf(reason, reason_len, "out of memory");
        return -1;
    }
    int rc = 0;
    for (int i = 0; i < g->n_ops; i++)
        plan->device[i] = -1;
    for (int t = 0; t < g->n_ops && rc == 0; t++) {
        int op = g->topo[t], k = g->ops[op].group;
        plan->order[t] = op;
        if (plan->device[op] >= 0) continue; /* placed with its group */
        if (k < 0)
            rc = place_unit(&s, &op, 1, reason, reason_len);
        else
            rc = place_unit(&s, s.grp_ops + s.grp_off[k], s.grp_off[k + 1] - s.grp_off[k], reason, reason_len);
    }
    state_free(&s);
    return rc;
}
