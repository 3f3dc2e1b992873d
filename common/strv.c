/* strv.c - NULL-terminated string vectors (strv.h). */
#include "common/strv.h"
#include "common/alloc.h"

#include <stdarg.h>
#include <stdlib.h>

void strv_add(strv *s, char *owned)
{
    if (s->n + 2 > s->cap) {
        s->cap = s->cap ? 2 * s->cap : 32;
        s->v = xreallocarray(s->v, s->cap, sizeof(*s->v));
    }
    s->v[s->n++] = owned;
    s->v[s->n] = NULL;
}

void strv_push(strv *s, const char *str)
{
    strv_add(s, xstrdup(str));
}

void strv_pushf(strv *s, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    strv_add(s, xvasprintf(fmt, ap));
    va_end(ap);
}

void strv_free_v(char **v)
{
    if (!v) return;
    for (char **p = v; *p; p++)
        free(*p);
    free(v);
}

void strv_free(strv *s)
{
    strv_free_v(s->v);
    *s = (strv){0};
}
