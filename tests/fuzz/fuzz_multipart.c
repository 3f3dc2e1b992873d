/* fuzz_multipart.c - multipart/form-data bodies (server/multipart.c), as the model upload route
 * gets them: the input's first line is the Content-Type value, the rest the body.
 *
 * Checks: an accepted body's parts are views inside the body, in order and not overlapping, with
 * names that are non-empty, distinct, UTF-8 (as filenames are), so the route can put them in JSON;
 * a refusal has a message that is UTF-8; a body accepted with N parts is accepted again with
 * max_parts N and refused with N - 1 ("more than N - 1 parts"). */
#include "server/multipart.h"
#include "tests/fuzz/fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const uint8_t *nl = memchr(data, '\n', size);
    size_t ct_len = nl ? (size_t)(nl - data) : size;
    char *ct = fuzz_cstr(data, ct_len);
    /* the body in its own allocation of exactly its size: ASan sees a read past it */
    size_t len = nl ? size - ct_len - 1 : 0;
    char *body = malloc(len ? len : 1);
    if (!body) abort();
    if (len) memcpy(body, nl + 1, len);

    mp_part parts[MP_MAX_PARTS];
    int n = -1;
    char msg[200];
    int rc = multipart_parse(ct, body, len, parts, MP_MAX_PARTS, &n, msg, sizeof(msg));
    if (rc != 0) {
        FUZZ_CHECK(rc == -1 && n == 0, "rc %d, %d parts", rc, n);
        FUZZ_CHECK(msg[0] && fuzz_utf8_valid(msg), "a refusal without a UTF-8 message");
    } else {
        FUZZ_CHECK(n >= 0 && n <= MP_MAX_PARTS, "%d parts", n);
        const char *prev_end = body;
        for (int i = 0; i < n; i++) {
            const mp_part *p = &parts[i];
            FUZZ_CHECK(p->data >= prev_end && p->len <= len && p->data + p->len <= body + len, "part %d outside the body", i + 1);
            prev_end = p->data + p->len;
            FUZZ_CHECK(p->name[0] && fuzz_utf8_valid(p->name) && fuzz_utf8_valid(p->filename), "part %d: its name", i + 1);
            FUZZ_CHECK(p->has_filename || !p->filename[0], "a filename without has_filename");
            for (int j = 0; j < i; j++)
                FUZZ_CHECK(strcmp(parts[j].name, p->name) != 0, "two parts named '%s'", p->name);
            FUZZ_CHECK(multipart_find(parts, n, p->name) == p, "multipart_find");
        }
        if (n > 0) {
            int m;
            FUZZ_CHECK(multipart_parse(ct, body, len, parts, n, &m, msg, sizeof(msg)) == 0 && m == n, "max_parts %d", n);
            char want[40];
            snprintf(want, sizeof(want), "more than %d parts", n - 1);
            if (n > 1)
                FUZZ_CHECK(multipart_parse(ct, body, len, parts, n - 1, &m, msg, sizeof(msg)) == -1 && strcmp(msg, want) == 0,
                           "max_parts %d: '%s'", n - 1, msg);
        }
    }
    free(body);
    free(ct);
    return 0;
}
