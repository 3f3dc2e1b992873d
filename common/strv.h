/* strv.h - a growing, NULL-terminated vector of owned strings: an argv or an
 * environment being built (v is always NULL-terminated, ready for execve).
 * Allocation through common/alloc.h (aborts on out of memory). */
#ifndef GANTRY_STRV_H
#define GANTRY_STRV_H

#include <stddef.h>

typedef struct {
    char **v; /* NULL until the first add */
    size_t n, cap;
} strv;

void strv_add(strv *s, char *owned);           /* takes owned (malloc'd) */
void strv_push(strv *s, const char *str);      /* a copy of str */
void strv_pushf(strv *s, const char *fmt, ...) /* a formatted copy */
    __attribute__((format(printf, 2, 3)));
void strv_free(strv *s); /* the strings and the vector; s is empty again */
/* frees a vector handed out as v alone (NULL-terminated) */
void strv_free_v(char **v);

#endif
