/* resume.c - the global model's checkpoint as bytes and the sites' agreement on where to restart (resume.h). */
#include "workers/fed/resume.h"
#include "common/alloc.h"

#include <math.h>
#include <openssl/evp.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void fed_resume_sha256(const double *v, size_t n, char hex[65])
{
    EVP_MD_CTX *md = EVP_MD_CTX_new();
    unsigned char chunk[4096], dig[EVP_MAX_MD_SIZE];
    unsigned dlen = 0;
    EVP_DigestInit_ex(md, EVP_sha256(), NULL);
    for (size_t i = 0; i < n; i += sizeof chunk / 4) {
        size_t k = n - i < sizeof chunk / 4 ? n - i : sizeof chunk / 4;
        tensorfile_f32_bytes(v + i, k, chunk);
        EVP_DigestUpdate(md, chunk, 4 * k);
    }
    EVP_DigestFinal_ex(md, dig, &dlen);
    EVP_MD_CTX_free(md);
    for (unsigned i = 0; i < dlen && i < 32; i++)
        snprintf(hex + 2 * i, 3, "%02x", dig[i]);
    hex[64] = '\0';
}

void fed_resume_announce(const fed_resume_have *h, char *out)
{
    snprintf(out, FED_RESUME_ANNOUNCE_MAX, "%d %s", h->round > 0 ? h->round : 0, h->round > 0 ? h->sha256 : "-");
}

static bool is_sha(const char *s)
{
    if (strlen(s) != 64) return false;
    for (const char *p = s; *p; p++)
        if (!((*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'f'))) return false;
    return true;
}

int fed_resume_parse(const char *s, fed_resume_have *h)
{
    char *end = NULL;
    long r = s ? strtol(s, &end, 10) : -1;
    if (!s || end == s || *end != ' ' || r < 0 || r > 1000000000L) return -1;
    h->round = (int)r;
    const char *sha = end + 1;
    if (r == 0 ? strcmp(sha, "-") != 0 : !is_sha(sha)) return -1;
    snprintf(h->sha256, sizeof h->sha256, "%s", sha);
    return 0;
}

void fed_resume_decide(const fed_resume_have *have, int n, int rounds, fed_resume_plan *plan)
{
    memset(plan, 0, sizeof *plan);
    plan->holder = -1;
    int best = 0, holder = -1;
    for (int i = 0; i < n; i++)
        if (have[i].round > best && have[i].round <= rounds) best = have[i].round, holder = i;
    if (best == 0) return;
    for (int i = 0; i < n; i++)
        if (have[i].round == best && i < holder) holder = i;
    for (int i = 0; i < n; i++)
        if (have[i].round == best && strcmp(have[i].sha256, have[holder].sha256) != 0) {
            snprintf(plan->why, sizeof plan->why,
                     "sites %d and %d hold different global models for round %d (sha256 %.12s... and %.12s...): starting again "
                     "from round 1",
                     holder, i, best, have[holder].sha256, have[i].sha256);
            return;
        }
    plan->round = best, plan->holder = holder;
    snprintf(plan->sha256, sizeof plan->sha256, "%s", have[holder].sha256);
}

unsigned char *fed_resume_encode(const tensorfile_header *layout, const double *v, const char *job, int round, int rounds,
                                 size_t *len)
{
    char sr[16], srs[16], sha[65];
    snprintf(sr, sizeof sr, "%d", round), snprintf(srs, sizeof srs, "%d", rounds);
    fed_resume_sha256(v, layout->total, sha);
    json_t *meta =
        json_pack("{s:s, s:s, s:s, s:s, s:s}", "gantry", FED_RESUME_FORMAT, "job", job, "round", sr, "rounds", srs, "sha256", sha);
    unsigned char *out = tensorfile_write(layout, meta, v, len);
    json_decref(meta);
    return out;
}

/* a metadata string that is a whole number in [lo, hi]; -1 when it is not */
static long meta_int(const json_t *meta, const char *key, long lo, long hi)
{
    const char *s = json_string_value(json_object_get(meta, key));
    char *end = NULL;
    long x = s ? strtol(s, &end, 10) : -1;
    return s && end != s && !*end && x >= lo && x <= hi ? x : -1;
}

int fed_resume_check(const tensorfile_header *h, const double *v, const tensorfile_header *layout, const char *job, int rounds,
                     fed_resume_have *have, char *err, size_t errlen)
{
    const char *fmt = json_string_value(json_object_get(h->meta, "gantry"));
    const char *of = json_string_value(json_object_get(h->meta, "job"));
    const char *sha = json_string_value(json_object_get(h->meta, "sha256"));
    long round = meta_int(h->meta, "round", 1, rounds), total = meta_int(h->meta, "rounds", 1, 1000000000L);
    char why[300], mine[65];
    if (!fmt || strcmp(fmt, FED_RESUME_FORMAT) != 0) {
        snprintf(err, errlen, "not a gantry checkpoint (__metadata__.gantry is %s, not %s)", fmt ? fmt : "missing",
                 FED_RESUME_FORMAT);
        return -1;
    }
    if (!of || strcmp(of, job) != 0) {
        snprintf(err, errlen, "it belongs to job %.100s", of ? of : "(none)");
        return -1;
    }
    if (round < 0 || total != rounds) {
        const char *r = json_string_value(json_object_get(h->meta, "round")),
                   *t = json_string_value(json_object_get(h->meta, "rounds"));
        snprintf(err, errlen, "its round (%.20s of %.20s) is not one of the job's %d", r ? r : "?", t ? t : "?", rounds);
        return -1;
    }
    if (tensorfile_same_layout(layout, h, why, sizeof why) != 0) {
        snprintf(err, errlen, "it is not this model: %s", why);
        return -1;
    }
    fed_resume_sha256(v, h->total, mine);
    if (!sha || strcmp(sha, mine) != 0) {
        snprintf(err, errlen, "its values do not match its sha256 (damaged?)");
        return -1;
    }
    have->round = (int)round;
    snprintf(have->sha256, sizeof have->sha256, "%s", mine);
    return 0;
}

void fed_resume_split(const double *v, size_t n, double *hi, double *lo)
{
    for (size_t i = 0; i < n; i++) {
        float f = (float)v[i];
        uint32_t u;
        memcpy(&u, &f, sizeof u);
        hi[i] = (double)(u >> 16), lo[i] = (double)(u & 0xffffu);
    }
}

/* a half back from a sum: the nearest integer, within 0..65535 */
static uint32_t half(double x)
{
    long r = lround(x);
    return r < 0 ? 0u : r > 0xffff ? 0xffffu : (uint32_t)r;
}

void fed_resume_join(const double *hi, const double *lo, size_t n, double *v)
{
    for (size_t i = 0; i < n; i++) {
        uint32_t u = half(hi[i]) << 16 | half(lo[i]);
        float f;
        memcpy(&f, &u, sizeof f);
        v[i] = (double)f;
    }
}
