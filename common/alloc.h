/* alloc.h - allocation that never returns NULL (the error policy: docs/errors.md).
 *
 * Running out of memory is not an error a gantry process can answer: a path that turned a NULL from
 * malloc into an error reply was never tested and would fail again at the next allocation.  So every
 * allocation in server/, scheduler/, workers/ and common/ goes through these wrappers, which print
 * "gantry: out of memory allocating N bytes" on stderr and abort() (a core dump, and deploy/up or
 * systemd starts the process again; nothing accepted is lost: jobs live in SQLite and Redis).
 * jansson allocates through them too (json_set_alloc_funcs in each main()), so a NULL from json_pack
 * or json_dumps means a bad format or value, never memory.
 *
 * The one exception: a pure library may check a size a user chose (a graph, a tensor) against a limit
 * before allocating and refuse it with an error; it still allocates through these.  Its own library,
 * no dependencies, so every library can link it (common/meson.build: alloc_dep). */
#ifndef GANTRY_ALLOC_H
#define GANTRY_ALLOC_H

#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>

void *xmalloc(size_t size) __attribute__((malloc, returns_nonnull));
/* zeroed; n * size is checked for overflow (an overflow aborts like a failed allocation) */
void *xcalloc(size_t n, size_t size) __attribute__((malloc, returns_nonnull));
/* xrealloc(p, 0) returns a valid (minimal) block, never NULL */
void *xrealloc(void *p, size_t size) __attribute__((returns_nonnull));
/* realloc to n * size bytes, the product checked for overflow */
void *xreallocarray(void *p, size_t n, size_t size) __attribute__((returns_nonnull));
char *xstrdup(const char *s) __attribute__((malloc, returns_nonnull));
char *xstrndup(const char *s, size_t n) __attribute__((malloc, returns_nonnull));
/* a printf into a new string (the caller frees it) */
char *xasprintf(const char *fmt, ...) __attribute__((format(printf, 1, 2), nonnull(1), malloc, returns_nonnull));
char *xvasprintf(const char *fmt, va_list ap) __attribute__((format(printf, 1, 0), nonnull(1), malloc, returns_nonnull));

/* open_memstream(3) that never returns NULL (its writes still allocate: a failed fprintf there is lost
 * output, as on a full disk) */
FILE *xopen_memstream(char **buf, size_t *len) __attribute__((returns_nonnull));

/* prints the message and aborts; for an allocator the wrappers do not cover */
void x_oom(size_t size) __attribute__((noreturn));

#endif
