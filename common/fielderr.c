/* fielderr.c - the first problem a parser finds, into the caller's buffers (fielderr.h). */
#include "common/fielderr.h"

#include "common/utf8.h"

#include <stdarg.h>
#include <stdio.h>

void fielderr_path(const fielderr *e, const char *suffix, char *buf, size_t len)
{
    if (!e->prefix[0] && suffix[0] == '.') suffix++;
    snprintf(buf, len, "%s%s", e->prefix, suffix);
    utf8_trim(buf);
}

void fielderr_set(const fielderr *e, const char *suffix, const char *fmt, ...)
{
    if (e->field && e->field_len) fielderr_path(e, suffix, e->field, e->field_len);
    if (e->msg && e->msg_len) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(e->msg, e->msg_len, fmt, ap);
        va_end(ap);
        utf8_trim(e->msg);
    }
}
