/* infer_wire.h - the two lines an inference request and its reply are on their way through Redis
 * (the one encoder and decoder of each: server/infer.c writes requests and reads replies,
 * workers/serve_io.c reads requests and writes replies).
 *
 *   request, in gantry:infer:q:<job>:      "<id> <reply stream> <bytes of JSON> <body>"
 *   reply, a field "r" of the reply stream: "<id> <status> <body>"
 *
 * <id> is the server's decimal request number, <reply stream> the server's own stream
 * (gantry:infer:replies:<server>: no space in it), <bytes of JSON> how many bytes at the start of
 * <body> are JSON (the rest: binary tensor data, the Open Inference Protocol's binary extension),
 * <status> an HTTP status.  Pure: no I/O, no allocation. */
#ifndef GANTRY_INFER_WIRE_H
#define GANTRY_INFER_WIRE_H

#include <stddef.h>
#include <stdint.h>

#define IW_REPLY_TO_MAX 140 /* the longest reply stream name a request carries */
#define IW_HEAD_MAX 192     /* the longest request head: 20 digits, a stream name of up to IW_REPLY_TO_MAX, 20 digits, spaces */

/* the request's head (everything before the body) into out (IW_HEAD_MAX bytes); its length, or -1
 * when reply_to is empty, longer than IW_REPLY_TO_MAX, holds a space or does not fit */
int iw_request_head(char *out, size_t outlen, uint64_t id, const char *reply_to, size_t json_len);

typedef struct {
    const char *id;       /* NUL-terminated, in the parsed buffer */
    const char *reply_to; /* NUL-terminated, in the parsed buffer */
    const char *body;
    size_t len;      /* bytes of body */
    size_t json_len; /* <= len */
} iw_request;

/* parses a request line in place (the three spaces after the head fields become NULs); 0, or -1 when
 * it is malformed (a field missing or empty, the id or the JSON length not a decimal number, a NUL in
 * the stream name or one longer than IW_REPLY_TO_MAX, the JSON length larger than the body) */
int iw_request_parse(char *raw, size_t len, iw_request *out);

/* the reply's head "<id> <status> " into out; its length, or -1 when the id is empty, holds a space or
 * does not fit */
int iw_reply_head(char *out, size_t outlen, const char *id, int status);

/* parses a reply line (not modified); 0 with the id, the status (200 to 599) and the body, or -1 */
int iw_reply_parse(const char *v, size_t len, uint64_t *id, int *status, const char **body, size_t *body_len);

#endif
