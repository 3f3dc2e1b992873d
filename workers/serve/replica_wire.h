/* replica_wire.h - the one wire format between a worker and its sandboxed replica process
 * (workers/replica_proc.h starts the process, workers/replica_main.c is the process).
 *
 * The replica reads frames on its stdin and writes frames on its stdout; nothing else connects
 * them (the replica has no network and no files).  A frame is a 16-byte header, then its payload:
 *
 *   u32 magic "GRW1" | u32 type | u64 payload bytes        (host byte order: both ends are one machine)
 *
 *   RW_READY    replica -> worker, once, after the model loaded and warmed up:  "<version>"
 *   RW_FAILED   replica -> worker, instead of READY: the reason the model did not load (text)
 *   RW_BATCH    worker -> replica: u32 n, then n x (u64 json_len, u64 len, len bytes): serve.h's
 *               serve_request bodies
 *   RW_REPLIES  replica -> worker: u32 n, then n x (u32 status, u64 len, len bytes): for each
 *               request of the batch in order, 200 with the reply body or 400 with the error body
 *   RW_BATCH_SHM    worker -> replica: the same batch with its bodies in the shared region
 *               (replica_shm.h): u32 n, then n x (u64 offset, u64 json_len, u64 len), then u64
 *               reply_offset, u64 reply_room: where the replica may write its RW_REPLIES payload
 *   RW_REPLIES_SHM  replica -> worker: u64 len: the RW_REPLIES payload is at reply_offset (a
 *               payload larger than reply_room comes as RW_REPLIES instead)
 *
 * The worker trusts nothing the replica sends: rw_parse_replies checks every count and length
 * against the frame and the batch it answers (a lie ends the replica).  Payloads are capped
 * (RW_MAX_PAYLOAD) so that neither side allocates what the other claims. */
#ifndef GANTRY_SERVE_REPLICA_WIRE_H
#define GANTRY_SERVE_REPLICA_WIRE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "workers/serve/serve.h"

#define RW_MAGIC 0x31575247u /* "GRW1" read as little-endian */
#define RW_HEADER 16
#define RW_MAX_PAYLOAD ((uint64_t)1 << 31) /* 2 GiB: 1,024 samples of the largest request the server admits */

enum { RW_READY = 1, RW_FAILED = 2, RW_BATCH = 3, RW_REPLIES = 4, RW_BATCH_SHM = 5, RW_REPLIES_SHM = 6 };

typedef struct {
    uint32_t type;
    uint64_t len;
} rw_header;

/* deadline_us: clock_mono_us() at which to give up, or 0 for never (blocking fds); the fds of the
 * worker's side are non-blocking, the replica's blocking.  All return 0, or -1 with errno
 * (ETIMEDOUT at the deadline, EPIPE / EPROTO when the other end went away or broke the format). */

/* writes a frame whose payload is the concatenation of n pieces */
int rw_write(int fd, uint32_t type, const void *const *pieces, const size_t *lens, int n, int64_t deadline_us);
/* reads a header (checks magic and RW_MAX_PAYLOAD) */
int rw_read_header(int fd, rw_header *h, int64_t deadline_us);
/* reads exactly len bytes */
int rw_read_exact(int fd, void *buf, size_t len, int64_t deadline_us);

/* the batch's payload for reqs[0..n): a malloc'd prefix of headers and the request bodies as
 * pieces (pieces/lens have room for 2n + 1); returns the number of pieces */
int rw_batch_pieces(const serve_request *reqs, int n, const void **pieces, size_t *lens, char **scratch);
/* parses a RW_BATCH payload in place into reqs (room for max); bodies point into payload.
 * Returns n, or -1 when the payload is malformed */
int rw_parse_batch(char *payload, size_t len, serve_request *reqs, int max);
/* a RW_BATCH_SHM payload (malloc'd, *len bytes) for reqs[0..n), whose bodies are at offs[i] in the
 * region, the replies' room at reply_off */
char *rw_shm_batch(const serve_request *reqs, const size_t *offs, int n, size_t reply_off, size_t reply_room, size_t *len);
/* parses a RW_BATCH_SHM payload against the region [base, base + size): reqs' bodies point into it.
 * Returns n (and the replies' room), or -1 when the payload is malformed or points outside */
int rw_parse_shm_batch(const char *payload, size_t len, char *base, size_t size, serve_request *reqs, int max, size_t *reply_off,
                       size_t *reply_room);

/* parses a RW_REPLIES payload for a batch of n: reqs[i].status and reqs[i].reply (a malloc'd,
 * NUL-terminated copy) or reqs[i].err for a 400.  -1 when it does not answer exactly n requests
 * with statuses 200 or 400 */
int rw_parse_replies(const char *payload, size_t len, serve_request *reqs, int n);

#endif
