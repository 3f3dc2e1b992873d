/* utf8.h - keeping text valid UTF-8 when it is cut to fit a buffer.
 * snprintf("%.200s") and fixed buffers may cut inside a multi-byte character;
 * jansson then refuses the string, and a reply or an event would be lost. */
#ifndef GANTRY_UTF8_H
#define GANTRY_UTF8_H

#include <stddef.h>

/* drops an incomplete UTF-8 sequence at the end of s (in place); returns s */
char *utf8_trim(char *s);
/* snprintf-style copy of src into dst (len bytes) that never ends inside a character */
void utf8_copy(char *dst, size_t len, const char *src);

#endif
