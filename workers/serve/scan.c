#include "workers/serve/scan.h"

#include <ctype.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define MAX_DEPTH 64

typedef struct {
    const char *p, *end;
} cur;

static void ws(cur *c)
{
    while (c->p < c->end && (*c->p == ' ' || *c->p == '\t' || *c->p == '\n' || *c->p == '\r'))
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

static int scalar(cur *c)
{
    const char *b = c->p;
    while (c->p < c->end && strchr(",]} \t\r\n", *c->p) == NULL)
        c->p++;
    size_t n = (size_t)(c->p - b);
    if (n == 0) return -1;
    if ((n == 4 && !memcmp(b, "true", 4)) || (n == 5 && !memcmp(b, "false", 5)) || (n == 4 && !memcmp(b, "null", 4))) return 0;
    for (const char *q = b; q < c->p; q++) /* a number: the characters it may hold */
        if (!strchr("0123456789+-.eE", *q)) return -1;
    return 0;
}

/* the members of an object (c->p after '{'); when `want` is found, stops on its value */
static int members(cur *c, int depth, const char *want)
{
    ws(c);
    if (c->p < c->end && *c->p == '}') {
        c->p++;
        return want ? -1 : 0;
    }
    for (;;) {
        const char *kb, *ke;
        ws(c);
        if (string(c, &kb, &ke)) return -1;
        ws(c);
        if (c->p >= c->end || *c->p++ != ':') return -1;
        ws(c);
        if (want && (size_t)(ke - kb) == strlen(want) && !memcmp(kb, want, (size_t)(ke - kb))) return 0;
        if (value(c, depth + 1)) return -1;
        ws(c);
        if (c->p >= c->end) return -1;
        if (*c->p == '}') {
            c->p++;
            return want ? -1 : 0;
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
        return members(c, depth, NULL);
    case '[':
        c->p++;
        return elements(c, depth);
    default:
        return scalar(c);
    }
}

int scan_data(const char *s, size_t n, size_t *start, size_t *end)
{
    cur c = {s, s + n};
    ws(&c);
    if (c.p >= c.end || *c.p++ != '{' || members(&c, 0, "inputs")) return -1;
    ws(&c);
    if (c.p >= c.end || *c.p++ != '[') return -1;
    ws(&c);
    if (c.p >= c.end || *c.p++ != '{' || members(&c, 1, "data")) return -1;
    ws(&c);
    *start = (size_t)(c.p - s);
    if (value(&c, 2)) return -1;
    *end = (size_t)(c.p - s);
    return 0;
}

int scan_numbers(const char *s, size_t n, float *out, size_t cap, size_t *count)
{
    const char *p = s, *end = s + n;
    size_t k = 0;
    char tmp[64];
    while (p < end) {
        char ch = *p;
        if (ch == '[' || ch == ']' || ch == ',' || ch == ' ' || ch == '\t' || ch == '\n' || ch == '\r') {
            p++;
            continue;
        }
        const char *b = p;
        while (p < end && strchr("0123456789+-.eE", *p))
            p++;
        size_t len = (size_t)(p - b);
        if (len == 0 || len >= sizeof(tmp) || k >= cap) return -1;
        memcpy(tmp, b, len); /* the text is not NUL-terminated here */
        tmp[len] = '\0';
        char *stop;
        float v = strtof(tmp, &stop);
        if (*stop || !isfinite(v)) return -1;
        out[k++] = v;
    }
    *count = k;
    return 0;
}
