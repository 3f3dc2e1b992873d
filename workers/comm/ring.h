/* ring.h - the CPU collectives of a data-parallel gang: a TCP ring.
 *
 * Rank r connects to rank r+1 and accepts rank r-1 (mod world); a hello with a
 * magic, the gang's token ("job:generation"), rank and world guards against
 * stray connections (a silent one is dropped after a second).  All-reduce is a
 * chunked reduce-scatter followed by an all-gather (2(w-1)/w of the buffer
 * crosses each link, the optimum for a ring) run as one fused schedule: every
 * chunk a rank sends after its first is the one it has just received, so the
 * steps and both phases overlap segment by segment over nonblocking sockets,
 * and received floats are reduced as they arrive (through a one-segment
 * scratch buffer).  Each chunk is summed in one fixed order and then copied,
 * so every rank ends with bit-identical results.
 *
 * Nothing blocks forever: every wait is bounded by timeout_ms without progress;
 * a closed or reset neighbour fails a rank at once, and a rank that fails shuts
 * its sockets, so the failure reaches every rank of the ring within
 * milliseconds instead of a timeout each; after any error the ring is unusable
 * (ring_close only).  Floats travel in host byte order: every member
 * must be little-endian (x86-64, arm64).  No global state; one ring per thread. */
#ifndef GANTRY_COMM_RING_H
#define GANTRY_COMM_RING_H

#include <stddef.h>

typedef struct ring ring;

/* Listens on bind_host ("127.0.0.1", "0.0.0.0", a host name), an ephemeral port
 * put in *port.  The fd, or -1 with err. */
int ring_listen(const char *bind_host, int *port, char *err, size_t errlen);

/* Forms the ring (closes listen_fd): connects to next_addr ("host:port", retried
 * while refused) and accepts the previous rank.  timeout_ms bounds the whole
 * setup.  world 1: a ring without sockets.  NULL with err on failure. */
ring *ring_connect(int listen_fd, int rank, int world, const char *next_addr, const char *token, int timeout_ms, char *err,
                   size_t errlen);

/* In-place sum of n floats over every rank.  0, or -1 with err. */
int ring_allreduce(ring *r, float *buf, size_t n, int timeout_ms, char *err, size_t errlen);

/* Copies root's bytes to every rank, pipelined along the ring.  0, or -1 with err. */
int ring_broadcast(ring *r, void *buf, size_t bytes, int root, int timeout_ms, char *err, size_t errlen);

/* Sends send_len bytes to the next rank while receiving what the previous one
 * sends (its length first; at most RING_SHIFT_MAX): *recv malloc'd (NULL when
 * empty).  Model hopping moves models this way.  0, or -1 with err. */
#define RING_SHIFT_MAX ((size_t)1 << 34)
int ring_shift(ring *r, const void *send, size_t send_len, void **recv, size_t *recv_len, int timeout_ms, char *err, size_t errlen);

int ring_world(const ring *r);
void ring_close(ring *r);

#endif
