/* jsonfmt.c - reals in JSON text at the fewest digits that read back the same (jsonfmt.h). */
#include "common/jsonfmt.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Assumes the C locale for printf and strtod (the daemons never call setlocale), as JSON needs. */

#define NUM_MAX 64 /* longer number tokens are left as they are (jansson writes at most 24 characters) */

static int same_bits(double a, double b)
{
    return memcmp(&a, &b, sizeof(a)) == 0; /* NOLINT(bugprone-suspicious-memory-comparison): the bits are the point (-0.0) */
}

/* "%.{p}g" of d into buf; 1 when it reads back as d */
static int round_trips(double d, int p, char *buf, size_t len)
{
    int n = snprintf(buf, len, "%.*g", p, d);
    return n > 0 && (size_t)n < len && same_bits(strtod(buf, NULL), d);
}

size_t jsonfmt_double(double d, int exp, char *out, size_t len)
{
    if (!isfinite(d)) return 0;
    char buf[NUM_MAX];
    /* a double whose shortest form has at most 15 digits reads back from "%.15g" (its 15-digit rounding is
     * that form padded with zeros), so one test tells whether to look from 1 digit or from 16 */
    int p = round_trips(d, 15, buf, sizeof(buf)) ? 1 : 16;
    for (; p <= 17; p++) {
        if (!round_trips(d, p, buf, sizeof(buf))) continue;
        int has_exp = strchr(buf, 'e') != NULL;
        if (has_exp != (exp != 0)) continue; /* "%.1g" of 100 is "1e+02": keep looking for "100" */
        size_t n = strlen(buf);
        if (has_exp) { /* "1e-07" -> "1e-7", "1e+17" -> "1e17", as jansson writes exponents */
            char *e = strchr(buf, 'e') + 1, *q = e;
            if (*q == '-') e++, q++;
            if (*q == '+') q++;
            while (*q == '0' && q[1])
                q++;
            memmove(e, q, strlen(q) + 1);
            n = strlen(buf);
        }
        if (!has_exp && !strchr(buf, '.')) { /* "1" -> "1.0": a real stays a real */
            buf[n++] = '.';
            buf[n++] = '0';
            buf[n] = '\0';
        }
        if (n >= len) return 0;
        memcpy(out, buf, n + 1);
        return n;
    }
    return 0; /* no "%g" form in that notation (e.g. "1.5e0"): the caller keeps the text */
}

static int is_digit(char c)
{
    return c >= '0' && c <= '9';
}

/* the end of the number token that starts at s[i]; *frac and *exp say whether it has a fraction, an exponent */
static size_t number_end(const char *s, size_t i, int *frac, int *exp)
{
    *frac = *exp = 0;
    if (s[i] == '-') i++;
    while (is_digit(s[i]))
        i++;
    if (s[i] == '.') {
        *frac = 1;
        i++;
        while (is_digit(s[i]))
            i++;
    }
    if (s[i] == 'e' || s[i] == 'E') {
        *exp = 1;
        i++;
        if (s[i] == '+' || s[i] == '-') i++;
        while (is_digit(s[i]))
            i++;
    }
    return i;
}

size_t jsonfmt_shorten(char *s)
{
    size_t r = 0, w = 0; /* read and write positions: w <= r, the text only shrinks */
    int in_string = 0;
    while (s[r]) {
        char c = s[r];
        if (in_string) {
            s[w++] = s[r++];
            if (c == '\\' && s[r])
                s[w++] = s[r++]; /* an escaped character, '"' included */
            else if (c == '"')
                in_string = 0;
            continue;
        }
        if (c == '"') {
            in_string = 1;
            s[w++] = s[r++];
            continue;
        }
        if (c != '-' && !is_digit(c)) {
            s[w++] = s[r++];
            continue;
        }
        int frac, exp;
        size_t end = number_end(s, r, &frac, &exp), len = end - r;
        char tok[NUM_MAX], out[NUM_MAX];
        size_t n = 0;
        if ((frac || exp) && len < sizeof(tok)) {
            memcpy(tok, s + r, len);
            tok[len] = '\0';
            char *stop;
            double d = strtod(tok, &stop);
            if (stop == tok + len) n = jsonfmt_double(d, exp, out, sizeof(out));
        }
        if (n > 0 && n <= len) {
            memcpy(s + w, out, n);
            w += n;
        } else {
            memmove(s + w, s + r, len);
            w += len;
        }
        r = end;
    }
    s[w] = '\0';
    return w;
}

char *jsonfmt_dumps(const json_t *j, size_t flags)
{
    char *s = json_dumps(j, flags);
    if (s) jsonfmt_shorten(s);
    return s;
}
