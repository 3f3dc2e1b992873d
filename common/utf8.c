/* utf8.c - text cut at a character boundary, control characters kept out (utf8.h). */
#include "common/utf8.h"
#include "common/alloc.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

char *utf8_trim(char *s)
{
    size_t n = strlen(s);
    /* find the start of the last character: at most 3 continuation bytes back */
    size_t i = n, back = 0;
    while (i > 0 && back < 4 && ((unsigned char)s[i - 1] & 0xC0) == 0x80) {
        i--;
        back++;
    }
    if (i == 0) {
        if (back) s[0] = '\0'; /* only continuation bytes */
        return s;
    }
    unsigned char lead = (unsigned char)s[i - 1];
    size_t need = lead < 0x80 ? 1 : (lead & 0xE0) == 0xC0 ? 2 : (lead & 0xF0) == 0xE0 ? 3 : (lead & 0xF8) == 0xF0 ? 4 : 0;
    if (lead < 0x80) {
        if (back) s[i] = '\0'; /* stray continuation bytes after ASCII */
    } else if (need != back + 1) {
        s[i - 1] = '\0'; /* an incomplete (or invalid) last character */
    }
    return s;
}

void utf8_copy(char *dst, size_t len, const char *src)
{
    if (!len) return;
    snprintf(dst, len, "%s", src ? src : "");
    utf8_trim(dst);
}

/* the length in bytes of the control character at p, or 0 when p starts something else */
static size_t control_at(const unsigned char *p)
{
    if (p[0] < 0x20 || p[0] == 0x7F) return 1;
    if (p[0] == 0xC2 && p[1] >= 0x80 && p[1] <= 0x9F) return 2;
    return 0;
}

bool utf8_has_control(const char *s)
{
    for (const unsigned char *p = (const unsigned char *)s; p && *p; p++)
        if (control_at(p)) return true;
    return false;
}

/* utf8_escape_control, a tab kept as it is when keep_tab */
static char *escape(const char *s, bool keep_tab)
{
    if (!s) s = "";
    size_t n = 0;
    for (const unsigned char *p = (const unsigned char *)s; *p; p++)
        n += control_at(p) ? 6 : 1; /* "\u009b" is the longest escape */
    char *out = xmalloc(n + 1), *o = out;
    for (const unsigned char *p = (const unsigned char *)s; *p;) {
        size_t k = control_at(p);
        if (!k || (keep_tab && *p == '\t')) {
            *o++ = (char)*p++;
        } else if (k == 2) {
            o += sprintf(o, "\\u%04x", p[1]);
            p += 2;
        } else {
            const char *named = *p == '\n' ? "\\n" : *p == '\r' ? "\\r" : *p == '\t' ? "\\t" : NULL;
            o += named ? sprintf(o, "%s", named) : sprintf(o, "\\x%02x", *p);
            p++;
        }
    }
    *o = '\0';
    return out;
}

char *utf8_escape_control(const char *s)
{
    return escape(s, false);
}

char *utf8_escape_line(const char *s)
{
    return escape(s, true);
}

/* the length of the valid UTF-8 sequence at p (at most n bytes), 0 when it is not one */
static size_t valid_at(const unsigned char *p, size_t n)
{
    if (p[0] < 0x80) return 1;
    size_t len = p[0] >= 0xC2 && p[0] <= 0xDF ? 2 : p[0] >= 0xE0 && p[0] <= 0xEF ? 3 : p[0] >= 0xF0 && p[0] <= 0xF4 ? 4 : 0;
    if (len == 0 || len > n) return 0;
    for (size_t i = 1; i < len; i++)
        if ((p[i] & 0xC0) != 0x80) return 0;
    if ((p[0] == 0xE0 && p[1] < 0xA0) || (p[0] == 0xED && p[1] > 0x9F) || (p[0] == 0xF0 && p[1] < 0x90) ||
        (p[0] == 0xF4 && p[1] > 0x8F))
        return 0; /* overlong, surrogate, beyond U+10FFFF */
    return len;
}

char *utf8_scrub(char *s)
{
    unsigned char *p = (unsigned char *)s;
    size_t n = strlen(s);
    for (size_t i = 0; i < n;) {
        size_t k = valid_at(p + i, n - i);
        if (k == 0) {
            p[i++] = '?';
        } else {
            i += k;
        }
    }
    return s;
}
