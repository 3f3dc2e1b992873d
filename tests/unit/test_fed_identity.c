/* test_fed_identity.c - per-site identity in the federated exchange (spec/fed_sitekey.h, workers/fed/secagg.h):
 * the public key's text form, hellos signed by the roster's keys (a site signing with another key is refused,
 * with the reason naming its spec field), partial sums forged by another site (the job's key, the wrong signer)
 * rejected, and a mixed roster (pinned and unpinned sites in one job). */
#include <math.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "spec/fed_design.h"
#include "spec/fed_sitekey.h"
#include "spec/fed_spec.h"
#include "workers/fed/fed_audit.h"
#include "workers/fed/memnet.h"
#include "workers/fed/secagg.h"
#include "workers/fed/secagg_drop.h"

#define SITES 9
#define VDIM 16

static const unsigned char secret[] = "identity test cluster secret";

/* ---- the text form ---- */

static void test_sitekey_text(void **state)
{
    (void)state;
    unsigned char priv[32], pub[32], back[32], sig[64];
    char text[FED_SITEKEY_TEXT], why[200];
    assert_int_equal(fed_sitekey_generate(priv), 0);
    assert_int_equal(fed_sitekey_public(priv, pub), 0);
    fed_sitekey_format(pub, text);
    assert_int_equal(strlen(text), 52);
    assert_int_equal(strncmp(text, "ed25519:", 8), 0);
    assert_int_equal(fed_sitekey_parse(text, back, why, sizeof why), 0);
    assert_memory_equal(pub, back, 32);
    /* refused, each with the form in the reason */
    const char *bad[] = {"",
                         "ed25519:",
                         "x25519:AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=",
                         "ed25519:AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA", /* no padding */
                         "ed25519:AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA*=", /* not base64 */
                         "ed25519:AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAB=", /* padding bits set: not canonical */
                         NULL};
    for (int i = 0; bad[i]; i++) {
        why[0] = 0;
        if (fed_sitekey_parse(bad[i], back, why, sizeof why) == 0) fail_msg("accepted %s", bad[i]);
        assert_non_null(strstr(why, "ed25519:<base64 of 32 bytes>"));
    }
    /* signatures: valid by its key, not by another, not of another message */
    unsigned char msg[] = "a message", other_priv[32], other_pub[32];
    assert_int_equal(fed_sitekey_sign(priv, msg, sizeof msg, sig), 0);
    assert_int_equal(fed_sitekey_verify(pub, msg, sizeof msg, sig), 1);
    assert_int_equal(fed_sitekey_generate(other_priv), 0);
    assert_int_equal(fed_sitekey_public(other_priv, other_pub), 0);
    assert_int_equal(fed_sitekey_verify(other_pub, msg, sizeof msg, sig), 0);
    msg[0] ^= 1;
    assert_int_equal(fed_sitekey_verify(pub, msg, sizeof msg, sig), 0);
}

/* spec.sites[i].public_key: its form and no duplicates, the field named */
static void test_spec_public_keys(void **state)
{
    (void)state;
    unsigned char priv[32], pub[32];
    char k0[FED_SITEKEY_TEXT], k1[FED_SITEKEY_TEXT], field[160], msg[300];
    assert_int_equal(fed_sitekey_generate(priv), 0), assert_int_equal(fed_sitekey_public(priv, pub), 0);
    fed_sitekey_format(pub, k0);
    assert_int_equal(fed_sitekey_generate(priv), 0), assert_int_equal(fed_sitekey_public(priv, pub), 0);
    fed_sitekey_format(pub, k1);
    const char *tmpl = "{\"program\": {\"command\": [\"/usr/bin/python3\", \"train.py\"], \"workdir\": \"/tmp\"}, \"rounds\": 2,"
                       " \"sites\": [{\"name\": \"a\", \"public_key\": \"%s\"}, {\"name\": \"b\", \"public_key\": \"%s\"},"
                       " {\"name\": \"c\"}]}";
    char text[1024];
    json_error_t je;
    snprintf(text, sizeof text, tmpl, k0, k1);
    json_t *spec = json_loads(text, 0, &je);
    assert_non_null(spec);
    if (fed_spec_validate(spec, field, sizeof field, msg, sizeof msg)) fail_msg("%s: %s", field, msg);
    json_decref(spec);
    snprintf(text, sizeof text, tmpl, k0, k0); /* the same key twice */
    spec = json_loads(text, 0, &je);
    assert_int_equal(fed_spec_validate(spec, field, sizeof field, msg, sizeof msg), -1);
    assert_string_equal(field, "spec.sites[1].public_key");
    assert_non_null(strstr(msg, "spec.sites[0]'s key too"));
    json_decref(spec);
    snprintf(text, sizeof text, tmpl, k0, "ed25519:short");
    spec = json_loads(text, 0, &je);
    assert_int_equal(fed_spec_validate(spec, field, sizeof field, msg, sizeof msg), -1);
    assert_string_equal(field, "spec.sites[1].public_key");
    assert_non_null(strstr(msg, "ed25519:<base64 of 32 bytes>"));
    json_decref(spec);
}

/* ---- the exchange with a roster ---- */

typedef struct {
    fed_party p;
    const fed_design *d;
    fed_net *net;
    int me, rc, sums, drop_t; /* drop_t > 0: the sums in the threshold mode (secagg_drop.h) with that t */
    const unsigned char (*roster)[32];
    const unsigned char *pinned, *id_priv;
    double v[VDIM], total[VDIM];
    char err[300];
} party_run;

static void *party_main(void *arg)
{
    party_run *r = arg;
    r->rc = fed_party_init(&r->p, r->net, SITES, r->me, "j_ident", 1, secret, sizeof secret - 1, r->d, VDIM, 2000) ? FED_BROKEN
                                                                                                                   : FED_OK;
    /* a worker whose key is not its site's roster key: fed_party_identity refuses it; a modified worker would go on */
    if (r->rc == FED_OK) fed_party_identity(&r->p, r->roster, r->pinned, r->id_priv);
    if (r->rc == FED_OK) r->rc = fed_party_setup(&r->p, 100 + r->me, r->err, sizeof r->err);
    fed_drop_opts o = {r->drop_t, 200, 1, 0};
    fed_drop_report rep;
    for (int k = 0; k < r->sums && r->rc == FED_OK; k++)
        r->rc = r->drop_t ? fed_party_sum_drop(&r->p, &o, r->v, 1, r->total, &rep, r->err, sizeof r->err)
                          : fed_party_sum(&r->p, r->v, 0, k % r->d->classes, r->total, r->err, sizeof r->err);
    return NULL; /* the party is freed by the test (it forges with its keys) */
}

typedef struct {
    fed_design d;
    fed_memnet *hub;
    party_run runs[SITES];
    unsigned char priv[SITES][32], roster[SITES][32], pinned[SITES];
} world;

/* SITES parties, each with its own identity key; pin: which sites the roster pins; wrong: a site that signs with
 * another key than its roster's (-1: none) */
static void run_world_t(world *w, const int *pin, int wrong, int sums, int drop_t)
{
    char err[200];
    memset(w, 0, sizeof *w);
    assert_int_equal(fed_design_make(SITES, &w->d, err, sizeof err), 0);
    w->hub = fed_memnet_new(1);
    for (int i = 0; i < SITES; i++) {
        assert_int_equal(fed_sitekey_generate(w->priv[i]), 0);
        assert_int_equal(fed_sitekey_public(w->priv[i], w->roster[i]), 0);
        w->pinned[i] = (unsigned char)pin[i];
    }
    if (wrong >= 0) assert_int_equal(fed_sitekey_generate(w->priv[wrong]), 0); /* not the roster's key any more */
    pthread_t th[SITES];
    for (int i = 0; i < SITES; i++) {
        party_run *r = &w->runs[i];
        r->d = &w->d, r->net = fed_memnet_endpoint(w->hub, i), r->me = i, r->sums = sums, r->drop_t = drop_t;
        r->roster = (const unsigned char(*)[32])w->roster, r->pinned = w->pinned, r->id_priv = w->priv[i];
        for (int j = 0; j < VDIM; j++)
            r->v[j] = i + 0.25 * j;
        pthread_create(&th[i], NULL, party_main, r);
    }
    for (int i = 0; i < SITES; i++)
        pthread_join(th[i], NULL);
}

static void run_world(world *w, const int *pin, int wrong, int sums)
{
    run_world_t(w, pin, wrong, sums, 0);
}

static void world_free(world *w)
{
    for (int i = 0; i < SITES; i++)
        fed_party_free(&w->runs[i].p);
    fed_memnet_free(w->hub);
    fed_design_free(&w->d);
}

static void check_totals(world *w)
{
    for (int i = 0; i < SITES; i++) {
        if (w->runs[i].rc != FED_OK) fail_msg("site %d: %s", i, w->runs[i].err);
        for (int j = 0; j < VDIM; j++)
            assert_true(fabs(w->runs[i].total[j] - (36 + SITES * 0.25 * j)) < 1e-6); /* sum of i (0..8) + 9 x 0.25 j */
    }
}

static size_t count_len(world *w, const char *chan, size_t len)
{
    size_t k = 0;
    for (size_t i = 0; i < fed_memnet_count(w->hub); i++)
        k += strcmp(fed_memnet_at(w->hub, i)->chan, chan) == 0 && fed_memnet_at(w->hub, i)->blob.len == len;
    return k;
}

static void test_roster_signed(void **state)
{
    (void)state;
    static world w;
    int all[SITES] = {1, 1, 1, 1, 1, 1, 1, 1, 1};
    run_world(&w, all, -1, 3);
    check_totals(&w);
    /* every hello carries its signature: header, key, tag, signature */
    assert_int_equal(count_len(&w, "hello", FED_HDR_LEN + 64 + FED_SIG_LEN), SITES);
    /* a partial sum: sealed and signed (3 groups of class 0 in exchange 1) */
    assert_int_equal(count_len(&w, "x:1", FED_HDR_LEN + VDIM * 8 + FED_TAG_LEN + FED_SIG_LEN), 3);
    world_free(&w);
}

/* the threshold mode (dropouts) with every site pinned: each round's mask key and every message to all sites
 * carry the sender's signature, and the mean comes out right */
static void test_roster_signed_threshold_mode(void **state)
{
    (void)state;
    static world w;
    int all[SITES] = {1, 1, 1, 1, 1, 1, 1, 1, 1};
    run_world_t(&w, all, -1, 2, 6);
    for (int i = 0; i < SITES; i++) {
        if (w.runs[i].rc != FED_OK) fail_msg("site %d: %s", i, w.runs[i].err);
        for (int j = 0; j < VDIM; j++) /* the weights are all 1: the mean of i + 0.25 j over the 9 sites */
            assert_true(fabs(w.runs[i].total[j] - (4 + 0.25 * j)) < 1e-6);
    }
    size_t dkey = FED_DKEY_HEAD + (size_t)(SITES - 1) * FED_DKEY_SHARE + FED_SIG_LEN;
    assert_int_equal(count_len(&w, "dk:1", dkey), SITES); /* the first sum's keys, each signed */
    size_t masked = FED_HDR_LEN + (VDIM + 1) * 8 + FED_TAG_LEN + FED_SIG_LEN;
    size_t k = 0;
    for (size_t i = 0; i < fed_memnet_count(w.hub); i++)
        k += strncmp(fed_memnet_at(w.hub, i)->chan, "dy:", 3) == 0 && fed_memnet_at(w.hub, i)->blob.len == masked;
    assert_int_equal(k, 2 * SITES); /* every masked input of both sums, signed */
    world_free(&w);
}

/* site 1's worker signs with a key that is not its roster key: every site refuses it, naming the field */
static void test_wrong_signer_refused(void **state)
{
    (void)state;
    static world w;
    int all[SITES] = {1, 1, 1, 1, 1, 1, 1, 1, 1};
    run_world(&w, all, 1, 1);
    for (int i = 0; i < SITES; i++) {
        assert_int_equal(w.runs[i].rc, FED_TAMPERED);
        assert_non_null(strstr(w.runs[i].err, "site 1's key is not signed by its roster key (spec.sites[1].public_key)"));
    }
    world_free(&w);
    /* the worker's own check refuses it before that */
    fed_party p;
    fed_design d;
    char err[200];
    unsigned char roster[SITES][32] = {{0}}, pinned[SITES] = {0, 1}, mine[32], other[32];
    assert_int_equal(fed_design_make(SITES, &d, err, sizeof err), 0);
    assert_int_equal(fed_sitekey_generate(mine), 0), assert_int_equal(fed_sitekey_generate(other), 0);
    assert_int_equal(fed_sitekey_public(other, roster[1]), 0);
    assert_int_equal(fed_party_init(&p, NULL, SITES, 1, "j", 0, secret, 4, &d, 4, 10), 0);
    assert_int_equal(fed_party_identity(&p, (const unsigned char(*)[32])roster, pinned, mine), -1);
    assert_int_equal(fed_party_identity(&p, (const unsigned char(*)[32])roster, pinned, NULL), -1);
    assert_int_equal(fed_party_identity(&p, (const unsigned char(*)[32])roster, pinned, other), 0);
    fed_party_free(&p);
    fed_design_free(&d);
}

/* site f holds the job's key K: it seals a partial sum as if from site v, signed with its own key or unsigned */
static void forge(const world *w, int f, int v, int sign_as_pinned, unsigned char *out, size_t *outlen)
{
    static fed_party F; /* f's party, posing as v */
    F = w->runs[f].p;
    F.me = v;
    F.pinned[v] = (unsigned char)sign_as_pinned; /* signs with f's own identity key, or not at all */
    uint64_t vals[VDIM] = {0};
    vals[0] = 1ULL << 40; /* a bias */
    fed_hdr h = {1, FED_MSG_PARTIAL, v, FED_TO_ALL, 1, {0}};
    assert_int_equal(fed_bcast_seal(&F, &h, vals, sizeof vals, out, outlen), 0);
}

static void test_forged_partial_rejected(void **state)
{
    (void)state;
    static world w;
    int all[SITES] = {1, 1, 1, 1, 1, 1, 1, 1, 1};
    run_world(&w, all, -1, 2);
    check_totals(&w);
    unsigned char blob[FED_HDR_LEN + VDIM * 8 + FED_TAG_LEN + FED_SIG_LEN];
    uint64_t plain[VDIM];
    size_t len;
    char why[400];
    fed_hdr h;
    for (int sign = 1; sign >= 0; sign--) { /* signed by site 2's key; unsigned */
        forge(&w, 2, 4, sign, blob, &len);
        assert_int_equal(fed_hdr_parse(blob, len, &h), 0);
        assert_int_equal(h.sender, 4);
        for (int r = 0; r < SITES; r++) { /* every site, the forger's victim included, rejects it */
            why[0] = 0;
            assert_int_equal(fed_bcast_open(&w.runs[r].p, &h, blob, len, plain, sizeof plain, "a group's sum", why, sizeof why),
                             FED_TAMPERED);
            assert_non_null(strstr(why, "a group's sum from site 4 is not signed by its roster key (spec.sites[4].public_key)"));
        }
    }
    /* a real partial of site 4's still opens, and one byte changed does not */
    forge(&w, 4, 4, 1, blob, &len);
    assert_int_equal(fed_hdr_parse(blob, len, &h), 0);
    assert_int_equal(fed_bcast_open(&w.runs[0].p, &h, blob, len, plain, sizeof plain, "x", why, sizeof why), FED_OK);
    assert_true(plain[0] == 1ULL << 40);
    blob[FED_HDR_LEN + 3] ^= 1;
    assert_int_equal(fed_bcast_open(&w.runs[0].p, &h, blob, len, plain, sizeof plain, "x", why, sizeof why), FED_TAMPERED);
    world_free(&w);
}

/* pinned and unpinned sites in one job: the sums are right; pinned sites sign, the others are authenticated by the
 * cluster secret alone (which is all that protects them: a partial forged in an unpinned site's name opens) */
static void test_mixed_roster(void **state)
{
    (void)state;
    static world w;
    int even[SITES] = {1, 0, 1, 0, 1, 0, 1, 0, 1};
    run_world(&w, even, -1, 3);
    check_totals(&w);
    assert_int_equal(count_len(&w, "hello", FED_HDR_LEN + 64 + FED_SIG_LEN), 5);
    assert_int_equal(count_len(&w, "hello", FED_HDR_LEN + 64), 4);
    unsigned char blob[FED_HDR_LEN + VDIM * 8 + FED_TAG_LEN + FED_SIG_LEN];
    uint64_t plain[VDIM];
    size_t len;
    char why[400];
    fed_hdr h;
    forge(&w, 3, 2, 0, blob, &len); /* an unpinned site in a pinned one's name: rejected */
    assert_int_equal(fed_hdr_parse(blob, len, &h), 0);
    assert_int_equal(fed_bcast_open(&w.runs[0].p, &h, blob, len, plain, sizeof plain, "a group's sum", why, sizeof why),
                     FED_TAMPERED);
    assert_non_null(strstr(why, "from site 2 is not signed by its roster key (spec.sites[2].public_key)"));
    forge(&w, 2, 1, 0, blob, &len); /* in an unpinned site's name: the limit of the cluster secret */
    assert_int_equal(fed_hdr_parse(blob, len, &h), 0);
    assert_int_equal(fed_bcast_open(&w.runs[0].p, &h, blob, len, plain, sizeof plain, "a group's sum", why, sizeof why), FED_OK);
    world_free(&w);
    /* an unpinned site whose worker has another cluster secret is still refused by the tag */
}

/* the privacy audit with a mixed roster (sites 0, 2, 4, ... sign: every signature checked, none explains a value) and
 * coalitions of three sites: 9 sites, T = 1..12, nothing determined; with 4 sites, three determine the fourth (the
 * total minus their own: inherent), which shows the coalitions are pooled */
static void test_privacy_audit_signed_triples(void **state)
{
    (void)state;
    int nine[] = {9}, four[] = {4};
    fed_audit_opts o = {.coalitions_upto = 9, .coalitions3_upto = 9};
    fed_audit_result r;
    char err[512];
    if (fed_audit(nine, 1, &o, &r, err, sizeof err)) fail_msg("%s", err);
    assert_int_equal(r.views, 12 * (1 + 9 + 36 + 84));
    assert_int_equal(r.single, 0);
    assert_int_equal(r.coalition, 0);
    assert_int_equal(r.coalition3, 0);
    fed_audit_opts o4 = {.coalitions_upto = 4, .coalitions3_upto = 4, .t_max = 2};
    if (fed_audit(four, 1, &o4, &r, err, sizeof err)) fail_msg("%s", err);
    assert_int_equal(r.single, 0);
    assert_int_equal(r.coalition, 0);
    assert_int_equal(r.coalition3, 2 * 4); /* T = 1, 2; each of the 4 triples */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sitekey_text),         cmocka_unit_test(test_spec_public_keys),
        cmocka_unit_test(test_roster_signed),        cmocka_unit_test(test_roster_signed_threshold_mode),
        cmocka_unit_test(test_wrong_signer_refused), cmocka_unit_test(test_forged_partial_rejected),
        cmocka_unit_test(test_mixed_roster),         cmocka_unit_test(test_privacy_audit_signed_triples),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
