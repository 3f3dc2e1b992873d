/* utf8.h - keeping text valid UTF-8 when it is cut to fit a buffer, and keeping
 * control characters out of what people read.
 * snprintf("%.200s") and fixed buffers may cut inside a multi-byte character;
 * jansson then refuses the string, and a reply or an event would be lost.
 * A name with ESC, CR or a C1 control (CSI is U+009B) printed raw rewrites the
 * terminal of whoever lists it: the server refuses them in names, the CLI
 * escapes them on output. */
#ifndef GANTRY_UTF8_H
#define GANTRY_UTF8_H

#include <stdbool.h>
#include <stddef.h>

/* drops an incomplete UTF-8 sequence at the end of s (in place); returns s */
char *utf8_trim(char *s);
/* snprintf-style copy of src into dst (len bytes) that never ends inside a character */
void utf8_copy(char *dst, size_t len, const char *src);

/* whether s holds a control character: C0 (U+0000-U+001F, tab and newline included), DEL (U+007F)
 * or C1 (U+0080-U+009F, encoded C2 80..C2 9F) */
bool utf8_has_control(const char *s);
/* s (UTF-8) with each control character written as an escape: \n \r \t, \xHH for the other C0
 * and DEL, \uHHHH for C1; every other byte as it is.  A new string (free it) */
char *utf8_escape_control(const char *s);
/* utf8_escape_control for a line of a program's output: a tab stays a tab (it cannot move the cursor
 * anywhere a line's text could not) */
char *utf8_escape_line(const char *s);

/* replaces, in place, each byte that does not belong to a well-formed UTF-8 sequence with '?'
 * (a parser's message may quote the broken input it stopped at); returns s */
char *utf8_scrub(char *s);

#endif
