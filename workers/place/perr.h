/* perr.h - where a parser or validator reports the first problem it finds: the
 * JSON path of the offending field and a message, into the caller's buffers.
 * Shared by the graph parser, the spec validator and the AMP problem parser. */
#ifndef GANTRY_PLACE_PERR_H
#define GANTRY_PLACE_PERR_H

#include <stddef.h>

typedef struct perr {
    const char *prefix; /* "spec.graph", "" */
    char *field;
    size_t field_len;
    char *msg;
    size_t msg_len;
} perr;

/* Sets field = prefix + suffix (suffix starts with '.' or '[', or is a whole path when the
 * prefix is empty; a leading dot is dropped then) and msg from the format. */
void perr_set(perr *e, const char *suffix, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* perr_set, then -1: `return perr_fail(e, ".ops", "...")`.  A macro so that every caller (and the
 * static analyser, which reads one file at a time) sees the -1 and knows the failure path ends there. */
#define perr_fail(...) (perr_set(__VA_ARGS__), -1)

#endif
