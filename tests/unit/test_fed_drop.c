/* test_fed_drop.c - sums that complete with t of n sites (workers/fed/secagg_drop.h) over the in-memory
 * transport, with sites killed, delayed or garbled at chosen points (memnet.h's faults): no dropout gives
 * today's FedAvg total; 1 and 2 dropouts at n = 5, t = 3 give the survivors' exact total; below the threshold
 * the round is tried again, then lost; a late input stays masked; a malformed input drops its sender only;
 * the dropout path's privacy audit (fed_audit_drop.h). */
#include "spec/fed_spec.h"
#include "workers/fed/fed_audit_drop.h"
#include "workers/fed/memnet.h"
#include "workers/fed/secagg.h"
#include "workers/fed/secagg_drop.h"

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

#define N 5
#define T 3
#define DIM 40
#define ROUNDS 2

static const unsigned char secret[] = "unit-test cluster secret";
static int close_ms = 400;    /* how long a site waits for the others once t are in, before it closes a phase */
static int timeout_ms = 4000; /* for the first t, and for what must come */

typedef struct {
    fed_party p;
    fed_net *net;
    const fed_design *d;
    int me, rc, retries, close_ms, timeout_ms, compare; /* compare: also today's fedavg sum, into plain */
    double v[DIM], samples, a;
    double total[ROUNDS][DIM], plain[DIM];
    fed_drop_report rep[ROUNDS];
    int rcs[ROUNDS];
    unsigned char bkey[32];
    char err[256];
} site;

static void *site_main(void *arg)
{
    site *s = arg;
    s->rc = fed_party_init(&s->p, s->net, N, s->me, "j_drop", 1, secret, sizeof secret - 1, s->d, DIM, s->timeout_ms) ? FED_BROKEN
                                                                                                                      : FED_OK;
    if (s->rc == FED_OK) s->rc = fed_party_setup(&s->p, s->samples, s->err, sizeof s->err);
    s->a = s->p.a;
    memcpy(s->bkey, s->p.bkey, 32);
    if (s->rc == FED_OK && s->compare) s->rc = fed_party_sum(&s->p, s->v, 1, 0, s->plain, s->err, sizeof s->err);
    fed_drop_opts o = {T, s->close_ms, s->retries, 0};
    for (int k = 0; k < ROUNDS && s->rc == FED_OK; k++)
        s->rc = s->rcs[k] = fed_party_sum_drop(&s->p, &o, s->v, s->p.a, s->total[k], &s->rep[k], s->err, sizeof s->err);
    fed_party_free(&s->p);
    return NULL;
}

typedef struct {
    int who, kind, ms;
    const char *at;
} fault;

/* N sites as threads with the faults armed; hub: kept (with its log) when keep is set */
static fed_memnet *run(site *S, const fault *f, int nf, int compare, int keep)
{
    fed_design d;
    char err[200];
    assert_int_equal(fed_design_make(N, &d, err, sizeof err), 0);
    fed_memnet *hub = fed_memnet_new(1);
    for (int q = 0; q < nf; q++)
        fed_memnet_fault(hub, f[q].who, f[q].at, f[q].kind, f[q].ms);
    pthread_t th[N];
    uint64_t seed = 99;
    for (int i = 0; i < N; i++) {
        memset(&S[i], 0, sizeof S[i]);
        S[i].net = fed_memnet_endpoint(hub, i), S[i].d = &d, S[i].me = i, S[i].compare = compare;
        S[i].samples = 50 + 31 * i, S[i].retries = 2, S[i].close_ms = close_ms, S[i].timeout_ms = timeout_ms;
        for (int j = 0; j < DIM; j++) {
            seed = seed * 6364136223846793005ull + 1442695040888963407ull;
            S[i].v[j] = (double)(seed >> 11) / 9007199254740992.0 * 8 - 4;
        }
        pthread_create(&th[i], NULL, site_main, &S[i]);
    }
    for (int i = 0; i < N; i++)
        pthread_join(th[i], NULL);
    fed_design_free(&d);
    if (!keep) {
        fed_memnet_free(hub);
        return NULL;
    }
    return hub;
}

/* the weighted mean over the sites in set */
static void mean_of(const site *S, uint64_t set, double *want)
{
    double w = 0;
    memset(want, 0, sizeof(double) * DIM);
    for (int i = 0; i < N; i++)
        if (set >> i & 1) {
            w += S[i].a;
            for (int j = 0; j < DIM; j++)
                want[j] += S[i].a * S[i].v[j];
        }
    for (int j = 0; j < DIM; j++)
        want[j] /= w;
}

/* every site of alive got, in round k, the weighted mean over set */
static void check_round(const site *S, uint64_t alive, int k, uint64_t set)
{
    double want[DIM];
    mean_of(S, set, want);
    for (int i = 0; i < N; i++) {
        if (!(alive >> i & 1)) continue;
        if (S[i].rcs[k] != FED_OK) fail_msg("site %d, round %d: rc %d: %s", i, k, S[i].rcs[k], S[i].err);
        assert_int_equal(S[i].rep[k].u2, set);
        assert_int_equal(S[i].rep[k].in, (int)(set >> i & 1));
        for (int j = 0; j < DIM; j++)
            if (fabs(S[i].total[k][j] - want[j]) > 1e-7)
                fail_msg("site %d round %d [%d]: %.9f, not %.9f", i, k, j, S[i].total[k][j], want[j]);
    }
}

static void test_no_dropout_is_fedavg(void **state)
{
    (void)state;
    static site S[N];
    run(S, NULL, 0, 1, 0);
    for (int k = 0; k < ROUNDS; k++)
        check_round(S, 0x1f, k, 0x1f);
    for (int i = 0; i < N; i++) {
        assert_int_equal(S[i].rep[0].tries, 1);
        for (int j = 0; j < DIM; j++) /* today's sum over all sites, to fixed point */
            assert_true(fabs(S[i].total[0][j] - S[i].plain[j]) < 1e-7);
    }
}

static void test_one_dropout(void **state)
{
    (void)state;
    static site S[N];
    fault f[] = {{2, FED_FAULT_KILL, 0, "dy:"}}; /* dies after its mask key, before its input */
    run(S, f, 1, 0, 0);
    assert_int_equal(S[2].rc, FED_LOST);
    check_round(S, 0x1f & ~(1u << 2), 0, 0x1f & ~(1u << 2));
    assert_int_equal(S[0].rep[0].u1, 0x1f); /* its pair masks were in everyone's input, and recovered */
    check_round(S, 0x1f & ~(1u << 2), 1, 0x1f & ~(1u << 2));
    assert_int_equal(S[0].rep[1].u1, 0x1f & ~(1u << 2));
}

static void test_two_dropouts(void **state)
{
    (void)state;
    static site S[N];
    fault f[] = {{1, FED_FAULT_KILL, 0, "dy:"}, {3, FED_FAULT_KILL, 0, "dy:"}}; /* U2 = 3 sites: exactly t */
    run(S, f, 2, 0, 0);
    check_round(S, 0x15, 0, 0x15);
    check_round(S, 0x15, 1, 0x15);
    /* one before its mask key, one after its input but before its shares: the round counts the latter */
    fault g[] = {{1, FED_FAULT_KILL, 0, "dk:"}, {3, FED_FAULT_KILL, 0, "ds:"}};
    run(S, g, 2, 0, 0);
    assert_int_equal(S[0].rep[0].u1, 0x1d);
    check_round(S, 0x15, 0, 0x1d); /* site 3's input is in: its self-mask's shares came from 0, 2 and 4 */
    check_round(S, 0x15, 1, 0x15);
}

static void test_below_threshold_is_retried_then_lost(void **state)
{
    (void)state;
    static site S[N];
    fault f[] = {{1, FED_FAULT_KILL, 0, "dk:"}, {2, FED_FAULT_KILL, 0, "dk:"}, {3, FED_FAULT_KILL, 0, "dk:"}};
    timeout_ms = 600; /* each try waits this long for t keys */
    run(S, f, 3, 0, 0);
    timeout_ms = 4000;
    for (int i = 0; i < N; i += 4) {
        assert_int_equal(S[i].rcs[0], FED_LOST);
        assert_int_equal(S[i].rep[0].tries, 3); /* the first and two retries */
        assert_non_null(strstr(S[i].err, "below the threshold 3"));
    }
}

/* sites train at their own pace: three sites 900 ms late with their keys (more than close_ms, but before t had
 * arrived) are not dropped: the close's clock starts at the t-th arrival */
static void test_slow_sites_are_not_dropped(void **state)
{
    (void)state;
    static site S[N];
    fault f[] = {{2, FED_FAULT_DELAY, 900, "dk:"}, {3, FED_FAULT_DELAY, 900, "dk:"}, {4, FED_FAULT_DELAY, 900, "dk:"}};
    run(S, f, 3, 0, 0);
    check_round(S, 0x1f, 0, 0x1f);
    assert_int_equal(S[0].rep[0].tries, 1); /* not a retry either */
}

/* site 4's input arrives after the close: the round is the others', site 4 still gets the total and is in the
 * next round; no survivor ever reveals a share of its self-mask (its late input stays masked) */
static void test_late_input_stays_masked(void **state)
{
    (void)state;
    static site S[N];
    /* late by 400 ms past the close, and back 400 ms before the next round's close */
    fault f[] = {{4, FED_FAULT_DELAY, 1200, "dy:"}};
    close_ms = 800;
    fed_memnet *hub = run(S, f, 1, 0, 1);
    close_ms = 400;
    check_round(S, 0x1f, 0, 0x0f);
    check_round(S, 0x1f, 1, 0x1f);
    int reveals = 0;
    for (size_t q = 0; q < fed_memnet_count(hub); q++) {
        const fed_memnet_msg *m = fed_memnet_at(hub, q);
        if (strncmp(m->chan, "ds:", 3)) continue;
        unsigned char plain[N * FED_REVEAL_ENTRY + 64];
        assert_int_equal(fed_msg_open(S[0].bkey, "j_drop", 1, m->blob.data, m->blob.len, plain), N * FED_REVEAL_ENTRY);
        fed_hdr h;
        assert_int_equal(fed_hdr_parse(m->blob.data, m->blob.len, &h), 0);
        if (h.exchange != S[0].p.exchanges - 2) continue; /* the first round's (after setup and weights) */
        reveals++;
        assert_int_equal(plain[4 * FED_REVEAL_ENTRY], FED_REVEAL_PAIR); /* its mask key, not its self-mask */
        for (int j = 0; j < 4; j++)
            assert_int_equal(plain[j * FED_REVEAL_ENTRY], FED_REVEAL_SELF);
    }
    assert_int_equal(reveals, 4);
    fed_memnet_free(hub);
}

/* a garbled input drops its sender for the round with an event, not the job; a garbled share message or close
 * is passed over; a garbled mask key is a forged key and fails the job */
static void test_malformed_input_drops_its_sender(void **state)
{
    (void)state;
    static site S[N];
    fault f[] = {{2, FED_FAULT_GARBLE, 0, "dy:"}};
    run(S, f, 1, 0, 0);
    check_round(S, 0x1f, 0, 0x1b);
    assert_non_null(strstr(S[0].rep[0].events, "site 2 dropped from exchange"));
    check_round(S, 0x1f, 1, 0x1f);
    /* a garbled share message does not fail the round (the other survivors' shares suffice) */
    fault h[] = {{1, FED_FAULT_GARBLE, 0, "ds:"}};
    run(S, h, 1, 0, 0);
    check_round(S, 0x1f, 0, 0x1f); /* (a site that has t valid ones first does not read it: no event to expect) */
    /* garbled closes from four sites, there before the fifth looks: it closes the phase for all */
    fault c[] = {{0, FED_FAULT_GARBLE, 0, "dc1:"},
                 {1, FED_FAULT_GARBLE, 0, "dc1:"},
                 {2, FED_FAULT_GARBLE, 0, "dc1:"},
                 {3, FED_FAULT_GARBLE, 0, "dc1:"},
                 {4, FED_FAULT_DELAY, 300, "dk:"}}; /* 4 closes after the others */
    run(S, c, 5, 0, 0);
    check_round(S, 0x1f, 0, 0x1f);
    check_round(S, 0x1f, 1, 0x1f);
    fault g[] = {{3, FED_FAULT_GARBLE, 0, "dk:"}};
    run(S, g, 1, 0, 0);
    assert_int_equal(S[0].rcs[0], FED_TAMPERED);
    assert_non_null(strstr(S[0].err, "site 3's mask key is not authenticated"));
}

/* the dropout path's privacy audit at n = 5: Redis, single sites and pairs determine nobody's input, while its
 * control (4 = t sites together) unmasks the other input in every scenario where one was written: the late one
 * too (the audit's unmasking works, and a late input is safe only below t) */
static void test_privacy_audit(void **state)
{
    (void)state;
    int sizes[] = {5};
    fed_audit_drop_result r;
    char err[300];
    if (fed_audit_drop(sizes, 1, NULL, &r, err, sizeof err)) fail_msg("%s", err);
    assert_int_equal(r.single, 0);
    assert_int_equal(r.pairs, 0);
    assert_int_equal(r.t_sites, 3); /* nobody dropped, late, killed before its shares; not killed before its input */
    assert_int_equal(r.views, 4 * (6 + 10));
}

static void test_thresholds(void **state)
{
    (void)state;
    assert_int_equal(fed_drop_threshold_default(3), 3); /* 2 of 3: each survivor would learn the other's input */
    assert_int_equal(fed_drop_threshold_default(4), 3);
    assert_int_equal(fed_drop_threshold_check(3, 2), -1);
    assert_int_equal(fed_drop_threshold_check(5, 3), 0);
    assert_int_equal(fed_drop_threshold_default(5), 4);
    assert_int_equal(fed_drop_threshold_default(9), 6);
    assert_int_equal(fed_drop_threshold_default(2), 2);
    assert_int_equal(fed_drop_threshold_default(1), 1);
    for (int n = 1; n <= 64; n++) {
        assert_int_equal(fed_drop_threshold_check(n, fed_drop_threshold_default(n)), 0);
        assert_int_equal(fed_drop_threshold_check(n, n / 2), -1); /* half could see both shares of a site */
        assert_int_equal(fed_drop_threshold_check(n, n + 1), -1);
    }
}

/* spec.threshold: FedAvg's bounds, securedfl's every site, the field named; the effective t of a spec */
static json_t *spec_of(int n, const char *extra)
{
    char sites[512] = "", text[1024];
    for (int i = 0; i < n; i++)
        snprintf(sites + strlen(sites), sizeof sites - strlen(sites), "%s{\"name\": \"s%d\"}", i ? ", " : "", i);
    snprintf(text, sizeof text,
             "{\"program\": {\"command\": [\"/usr/bin/python3\", \"train.py\"], \"workdir\": \"/tmp\"}, \"rounds\": 2, "
             "\"sites\": [%s]%s}",
             sites, extra);
    json_error_t je;
    json_t *spec = json_loads(text, 0, &je);
    if (!spec) fail_msg("%s: %s", text, je.text);
    return spec;
}

static void expect_spec(int n, const char *extra, int t, const char *bad_part)
{
    char field[160], msg[400];
    json_t *spec = spec_of(n, extra);
    int rc = fed_spec_validate(spec, field, sizeof field, msg, sizeof msg);
    if (!bad_part) {
        if (rc) fail_msg("%s: %s", field, msg);
        assert_int_equal(fed_spec_threshold(spec), t);
    } else {
        assert_int_equal(rc, -1);
        assert_string_equal(field, "spec.threshold");
        if (!strstr(msg, bad_part)) fail_msg("'%s' lacks '%s'", msg, bad_part);
    }
    json_decref(spec);
}

static void test_spec_threshold(void **state)
{
    (void)state;
    expect_spec(5, "", 4, NULL); /* the default: ceil(2n/3) */
    expect_spec(5, ", \"threshold\": 3", 3, NULL);
    expect_spec(3, "", 3, NULL); /* 3 sites: every one */
    expect_spec(4, ", \"aggregation\": \"securedfl\"", 4, NULL);
    expect_spec(5, ", \"threshold\": 2", 0, "from 3 to 5 for 5 sites");
    expect_spec(4, ", \"threshold\": 5", 0, "from 3 to 4 for 4 sites");
    expect_spec(4, ", \"aggregation\": \"securedfl\", \"threshold\": 3", 0, "must be 4 (every site) with securedfl");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_thresholds),
        cmocka_unit_test(test_spec_threshold),
        cmocka_unit_test(test_no_dropout_is_fedavg),
        cmocka_unit_test(test_one_dropout),
        cmocka_unit_test(test_two_dropouts),
        cmocka_unit_test(test_below_threshold_is_retried_then_lost),
        cmocka_unit_test(test_slow_sites_are_not_dropped),
        cmocka_unit_test(test_late_input_stays_masked),
        cmocka_unit_test(test_malformed_input_drops_its_sender),
        cmocka_unit_test(test_privacy_audit),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
