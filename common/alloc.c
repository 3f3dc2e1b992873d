/* alloc.c - the allocation wrappers of alloc.h: abort with a message on out of memory.
 * No log.h here: this library is below everything (the pure libraries link it), and a report about a
 * failed allocation must not allocate, so the message is formatted on the stack and written with one
 * write(2). */
#include "common/alloc.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void x_oom(size_t size)
{
    char msg[80];
    int n = snprintf(msg, sizeof(msg), "gantry: out of memory allocating %zu bytes\n", size);
    if (n > 0) {
        ssize_t w = write(STDERR_FILENO, msg, (size_t)n < sizeof(msg) ? (size_t)n : sizeof(msg) - 1);
        (void)w; /* nothing left to tell anyone if stderr is gone */
    }
    abort();
}

void *xmalloc(size_t size)
{
    void *p = malloc(size ? size : 1);
    if (!p) x_oom(size);
    return p;
}

void *xcalloc(size_t n, size_t size)
{
    if (size && n > SIZE_MAX / size) x_oom(SIZE_MAX);
    void *p = calloc(n ? n : 1, size ? size : 1);
    if (!p) x_oom(n * size);
    return p;
}

void *xrealloc(void *p, size_t size)
{
    void *q = realloc(p, size ? size : 1);
    if (!q) x_oom(size);
    return q;
}

void *xreallocarray(void *p, size_t n, size_t size)
{
    if (size && n > SIZE_MAX / size) x_oom(SIZE_MAX);
    return xrealloc(p, n * size);
}

char *xstrdup(const char *s)
{
    size_t len = strlen(s) + 1;
    return memcpy(xmalloc(len), s, len);
}

char *xstrndup(const char *s, size_t n)
{
    size_t len = strnlen(s, n);
    char *p = xmalloc(len + 1);
    memcpy(p, s, len);
    p[len] = '\0';
    return p;
}

char *xvasprintf(const char *fmt, va_list ap)
{
    va_list ap2;
    va_copy(ap2, ap);
    int n = vsnprintf(NULL, 0, fmt, ap2);
    va_end(ap2);
    if (n < 0) n = 0; /* an encoding error: an empty string, as the format cannot be printed */
    char *s = xmalloc((size_t)n + 1);
    if (vsnprintf(s, (size_t)n + 1, fmt, ap) < 0) s[0] = '\0';
    return s;
}

char *xasprintf(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char *s = xvasprintf(fmt, ap);
    va_end(ap);
    return s;
}

FILE *xopen_memstream(char **buf, size_t *len)
{
    FILE *f = open_memstream(buf, len);
    if (!f) x_oom(BUFSIZ);
    return f;
}
