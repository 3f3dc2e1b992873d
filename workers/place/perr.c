/* perr.c - the first problem a parser finds, into the caller's buffers (perr.h). */
#include "workers/place/perr.h"

#include <stdarg.h>
#include <stdio.h>

void perr_set(perr *e, const char *suffix, const char *fmt, ...)
{
    if (!e->prefix[0] && suffix[0] == '.') suffix++;
    if (e->field && e->field_len) snprintf(e->field, e->field_len, "%s%s", e->prefix, suffix);
    if (e->msg && e->msg_len) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(e->msg, e->msg_len, fmt, ap);
        va_end(ap);
    }
}
