/* memnet.h - the in-memory transport of net.h: the sites of a simulation run
 * as threads of one process and meet in a hub.  get blocks on a condition
 * variable until the channel has its messages (or the deadline).
 *
 * With a log (fed_memnet_new(1)) the hub keeps every message ever put, with
 * its writer and channel, even after a drop: what Redis would have seen.  The
 * privacy audit (fed_audit.h) reads it.  Without a log, a drop frees the messages
 * (the simulator's rounds move megabytes).
 *
 * Faults (the dropout tests and `gantry-fed-sim --drop`): a party can be killed when it first puts on a
 * channel whose name starts with a prefix (that put and everything after it fails, as for a process that
 * died there), delayed there (its put waits: a late arrival), or garbled there (one byte of that put
 * flipped: a malformed message). */
#ifndef GANTRY_FED_MEMNET_H
#define GANTRY_FED_MEMNET_H

#include "workers/fed/net.h"

typedef struct fed_memnet fed_memnet;

typedef struct {
    int writer;    /* the endpoint's id */
    char chan[64]; /* the channel */
    fed_blob blob; /* the bytes, as put */
} fed_memnet_msg;

fed_memnet *fed_memnet_new(int keep_log);
void fed_memnet_free(fed_memnet *h);
/* the endpoint of party `who` (owned by the hub) */
fed_net *fed_memnet_endpoint(fed_memnet *h, int who);
enum { FED_FAULT_NONE, FED_FAULT_KILL, FED_FAULT_DELAY, FED_FAULT_GARBLE };
/* arms one fault for party who, at its first put on a channel starting with prefix (delay: ms) */
void fed_memnet_fault(fed_memnet *h, int who, const char *prefix, int kind, int ms);
/* the log, in put order (keep_log) */
size_t fed_memnet_count(const fed_memnet *h);
const fed_memnet_msg *fed_memnet_at(const fed_memnet *h, size_t i);

#endif
