/* rdv_wire.h - the codec of a gang's rendezvous, the hash K_RDV_PREFIX<job>:<generation> (wire/keys.h):
 * its field names, the one encoder of what a member sends to join (the ARGV of wire/lua/rdv_join.lua)
 * and of the names it writes, and the one decoder of the hash as a member reads it (HGETALL).
 * Used by workers/rendezvous.c; pure, no hiredis (tests/unit/test_rdv_wire.c, tests/fuzz/fuzz_rdv.c;
 * tests/unit/test_scripts.c decodes what the scripts wrote with it).
 *
 * The hash's fields:
 *   world         the gang's size, written by the dispatch script (wire/lua/dispatch.lua) for a gang
 *   n             how many members have joined (rdv_join.lua)
 *   addr:<rank>   a member's "host:port" (rdv_join.lua; rank in join order from 0)
 *   worker:<rank> its worker id (rdv_join.lua)
 *   abort         why a member gave up (HSETNX: the first reason stays)
 *   val:<name>    a value the members share (rank 0's NCCL id, the master port)
 * Numbers (world, n, a rank) are decimals without sign or leading zeros. */
#ifndef GANTRY_RDV_WIRE_H
#define GANTRY_RDV_WIRE_H

#include <stdbool.h>
#include <stddef.h>

#define RDV_MAX_WORLD 64
#define RDV_ADDR_LEN 80    /* an address with its NUL */
#define RDV_REASON_LEN 256 /* an abort reason kept, with its NUL (a longer one is cut) */
#define RDV_MAX_FIELDS                                                                                                             \
    (2 * (3 + 2 * RDV_MAX_WORLD + 32)) /* strings the decoder looks at: world, n, abort, each member's addr: and worker:, 32 val:  \
                                          (a field and its value each) */

#define RDV_F_WORLD "world"
#define RDV_F_N "n"
#define RDV_F_ADDR "addr:"
#define RDV_F_WORKER "worker:"
#define RDV_F_ABORT "abort"
#define RDV_F_VAL "val:"

/* ---- encoders ---- */

/* what a member sends to join: rdv_join.lua's ARGV (after the key) */
typedef struct {
    int world;             /* the gang's size, 1 to RDV_MAX_WORLD */
    const char *addr;      /* its "host:port", shorter than RDV_ADDR_LEN, not empty */
    const char *worker_id; /* not empty */
    int ttl_ms;            /* the hash's expiry after this join, > 0 */
} rdv_join_msg;

typedef struct {
    char world[16], ttl[16];
} rdv_join_nums;

#define RDV_JOIN_ARGC 4
/* 0 with argv[RDV_JOIN_ARGC] (pointing into m and nums), or -1 when m is out of range */
int rdv_join_encode(const rdv_join_msg *m, rdv_join_nums *nums, const char *argv[RDV_JOIN_ARGC]);
/* the field of a shared value: "val:<name>"; 0, or -1 when it does not fit in len */
int rdv_field_val(char *buf, size_t len, const char *name);

/* ---- decoder ---- */

typedef struct {
    int world;  /* the "world" field, 0 when absent */
    int joined; /* "n", 0 when absent */
    int naddrs; /* addresses found */
    bool have[RDV_MAX_WORLD];
    char addrs[RDV_MAX_WORLD][RDV_ADDR_LEN];
    bool aborted;
    char abort[RDV_REASON_LEN];
} rdv_state;

/* the hash as HGETALL gives it: n strings (field, value ...), v[i] of lens[i] bytes, not necessarily
 * NUL-terminated.  0 with *out filled, or -1 when they are not a rendezvous of this format: n odd or above
 * RDV_MAX_FIELDS, world or n not a number (n above RDV_MAX_WORLD), an addr:<rank> whose rank is not a
 * number below RDV_MAX_WORLD or whose address is empty, too long or holds a NUL.  Other fields (worker:,
 * val:, a newer writer's) are skipped. */
int rdv_decode(size_t n, const char *const *v, const size_t *lens, rdv_state *out);
/* a number field's value (world from HGET): 0 to 999999999, or -1 */
long rdv_number(const char *v, size_t len);

#endif
