/* fielderr.h - where a parser or validator reports the first problem it finds: the
 * JSON path of the offending field and a message, into the caller's buffers.  The one
 * "set the field and the message, return -1" helper of the spec modules, the placement
 * parsers, the model signature and the server's upload parsers.  Pure: no I/O. */
#ifndef GANTRY_FIELDERR_H
#define GANTRY_FIELDERR_H

#include <stddef.h>

typedef struct fielderr {
    const char *prefix; /* "spec.graph", "" */
    char *field;        /* NULL (or field_len 0): the caller wants no field */
    size_t field_len;
    char *msg;
    size_t msg_len;
} fielderr;

/* Sets field = prefix + suffix (suffix starts with '.' or '[', or is a whole path when the
 * prefix is empty; a leading dot is dropped then) and msg from the format; each, cut to fit
 * its buffer, ends on a whole UTF-8 character. */
void fielderr_set(const fielderr *e, const char *suffix, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* prefix + suffix into buf, as fielderr_set writes the field */
void fielderr_path(const fielderr *e, const char *suffix, char *buf, size_t len);

/* fielderr_set, then -1: `return fielderr_fail(e, ".ops", "...")`.  Macros so that every caller
 * (and the static analyser, which reads one file at a time) sees the -1 and knows the failure
 * path ends there. */
#define fielderr_fail(...) (fielderr_set(__VA_ARGS__), -1)

/* The same with the caller's own buffers and a whole path:
 * `return field_fail(field, fl, msg, ml, "spec.model", "must be ...")`. */
#define field_fail(field, field_len, msg, msg_len, path, ...)                                                                      \
    (fielderr_set(&(const fielderr){"", (field), (field_len), (msg), (msg_len)}, (path), __VA_ARGS__), -1)

/* A message alone (no field): `return msg_fail(msg, ml, "a header line without ':'")`. */
#define msg_fail(msg, msg_len, ...) field_fail(NULL, 0, (msg), (msg_len), "", __VA_ARGS__)

#endif
