/* fielderr.c - the first problem a parser finds, into the caller's buffers (fielderr.h). */
#include "common/fielderr.h"

#include "common/utf8.h"

#include <stdarg.h>
#include <stdio.h>

void fielderr_set(const fielderr *e, const char *suffix, const char *fmt, ...)
{
    if (!e->prefix[0] && suffix[0] == '.') suffix++;
    if (e->field && e->field_len) {
        snprintf(e->field, e->field_len, "%s%s", e->prefix, suffix);
        utf8_trim(e->field);
    }
    if (e->msg && e->msg_len) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(e->msg, e->msg_len, fmt, ap);
        va_end(ap);
        utf8_trim(e->msg);
    }
}
