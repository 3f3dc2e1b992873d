/* fuzz_query.c - http_query_value, the query-string decoder behind every ?name=value the API
 * reads (server/http.c).  The input is the query string (without '?'); when it holds a '\n',
 * the bytes before it are one more parameter name to look up and the rest is the query string.
 *
 * The output buffer is exactly len + 1 bytes, as http_query allocates it, so ASan sees any
 * write past it.  The result is compared with a plain reference decoder written from the
 * header's contract: the first '&'-separated pair whose name is exactly `name`; %XX (two hex
 * digits) is that byte, '+' a space, anything else itself. */
#include "server/http.h"
#include "tests/fuzz/fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* the names the handlers ask for (api_jobs.c, api_cluster.c) and a few that are not there */
static const char *const names[] = {"type", "state", "limit", "cursor", "minutes", "", "a", "state=", "&"};

static int hex(int c)
{
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

static long reference(const char *qs, size_t len, const char *name, char *out)
{
    size_t nlen = strlen(name), start = 0;
    while (start < len) {
        size_t stop = start;
        while (stop < len && qs[stop] != '&')
            stop++;
        size_t eq = start;
        while (eq < stop && qs[eq] != '=')
            eq++;
        if (eq < stop && eq - start == nlen && memcmp(qs + start, name, nlen) == 0) {
            size_t o = 0;
            for (size_t i = eq + 1; i < stop; i++) {
                if (qs[i] == '%' && i + 2 < stop && hex(qs[i + 1]) >= 0 && hex(qs[i + 2]) >= 0) {
                    out[o++] = (char)(hex(qs[i + 1]) * 16 + hex(qs[i + 2]));
                    i += 2;
                } else {
                    out[o++] = qs[i] == '+' ? ' ' : qs[i];
                }
            }
            out[o] = '\0';
            return (long)o;
        }
        start = stop + 1;
    }
    return -1;
}

static void check_name(const char *qs, size_t len, const char *name)
{
    char *out = malloc(len + 1), *want = malloc(len + 1);
    if (!out || !want) abort();
    long got = http_query_value(qs, len, name, out);
    long exp = reference(qs, len, name, want);
    FUZZ_CHECK(got == exp, "name '%s': decoded length %ld, expected %ld", name, got, exp);
    if (got >= 0) {
        FUZZ_CHECK((size_t)got <= len, "decoded length %ld exceeds the input's %zu", got, len);
        FUZZ_CHECK(out[got] == '\0', "not NUL-terminated");
        FUZZ_CHECK(memcmp(out, want, (size_t)got) == 0, "name '%s': decoded bytes differ from the reference", name);
    }
    free(out);
    free(want);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* a copy of exactly `size` bytes: the decoder must not read past len (no NUL follows in h2o's buffer) */
    char *buf = malloc(size ? size : 1);
    if (!buf) abort();
    if (size) memcpy(buf, data, size);
    const char *qs = buf;
    size_t len = size;
    char *nl = size ? memchr(buf, '\n', size) : NULL;
    if (nl) {
        char *name = fuzz_cstr((const uint8_t *)buf, (size_t)(nl - buf)); /* stops at an embedded NUL, like a C caller */
        qs = nl + 1;
        len = size - (size_t)(qs - buf);
        check_name(qs, len, name);
        free(name);
    }
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        check_name(qs, len, names[i]);
    free(buf);
    return 0;
}
