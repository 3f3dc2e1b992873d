/* infer_wire.c - inference request and reply lines (infer_wire.h) */
#include "wire/infer_wire.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

int iw_request_head(char *out, size_t outlen, uint64_t id, const char *reply_to, size_t json_len)
{
    if (!reply_to[0] || strlen(reply_to) > IW_REPLY_TO_MAX || strchr(reply_to, ' ')) return -1;
    int n = snprintf(out, outlen, "%" PRIu64 " %s %zu ", id, reply_to, json_len);
    return n > 0 && (size_t)n < outlen ? n : -1;
}

/* a decimal number of digits only, the whole of [s, end) */
static int number(const char *s, const char *end, uint64_t *v)
{
    if (s == end || end - s > 20) return -1;
    uint64_t x = 0;
    for (const char *c = s; c < end; c++) {
        if (*c < '0' || *c > '9') return -1;
        uint64_t d = (uint64_t)(*c - '0');
        if (x > (UINT64_MAX - d) / 10) return -1;
        x = x * 10 + d;
    }
    *v = x;
    return 0;
}

int iw_request_parse(char *raw, size_t len, iw_request *out)
{
    char *a = memchr(raw, ' ', len);
    char *b = a ? memchr(a + 1, ' ', len - (size_t)(a + 1 - raw)) : NULL;
    char *c = b ? memchr(b + 1, ' ', len - (size_t)(b + 1 - raw)) : NULL;
    uint64_t id, json;
    if (!c || number(raw, a, &id) != 0 || b == a + 1 || b - a - 1 > IW_REPLY_TO_MAX || memchr(a + 1, '\0', (size_t)(b - a - 1)) ||
        number(b + 1, c, &json) != 0)
        return -1;
    size_t body = len - (size_t)(c + 1 - raw);
    if (json > body) return -1;
    *a = *b = *c = '\0';
    *out = (iw_request){.id = raw, .reply_to = a + 1, .body = c + 1, .len = body, .json_len = (size_t)json};
    return 0;
}

int iw_reply_head(char *out, size_t outlen, const char *id, int status)
{
    if (!id[0] || strchr(id, ' ')) return -1;
    int n = snprintf(out, outlen, "%s %d ", id, status);
    return n > 0 && (size_t)n < outlen ? n : -1;
}

int iw_reply_parse(const char *v, size_t len, uint64_t *id, int *status, const char **body, size_t *body_len)
{
    const char *a = memchr(v, ' ', len);
    const char *b = a ? memchr(a + 1, ' ', len - (size_t)(a + 1 - v)) : NULL;
    uint64_t st;
    if (!b || number(v, a, id) != 0 || number(a + 1, b, &st) != 0 || st < 200 || st > 599) return -1;
    *status = (int)st;
    *body = b + 1;
    *body_len = len - (size_t)(b + 1 - v);
    return 0;
}
