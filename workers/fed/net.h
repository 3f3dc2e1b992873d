/* net.h - how the sites of a federated job pass messages: named channels, each
 * an append-only list of messages.  A site appends (put) and waits, with a
 * deadline, for the first k messages of a channel (get).  Channel names are
 * relative to the job's generation ("hello", "key:3", "x:12:1", "x:12").
 *
 * Two transports implement it: Redis streams (workers/fed_io.c, the job: one
 * stream per channel, blocking XREAD) and memory (memnet.h: the simulator, the
 * privacy audit and the tests; it logs every put with its writer).  The
 * protocol over it (secagg.h) is the same code in all of them. */
#ifndef GANTRY_FED_NET_H
#define GANTRY_FED_NET_H

#include <stddef.h>

typedef struct {
    unsigned char *data; /* malloc'ed; fed_blobs_free */
    size_t len;
} fed_blob;

/* what put and get return */
#define FED_NET_OK 0
#define FED_NET_STOPPED 1    /* the job was asked to stop while waiting */
#define FED_NET_TIMEOUT (-1) /* the deadline passed (err says how many arrived) */
#define FED_NET_ERROR (-2)   /* the transport failed (err) */

typedef struct fed_net fed_net;
struct fed_net {
    /* appends one message to chan */
    int (*put)(fed_net *net, const char *chan, const void *data, size_t len, char *err, size_t errlen);
    /* waits until chan holds at least count messages; out[0..count-1]: the first count, in order */
    int (*get)(fed_net *net, const char *chan, int count, int timeout_ms, fed_blob *out, char *err, size_t errlen);
    /* nobody reads chan any more: its messages may go */
    void (*drop)(fed_net *net, const char *chan);
    /* optional (NULL: the caller makes do with get): waits until chan holds at least count messages or the
     * deadline passes, and says how many it holds in *have, reading none (the threshold mode's waits) */
    int (*count)(fed_net *net, const char *chan, int count, int timeout_ms, int *have, char *err, size_t errlen);
};

void fed_blobs_free(fed_blob *b, int n);

#endif
