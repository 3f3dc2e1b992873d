/* rdv_wire.c - the rendezvous hash's codec (rdv_wire.h). */
#include "wire/rdv_wire.h"

#include <stdio.h>
#include <string.h>

int rdv_join_encode(const rdv_join_msg *m, rdv_join_nums *nums, const char *argv[RDV_JOIN_ARGC])
{
    if (m->world < 1 || m->world > RDV_MAX_WORLD || m->ttl_ms <= 0 || !m->addr || !m->addr[0] || strlen(m->addr) >= RDV_ADDR_LEN ||
        !m->worker_id || !m->worker_id[0])
        return -1;
    snprintf(nums->world, sizeof(nums->world), "%d", m->world);
    snprintf(nums->ttl, sizeof(nums->ttl), "%d", m->ttl_ms);
    argv[0] = nums->world;
    argv[1] = m->addr;
    argv[2] = m->worker_id;
    argv[3] = nums->ttl;
    return 0;
}

int rdv_field_val(char *buf, size_t len, const char *name)
{
    int n = snprintf(buf, len, "%s%s", RDV_F_VAL, name);
    return n < 0 || (size_t)n >= len ? -1 : 0;
}

long rdv_number(const char *s, size_t n)
{
    if (!s || n == 0 || n > 9 || (n > 1 && s[0] == '0')) return -1;
    long v = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9') return -1;
        v = v * 10 + (s[i] - '0');
    }
    return v;
}

static bool is(const char *s, size_t n, const char *name)
{
    return n == strlen(name) && memcmp(s, name, n) == 0;
}

static bool starts(const char *s, size_t n, const char *prefix)
{
    size_t p = strlen(prefix);
    return n >= p && memcmp(s, prefix, p) == 0;
}

int rdv_decode(size_t n, const char *const *v, const size_t *lens, rdv_state *out)
{
    memset(out, 0, sizeof(*out));
    if (n % 2 || n > RDV_MAX_FIELDS) return -1;
    for (size_t i = 0; i < n; i += 2) {
        const char *k = v[i], *val = v[i + 1];
        size_t kn = lens[i], vn = lens[i + 1];
        if (!k || !val) return -1;
        if (is(k, kn, RDV_F_WORLD)) {
            long w = rdv_number(val, vn);
            if (w < 0) return -1;
            out->world = w > RDV_MAX_WORLD ? RDV_MAX_WORLD + 1 : (int)w; /* too large a gang: the join says so */
        } else if (is(k, kn, RDV_F_N)) {
            long j = rdv_number(val, vn);
            if (j < 0 || j > RDV_MAX_WORLD) return -1;
            out->joined = (int)j;
        } else if (is(k, kn, RDV_F_ABORT)) {
            size_t m = vn < RDV_REASON_LEN - 1 ? vn : RDV_REASON_LEN - 1;
            memcpy(out->abort, val, m);
            out->abort[m] = '\0';
            out->aborted = true;
        } else if (starts(k, kn, RDV_F_ADDR)) {
            size_t p = strlen(RDV_F_ADDR);
            long r = rdv_number(k + p, kn - p);
            if (r < 0 || r >= RDV_MAX_WORLD || vn == 0 || vn >= RDV_ADDR_LEN || memchr(val, '\0', vn)) return -1;
            if (!out->have[r]) out->naddrs++;
            memcpy(out->addrs[r], val, vn);
            out->addrs[r][vn] = '\0';
            out->have[r] = true;
        }
    }
    return 0;
}
