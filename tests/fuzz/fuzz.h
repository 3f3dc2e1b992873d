/* fuzz.h - helpers shared by the libFuzzer targets (docs/fuzzing.md).
 *
 * A target calls the production code on one input and then checks what the
 * caller of that code relies on.  A broken check aborts, which libFuzzer
 * reports as a crash with the input that caused it.  A check named in
 * GANTRY_FUZZ_KNOWN (comma-separated, set by tests/fuzz/run) is skipped: that
 * is how a reported but not yet fixed problem stays out of the way of the
 * others until its fix lands. */
#ifndef GANTRY_FUZZ_H
#define GANTRY_FUZZ_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The server refuses request bodies nested deeper than this before parsing them (json-max-depth). */
#define FUZZ_JSON_MAX_DEPTH 64

#define FUZZ_CHECK(cond, ...)                                                                                                      \
    do {                                                                                                                           \
        if (!(cond)) {                                                                                                             \
            fprintf(stderr, "fuzz check failed at %s:%d: %s: ", __FILE__, __LINE__, #cond);                                        \
            fprintf(stderr, __VA_ARGS__);                                                                                          \
            fputc('\n', stderr);                                                                                                   \
            abort();                                                                                                               \
        }                                                                                                                          \
    } while (0)

/* 1 when the check `name` is listed in GANTRY_FUZZ_KNOWN (a known, reported problem: skip it). */
static inline int fuzz_known(const char *name)
{
    const char *list = getenv("GANTRY_FUZZ_KNOWN");
    size_t n = strlen(name);
    while (list && *list) {
        const char *end = strchr(list, ',');
        size_t len = end ? (size_t)(end - list) : strlen(list);
        if (len == n && memcmp(list, name, n) == 0) return 1;
        list = end ? end + 1 : NULL;
    }
    return 0;
}

/* A NUL-terminated copy of the input (for APIs that take C strings). */
static inline char *fuzz_cstr(const uint8_t *data, size_t size)
{
    char *s = malloc(size + 1);
    if (!s) abort();
    if (size) memcpy(s, data, size);
    s[size] = '\0';
    return s;
}

/* 1 when s is well-formed UTF-8 (what jansson needs to put it in a JSON string). */
static inline int fuzz_utf8_valid(const char *s)
{
    const unsigned char *p = (const unsigned char *)s;
    while (*p) {
        unsigned c = *p;
        int n;
        unsigned min;
        if (c < 0x80) {
            p++;
            continue;
        } else if (c >= 0xc2 && c <= 0xdf) {
            n = 1, min = 0x80;
        } else if (c >= 0xe0 && c <= 0xef) {
            n = 2, min = 0x800;
        } else if (c >= 0xf0 && c <= 0xf4) {
            n = 3, min = 0x10000;
        } else {
            return 0;
        }
        unsigned cp = c & (0x3f >> n);
        for (int i = 1; i <= n; i++) {
            if ((p[i] & 0xc0) != 0x80) return 0;
            cp = (cp << 6) | (p[i] & 0x3f);
        }
        if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return 0;
        p += n + 1;
    }
    return 1;
}

/* Nesting depth of a parsed value: 0 for a scalar, 1 + the deepest child for arrays and objects. */
static inline int fuzz_json_depth(const json_t *v)
{
    int max = 0;
    if (json_is_array(v)) {
        size_t i;
        const json_t *x;
        json_array_foreach(v, i, x)
        {
            int d = fuzz_json_depth(x);
            if (d > max) max = d;
        }
        return max + 1;
    }
    if (json_is_object(v)) {
        const char *k;
        const json_t *x;
        json_object_foreach((json_t *)v, k, x)
        {
            int d = fuzz_json_depth(x);
            if (d > max) max = d;
        }
        return max + 1;
    }
    return 0;
}

#endif
