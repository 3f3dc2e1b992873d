/* infer_frame.h - the frames of the direct inference path: a server's gateway (server/infer.c) and
 * a worker serving a replica (workers/serve_direct.c) over one persistent connection (TCP, or a
 * Unix socket on one host), with no Redis between them (docs/inference.md "The request path").
 *
 * Every frame is a fixed 24-byte head, then len bytes of body:
 *
 *   bytes 0..3    'G' 'F' '1' and the kind: 'H' hello, 'Q' request, 'R' reply
 *   bytes 4..7    request: bytes of JSON at the start of the body (the rest: binary tensor data, the
 *                 Open Inference Protocol's binary extension); reply: the HTTP status; hello: 0
 *   bytes 8..15   the request's id (the server's request number; a reply carries its request's)
 *   bytes 16..23  len, bytes of body
 *
 * numbers little-endian.  The server's first frame is a hello whose body is the endpoint's token
 * (what the worker registered in Redis); a connection that says anything else first, or a wrong
 * token, is closed.  Pure: no I/O, no allocation: the one encoder and decoder of the format. */
#ifndef GANTRY_INFER_FRAME_H
#define GANTRY_INFER_FRAME_H

#include <stddef.h>
#include <stdint.h>

#define IF_HEAD 24
#define IF_MAX_BODY ((uint64_t)1 << 31) /* a frame larger than this is refused (the server's body limit is lower) */

typedef enum { IF_HELLO = 'H', IF_REQUEST = 'Q', IF_REPLY = 'R' } if_kind;

typedef struct {
    if_kind kind;
    uint32_t arg; /* request: bytes of JSON; reply: status; hello: 0 */
    uint64_t id;
    uint64_t len; /* bytes of body that follow */
} if_head;

/* the head of a frame into out[IF_HEAD] */
void if_head_encode(unsigned char out[IF_HEAD], const if_head *h);

/* the head at in[IF_HEAD]; 0, or -1 when it is not a frame: a wrong magic or kind, len above
 * IF_MAX_BODY, a request's JSON length above its body, a reply's status outside 100..599 */
int if_head_decode(const unsigned char in[IF_HEAD], if_head *out);

#endif
