/* multipart.h - a multipart/form-data request body (RFC 7578, RFC 2046 section 5.1), parsed in
 * memory: the model upload route (POST /v1/models/{name}/versions) reads its `file` and `metadata`
 * parts with it.  Pure: no I/O, no allocation; every part's data is a view into the body.
 *
 * What it accepts, and its limits:
 * - Content-Type: multipart/form-data (any case) with a boundary parameter, quoted or not, of 1 to
 *   70 characters from RFC 2046's bchars (letters, digits, '()+_,-./:=? and space, not last).
 * - The body: a preamble (ignored), then "--boundary" at the start of the body or of a line, then
 *   parts, each "CRLF headers CRLF CRLF data" and ended by "CRLF--boundary"; after the closing
 *   "--boundary--" an epilogue (ignored).  Spaces and tabs after a delimiter are allowed (RFC 2046's
 *   transport padding).  "CRLF--boundary" followed by anything else is part of the data.
 * - Line endings must be CRLF, as RFC 2046 says and curl, Python requests and browsers send; a body
 *   with LF-only lines is refused with a message saying so (a part's data may hold any bytes).
 * - Each part needs "Content-Disposition: form-data; name=..." (name 1 to 64 bytes); filename (up to
 *   255 bytes, may be empty) and Content-Type (up to 127 bytes) are optional; other headers are
 *   ignored.  Parameter values are tokens or quoted strings, where a backslash escapes the next
 *   character (curl writes filename="a\"b"); a name or filename must be UTF-8 without control
 *   characters.  RFC 2231 parameters (filename*=) are ignored.  Folded header lines are refused.
 * - A part's header section: at most MP_MAX_HEADER_BYTES bytes.  At most max_parts parts.
 * - Two parts with the same name are refused here ("part 'file' appears twice"): a caller finds
 *   each name at most once.
 * Any input, of any length and content, is read within [body, body + len) only (tests/fuzz/fuzz_multipart.c).
 *
 * Error messages name the part (its number from 1 and, once known, its name) and what to change;
 * they are UTF-8 and fit msg (cut at a character). */
#ifndef GANTRY_MULTIPART_H
#define GANTRY_MULTIPART_H

#include <stddef.h>

#define MP_MAX_HEADER_BYTES 8192 /* one part's header lines with their CRLFs, the blank line not counted */
#define MP_MAX_PARTS 16          /* what callers pass as max_parts unless they need fewer */
#define MP_NAME_MAX 64
#define MP_FILENAME_MAX 255
#define MP_CONTENT_TYPE_MAX 127

typedef struct mp_part {
    char name[MP_NAME_MAX + 1];                 /* Content-Disposition's name */
    char filename[MP_FILENAME_MAX + 1];         /* its filename, "" when absent or empty */
    int has_filename;                           /* 1 when a filename parameter was sent (even "") */
    char content_type[MP_CONTENT_TYPE_MAX + 1]; /* the part's Content-Type, "" when absent */
    const char *data;                           /* the part's bytes: a view into the body */
    size_t len;
} mp_part;

/* Parses body (len bytes) as multipart/form-data with the boundary from content_type (the request's
 * Content-Type value, NUL-terminated; NULL when the request has none).  0 with parts[0..*nparts)
 * filled in body order; -1 with a message in msg (msg_len bytes; msg may be NULL when msg_len is 0)
 * and *nparts 0.  max_parts: 1 to any number (parts has room for that many). */
int multipart_parse(const char *content_type, const char *body, size_t len, mp_part *parts, int max_parts, int *nparts, char *msg,
                    size_t msg_len);

/* The part named name among parts[0..n), NULL when none. */
const mp_part *multipart_find(const mp_part *parts, int n, const char *name);

#endif
