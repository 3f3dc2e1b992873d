#include "common/utf8.h"

#include <stdio.h>
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
