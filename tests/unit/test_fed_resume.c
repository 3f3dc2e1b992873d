/* test_fed_resume.c - where a restarted federated job continues (workers/fed/resume.h): the checkpoint's bytes
 * written and checked back, every reason a checkpoint is refused, the announcement's format, the agreement rule
 * (the newest round any site holds; two different copies of it, or none, start from round 1), and a model's FP32
 * bits through two 16-bit halves, exactly. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "workers/fed/resume.h"

static const char *A = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
static const char *B = "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb";

static fed_resume_have have(int round, const char *sha)
{
    fed_resume_have h = {round, ""};
    snprintf(h.sha256, sizeof h.sha256, "%s", sha);
    return h;
}

static void test_decide(void **state)
{
    (void)state;
    fed_resume_plan p;
    fed_resume_have none[3] = {have(0, "-"), have(0, "-"), have(0, "-")};
    fed_resume_decide(none, 3, 10, &p);
    assert_int_equal(p.round, 0), assert_int_equal(p.holder, -1), assert_string_equal(p.why, "");
    /* the newest round; its lowest holder; a site without a checkpoint gets it from there */
    fed_resume_have some[4] = {have(2, B), have(0, "-"), have(3, A), have(3, A)};
    fed_resume_decide(some, 4, 10, &p);
    assert_int_equal(p.round, 3), assert_int_equal(p.holder, 2), assert_string_equal(p.sha256, A);
    /* a round beyond the job's counts as none */
    fed_resume_have beyond[3] = {have(11, A), have(4, B), have(0, "-")};
    fed_resume_decide(beyond, 3, 10, &p);
    assert_int_equal(p.round, 4), assert_int_equal(p.holder, 1);
    /* every round done: the last one, whose model is the final one */
    fed_resume_have all[3] = {have(10, A), have(10, A), have(9, B)};
    fed_resume_decide(all, 3, 10, &p);
    assert_int_equal(p.round, 10), assert_int_equal(p.holder, 0);
    /* two copies of the newest round differ: from round 1, saying so */
    fed_resume_have differ[3] = {have(5, A), have(4, A), have(5, B)};
    fed_resume_decide(differ, 3, 10, &p);
    assert_int_equal(p.round, 0), assert_int_equal(p.holder, -1);
    assert_non_null(strstr(p.why, "sites 0 and 2 hold different global models for round 5"));
    assert_non_null(strstr(p.why, "starting again from round 1"));
}

static void test_announcement(void **state)
{
    (void)state;
    char text[FED_RESUME_ANNOUNCE_MAX];
    fed_resume_have h = have(7, A), back;
    fed_resume_announce(&h, text);
    assert_string_equal(text, "7 aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa");
    assert_int_equal(fed_resume_parse(text, &back), 0);
    assert_int_equal(back.round, 7), assert_string_equal(back.sha256, A);
    h = have(0, "-");
    fed_resume_announce(&h, text);
    assert_string_equal(text, "0 -");
    assert_int_equal(fed_resume_parse(text, &back), 0), assert_int_equal(back.round, 0);
    const char *bad[] = {"",       "3",
                         "3 ",     "x -",
                         "-1 -",   "0 abc",
                         "3 -",    "3 AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA",
                         "3 aaaa", "3 aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
                         "3  aaaa"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
        assert_int_equal(fed_resume_parse(bad[i], &back), -1);
    assert_int_equal(fed_resume_parse(NULL, &back), -1);
}

static void test_halves_are_exact(void **state)
{
    (void)state;
    double v[] = {0.0, -0.0, 1.0, -1.5, 1e-7, -3.4e-9, 1e-40 /* subnormal */, 65504.0, -1e6, 0.1, 3.14159265358979};
    size_t n = sizeof v / sizeof *v;
    double hi[16], lo[16], back[16];
    fed_resume_split(v, n, hi, lo);
    for (size_t i = 0; i < n; i++) {
        assert_true(hi[i] >= 0 && hi[i] <= 65535 && hi[i] == floor(hi[i]));
        assert_true(lo[i] >= 0 && lo[i] <= 65535 && lo[i] == floor(lo[i]));
        hi[i] += 1e-7, lo[i] -= 1e-7; /* what a fixed-point sum might leave: rounded away */
    }
    fed_resume_join(hi, lo, n, back);
    for (size_t i = 0; i < n; i++) {
        float f = (float)v[i], g = (float)back[i];
        assert_memory_equal(&f, &g, sizeof f);
    }
    char s1[65], s2[65];
    fed_resume_sha256(v, n, s1), fed_resume_sha256(back, n, s2);
    assert_string_equal(s1, s2);
    back[3] = nextafterf((float)back[3], 0.0f); /* one bit off: another digest */
    fed_resume_sha256(back, n, s2);
    assert_string_not_equal(s1, s2);
}

/* a layout of two tensors: w [2, 3] and b [4] */
static char wname[] = "w", bname[] = "b";
static tensorfile_tensor lt[2] = {{.name = wname, .ndim = 2, .shape = {2, 3}, .count = 6, .offset = 0},
                                  {.name = bname, .ndim = 1, .shape = {4}, .count = 4, .offset = 6}};
static const tensorfile_header layout = {.t = lt, .n = 2, .total = 10};

/* checks bytes (len) as a checkpoint of job j of rounds; the check's return, its reason in err */
static int check_bytes(const unsigned char *bytes, size_t len, const tensorfile_header *lay, const char *j, int rounds,
                       fed_resume_have *h, char *err, size_t errlen)
{
    tensorfile_header ph;
    const unsigned char *data;
    assert_int_equal(tensorfile_parse(bytes, len, 0, &ph, &data, err, errlen), 0);
    double *v = malloc(sizeof(double) * (ph.total ? ph.total : 1));
    tensorfile_values(&ph, data, v);
    int rc = fed_resume_check(&ph, v, lay, j, rounds, h, err, errlen);
    free(v);
    tensorfile_header_free(&ph);
    return rc;
}

static void test_checkpoint_round_trip_and_refusals(void **state)
{
    (void)state;
    double v[10];
    for (int i = 0; i < 10; i++)
        v[i] = (i - 4.5) / 7.0;
    size_t len;
    unsigned char *bytes = fed_resume_encode(&layout, v, "j_abc", 4, 10, &len);
    fed_resume_have h = {0, "-"};
    char err[400], sha[65];
    assert_int_equal(check_bytes(bytes, len, &layout, "j_abc", 10, &h, err, sizeof err), 0);
    fed_resume_sha256(v, 10, sha);
    assert_int_equal(h.round, 4), assert_string_equal(h.sha256, sha);
    /* another job, other rounds, another model */
    assert_int_equal(check_bytes(bytes, len, &layout, "j_other", 10, &h, err, sizeof err), -1);
    assert_string_equal(err, "it belongs to job j_abc");
    assert_int_equal(check_bytes(bytes, len, &layout, "j_abc", 12, &h, err, sizeof err), -1);
    assert_string_equal(err, "its round (4 of 10) is not one of the job's 12");
    assert_int_equal(check_bytes(bytes, len, &layout, "j_abc", 3, &h, err, sizeof err), -1); /* round 4 of a 3-round job */
    tensorfile_tensor other[2] = {lt[0], lt[1]};
    other[1].shape[0] = 5, other[1].count = 5;
    tensorfile_header lay2 = {.t = other, .n = 2, .total = 11};
    assert_int_equal(check_bytes(bytes, len, &lay2, "j_abc", 10, &h, err, sizeof err), -1);
    assert_non_null(strstr(err, "it is not this model: "));
    /* a value changed on disk */
    bytes[len - 1] ^= 0x40;
    assert_int_equal(check_bytes(bytes, len, &layout, "j_abc", 10, &h, err, sizeof err), -1);
    assert_string_equal(err, "its values do not match its sha256 (damaged?)");
    free(bytes);
    /* a safetensors file that is not gantry's checkpoint */
    json_t *meta = json_pack("{s:s}", "round", "4");
    bytes = tensorfile_write(&layout, meta, v, &len);
    json_decref(meta);
    assert_int_equal(check_bytes(bytes, len, &layout, "j_abc", 10, &h, err, sizeof err), -1);
    assert_string_equal(err, "not a gantry checkpoint (__metadata__.gantry is missing, not fed-checkpoint-1)");
    free(bytes);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_decide),
        cmocka_unit_test(test_announcement),
        cmocka_unit_test(test_halves_are_exact),
        cmocka_unit_test(test_checkpoint_round_trip_and_refusals),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
