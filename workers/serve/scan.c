/* scan.c - the fast number scanner for an inference request's data (scan.h). */
#include "workers/serve/scan.h"

#include <ctype.h>
#include <errno.h>
#include <float.h>
#include <stdbool.h>
#include <stdint.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define MAX_DEPTH 64

typedef struct {
    const char *p, *end;
} cur;

/* character classes, one table lookup per byte of the (mostly numeric) body: JSON white space; what
 * ends a scalar; what a number may hold; what an array of numbers may hold between its brackets
 * (IN) and with them (ARR) */
enum { WS = 1, END = 2, NUM = 4, ARR = 8, IN = 16 };
#define NUMCH (NUM | ARR | IN)
#define WSCH (WS | END | ARR | IN)
static const unsigned char cls[256] = {
    [' '] = WSCH,  ['\t'] = WSCH, ['\n'] = WSCH, ['\r'] = WSCH, [','] = END | ARR | IN, [']'] = END | ARR,
    ['['] = ARR,   ['}'] = END,   ['\0'] = END,  ['0'] = NUMCH, ['1'] = NUMCH,          ['2'] = NUMCH,
    ['3'] = NUMCH, ['4'] = NUMCH, ['5'] = NUMCH, ['6'] = NUMCH, ['7'] = NUMCH,          ['8'] = NUMCH,
    ['9'] = NUMCH, ['+'] = NUMCH, ['-'] = NUMCH, ['.'] = NUMCH, ['e'] = NUMCH,          ['E'] = NUMCH,
};
#define IS(ch, k) (cls[(unsigned char)(ch)] & (k))

static void ws(cur *c)
{
    while (c->p < c->end && IS(*c->p, WS))
        c->p++;
}

/* a string starting at c->p ('"'); sets [*b, *e) to its raw contents */
static int string(cur *c, const char **b, const char **e)
{
    if (c->p >= c->end || *c->p != '"') return -1;
    *b = ++c->p;
    while (c->p < c->end && *c->p != '"') {
        if ((unsigned char)*c->p < 0x20) return -1;
        if (*c->p != '\\') {
            c->p++;
            continue;
        }
        /* an escape: one of \" \\ \/ \b \f \n \r \t, or \u and four hex digits (JSON's only ones) */
        if (c->end - c->p < 2 || !strchr("\"\\/bfnrtu", c->p[1]) || c->p[1] == '\0') return -1;
        if (c->p[1] == 'u') {
            if (c->end - c->p < 6) return -1;
            for (int i = 2; i < 6; i++)
                if (!isxdigit((unsigned char)c->p[i])) return -1;
            c->p += 6;
        } else {
            c->p += 2;
        }
    }
    if (c->p >= c->end) return -1;
    *e = c->p++;
    return 0;
}

static int value(cur *c, int depth);
static int data_value(cur *c, int depth);

static int scalar(cur *c)
{
    const char *b = c->p;
    while (c->p < c->end && !IS(*c->p, END))
        c->p++;
    size_t n = (size_t)(c->p - b);
    if (n == 0) return -1;
    if ((n == 4 && !memcmp(b, "true", 4)) || (n == 5 && !memcmp(b, "false", 5)) || (n == 4 && !memcmp(b, "null", 4))) return 0;
    for (const char *q = b; q < c->p; q++) /* a number: the characters it may hold */
        if (!IS(*q, NUM)) return -1;
    return 0;
}

/* The members of an object (c->p after '{').  Without want, reads the object to its end (0).
 * With want and stop: c->p stops on want's value (1), or -1 when the object has no such member.
 * With want and !stop: reads the whole object and sets *r (offsets from base) to the byte range of
 * want's value: 1 found, 0 absent, -1 when it is there twice (jansson would keep only one). */
static int members(cur *c, int depth, const char *want, bool stop, const char *base, scan_range *r)
{
    int found = 0;
    ws(c);
    if (c->p < c->end && *c->p == '}') {
        c->p++;
        return stop ? -1 : 0;
    }
    for (;;) {
        const char *kb, *ke;
        ws(c);
        if (string(c, &kb, &ke)) return -1;
        ws(c);
        if (c->p >= c->end || *c->p++ != ':') return -1;
        ws(c);
        bool is = want && (size_t)(ke - kb) == strlen(want) && !memcmp(kb, want, (size_t)(ke - kb));
        if (is && stop) return 1;
        const char *vb = c->p;
        if (is ? data_value(c, depth + 1) : value(c, depth + 1)) return -1;
        if (is) {
            if (found++) return -1;
            r->start = (size_t)(vb - base), r->end = (size_t)(c->p - base);
        }
        ws(c);
        if (c->p >= c->end) return -1;
        if (*c->p == '}') {
            c->p++;
            return stop ? -1 : found;
        }
        if (*c->p++ != ',') return -1;
    }
}

static int elements(cur *c, int depth)
{
    ws(c);
    if (c->p < c->end && *c->p == ']') {
        c->p++;
        return 0;
    }
    for (;;) {
        if (value(c, depth + 1)) return -1;
        ws(c);
        if (c->p >= c->end) return -1;
        if (*c->p == ']') {
            c->p++;
            return 0;
        }
        if (*c->p++ != ',') return -1;
    }
}

static int value(cur *c, int depth)
{
    if (depth > MAX_DEPTH) return -1;
    ws(c);
    if (c->p >= c->end) return -1;
    const char *b, *e;
    switch (*c->p) {
    case '"':
        return string(c, &b, &e);
    case '{':
        c->p++;
        return members(c, depth, NULL, false, NULL, NULL);
    case '[':
        c->p++;
        return elements(c, depth);
    default:
        return scalar(c);
    }
}

/* The value of a data member, the bulk of a request.  An array of numbers (nothing but brackets,
 * commas, white space and the characters of numbers) is passed over in one table lookup per byte,
 * to its closing bracket: its grammar ("[1 2]", "[1,,2]", a number's own) is scan_values' to
 * check as it reads the numbers, so that the text is walked once by each.  Anything else (a
 * string, an object, a literal, nesting past MAX_DEPTH): the validating skip, value(). */
static int data_value(cur *c, int depth)
{
    const unsigned char *p = (const unsigned char *)c->p, *end = (const unsigned char *)c->end;
    if (p < end && *p == '[')
        for (int open = 0; p < end; p++) {
            while (p < end && IS(*p, IN)) /* the bulk: digits, signs, points, commas, white space */
                p++;
            if (p == end || !IS(*p, ARR)) break;
            if (*p == '[' && ++open + depth > MAX_DEPTH) break;
            if (*p == ']' && --open == 0) {
                c->p = (const char *)p + 1;
                return 0;
            }
        }
    return value(c, depth);
}

int scan_data(const char *s, size_t n, size_t *start, size_t *end)
{
    cur c = {s, s + n};
    ws(&c);
    if (c.p >= c.end || *c.p++ != '{' || members(&c, 0, "inputs", true, NULL, NULL) != 1) return -1;
    ws(&c);
    if (c.p >= c.end || *c.p++ != '[') return -1;
    ws(&c);
    if (c.p >= c.end || *c.p++ != '{' || members(&c, 1, "data", true, NULL, NULL) != 1) return -1;
    ws(&c);
    *start = (size_t)(c.p - s);
    if (data_value(&c, 2)) return -1;
    *end = (size_t)(c.p - s);
    return 0;
}

int scan_inputs_data(const char *s, size_t n, scan_range *r, int cap, int *count)
{
    cur c = {s, s + n};
    ws(&c);
    if (c.p >= c.end || *c.p++ != '{' || members(&c, 0, "inputs", true, NULL, NULL) != 1) return -1;
    ws(&c);
    if (c.p >= c.end || *c.p++ != '[') return -1;
    ws(&c);
    int k = 0;
    if (c.p < c.end && *c.p == ']') {
        *count = 0;
        return 0;
    }
    for (;;) {
        ws(&c);
        if (k >= cap || c.p >= c.end || *c.p++ != '{' || members(&c, 2, "data", false, s, &r[k]) != 1) return -1;
        k++;
        ws(&c);
        if (c.p >= c.end) return -1;
        if (*c.p == ']') break;
        if (*c.p++ != ',') return -1;
    }
    *count = k;
    return 0;
}

/* the JSON number's text at p (before e) as sign, decimal mantissa of at most 19 significant digits
 * (exact in a uint64) and power of ten, *stop after it; false when the text there is not such a
 * number (then *stop is not set): more digits, or no number at all */
static bool decimal_parts(const char *p, const char *e, bool *neg, uint64_t *mant, int *digits, int *exp10, const char **stop)
{
    *neg = p < e && *p == '-';
    p += *neg;
    *mant = 0, *digits = 0, *exp10 = 0;
    const char *start = p;
    for (; p < e && *p >= '0' && *p <= '9'; p++) {
        if ((*mant || *p != '0') && ++*digits > 19) return false;
        *mant = *mant * 10 + (uint64_t)(*p - '0');
    }
    if (p == start) return false;
    if (p < e && *p == '.') {
        const char *f = ++p;
        for (; p < e && *p >= '0' && *p <= '9'; p++, --*exp10) {
            if ((*mant || *p != '0') && ++*digits > 19) return false;
            *mant = *mant * 10 + (uint64_t)(*p - '0');
        }
        if (p == f) return false;
    }
    if (p < e && (*p == 'e' || *p == 'E')) {
        p++;
        bool eneg = p < e && *p == '-';
        p += (p < e && (*p == '-' || *p == '+'));
        int x = 0;
        const char *f = p;
        for (; p < e && *p >= '0' && *p <= '9' && x < 1000; p++)
            x = x * 10 + (*p - '0');
        if (p == f) return false;
        *exp10 += eneg ? -x : x;
    }
    *stop = p;
    return p == e || !IS(*p, NUM);
}

/* Clinger's fast path: a decimal of at most 15 significant digits and a power of ten within
 * 10^+-22 is an exact double times or over an exact double, one correctly rounded operation.
 * false for anything else (the caller tries fast_long, then asks strtod or strtof). */
static bool fast_decimal(bool neg, uint64_t mant, int digits, int exp10, double *out)
{
    static const double pow10[] = {1e0,  1e1,  1e2,  1e3,  1e4,  1e5,  1e6,  1e7,  1e8,  1e9,  1e10, 1e11,
                                   1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};
    if (mant == 0) {
        *out = neg ? -0.0 : 0.0;
        return true;
    }
    if (digits > 15 || exp10 < -22 || exp10 > 22) return false;
    double d = exp10 < 0 ? (double)mant / pow10[-exp10] : (double)mant * pow10[exp10];
    *out = neg ? -d : d;
    return true;
}

/* The same for 16 to 19 significant digits, what printf("%.17g"), Python's repr and numpy write: a
 * mantissa below 2^64 and a power of ten up to 10^27 (5^27 < 2^64) are exact in x87's 64-bit long
 * double, so one operation rounds the text correctly to 64 bits.  A float's or double's midpoints
 * are 64-bit values, so rounding that to the type rounds the text the same way unless it lies
 * exactly on one (then false: strtof or strtod decides), as fast_float argues for doubles.  Normal
 * values only.  Where long double is not x87's (another architecture), always false. */
static bool fast_long(bool neg, uint64_t mant, int exp10, sig_dtype t, void *out, size_t k)
{
#if LDBL_MANT_DIG == 64 && defined(__x86_64__)
    static const long double pow10[] = {1e0L,  1e1L,  1e2L,  1e3L,  1e4L,  1e5L,  1e6L,  1e7L,  1e8L,  1e9L,
                                        1e10L, 1e11L, 1e12L, 1e13L, 1e14L, 1e15L, 1e16L, 1e17L, 1e18L, 1e19L,
                                        1e20L, 1e21L, 1e22L, 1e23L, 1e24L, 1e25L, 1e26L, 1e27L};
    if (mant == 0 || exp10 < -27 || exp10 > 27) return false;
    long double x = exp10 < 0 ? (long double)mant / pow10[-exp10] : (long double)mant * pow10[exp10];
    bool fp32 = t == SIG_FP32;
    if (fp32 ? !(x >= FLT_MIN && x <= FLT_MAX) : !(x >= DBL_MIN && x <= DBL_MAX)) return false;
    uint64_t bits; /* the 64-bit mantissa: x87's format keeps it, leading one included, in the first 8 bytes */
    memcpy(&bits, &x, sizeof bits);
    int drop = fp32 ? 64 - FLT_MANT_DIG : 64 - DBL_MANT_DIG;
    if ((bits & ((UINT64_C(1) << drop) - 1)) == UINT64_C(1) << (drop - 1)) return false; /* on a midpoint */
    if (fp32)
        ((float *)out)[k] = neg ? -(float)x : (float)x;
    else
        ((double *)out)[k] = neg ? -(double)x : (double)x;
    return true;
#else
    (void)neg, (void)mant, (void)exp10, (void)t, (void)out, (void)k;
    return false;
#endif
}

/* d, correctly rounded from the text, to a float without a second rounding error: a float's
 * midpoints are doubles, so rounding d to float rounds the text the same way unless d is exactly
 * on one (then false: strtof decides), or outside the normal floats (false too) */
static bool fast_float(double d, float *out)
{
    if (d != 0 && !(fabs(d) >= FLT_MIN && fabs(d) <= FLT_MAX)) return false;
    uint64_t bits;
    memcpy(&bits, &d, sizeof bits);
    if ((bits & 0x1FFFFFFFu) == 0x10000000u) return false; /* the 29 bits a float drops: exactly half */
    *out = (float)d;
    return true;
}

/* the number whose text starts at b (before end) as a value of type t at out[k]: its end, or NULL
 * when it is not a number of that type */
static const char *put_value(const char *b, const char *end, sig_dtype t, void *out, size_t k)
{
    const char *stop;
    double d;
    bool neg;
    uint64_t mant;
    int ndigits, exp10;
    if ((t == SIG_FP32 || t == SIG_FP64) && decimal_parts(b, end, &neg, &mant, &ndigits, &exp10, &stop)) {
        if (fast_decimal(neg, mant, ndigits, exp10, &d)) {
            if (t == SIG_FP64) {
                ((double *)out)[k] = d;
                return stop;
            }
            if (fast_float(d, &((float *)out)[k])) return stop;
        } else if (fast_long(neg, mant, exp10, t, out, k)) {
            return stop;
        }
    }
    stop = b; /* the general readers, on the number's characters */
    while (stop < end && IS(*stop, NUM))
        stop++;
    size_t len = (size_t)(stop - b);
    char text[64], *tail;
    if (len == 0 || len >= sizeof text) return NULL;
    memcpy(text, b, len); /* the body is not NUL-terminated here */
    text[len] = '\0';
    if (t == SIG_FP32) {
        float v = strtof(text, &tail);
        if (*tail || !isfinite(v)) return NULL;
        ((float *)out)[k] = v;
        return stop;
    }
    if (t == SIG_FP64) {
        double v = strtod(text, &tail);
        if (*tail || !isfinite(v)) return NULL;
        ((double *)out)[k] = v;
        return stop;
    }
    /* integers: a JSON integer literal read exactly (never through a double), in the type's range */
    const char *digits = text + (text[0] == '-');
    if (!*digits || strspn(digits, "0123456789") != strlen(digits)) return NULL;
    errno = 0;
    long long v = strtoll(text, &tail, 10);
    if (errno == ERANGE || *tail) return NULL;
    if (t == SIG_INT64) {
        ((int64_t *)out)[k] = v;
        return stop;
    }
    if (t != SIG_INT32 || v < INT32_MIN || v > INT32_MAX) return NULL;
    ((int32_t *)out)[k] = (int32_t)v;
    return stop;
}

int scan_values(const char *s, size_t n, sig_dtype t, void *out, size_t cap, size_t *count)
{
    /* JSON's grammar for a number or nested arrays of numbers, checked here (data_value only found
     * where the text ends): after '[' a value or ']', after ',' a value, after a value ',' or ']'
     * (inside an array) or the end (outside) */
    const char *p = s, *end = s + n;
    size_t k = 0;
    int depth = 0;
    bool value_next = true, close_ok = false;
    *count = 0;
    for (;;) {
        while (p < end && IS(*p, WS))
            p++;
        if (p == end) return value_next || depth ? -3 : 0;
        char ch = *p;
        if (value_next) {
            if (ch == '[') {
                if (++depth > MAX_DEPTH) return -3;
                p++, close_ok = true;
                continue;
            }
            if (ch == ']' && close_ok) {
                p++, depth--, value_next = false;
                continue;
            }
            if (IS(ch, END)) return -3; /* "[1,]", "[,1]" */
            if (k >= cap) return -2;
            if (!(p = put_value(p, end, t, out, k))) return -1;
            *count = ++k;
            value_next = close_ok = false;
            continue;
        }
        if (depth == 0 || (ch != ',' && ch != ']')) return -3;
        p++;
        if (ch == ',')
            value_next = true;
        else
            depth--;
    }
}

int scan_numbers(const char *s, size_t n, float *out, size_t cap, size_t *count)
{
    return scan_values(s, n, SIG_FP32, out, cap, count) == 0 ? 0 : -1;
}
