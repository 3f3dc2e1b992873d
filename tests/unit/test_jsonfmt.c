/* jsonfmt: reals in the JSON the server sends are printed in their shortest round-trip form. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/jsonfmt.h"

/* jansson's text for one real, then shortened */
static char *dump_real(double d)
{
    json_t *a = json_pack("[f]", d);
    char *s = jsonfmt_dumps(a, JSON_COMPACT);
    json_decref(a);
    return s;
}

static void expect_real(double d, const char *want)
{
    char *s = dump_real(d), expected[128];
    snprintf(expected, sizeof(expected), "[%s]", want);
    assert_string_equal(s, expected);
    free(s);
}

static int same_bits(double a, double b)
{
    return memcmp(&a, &b, sizeof(a)) == 0;
}

static void test_shortest_forms(void **state)
{
    (void)state;
    expect_real(0.8854, "0.8854");
    expect_real(0.1, "0.1");
    expect_real(0.1 + 0.2, "0.30000000000000004"); /* 17 digits when it takes 17 */
    expect_real(1e-7, "1e-7");                     /* jansson writes exponents without "+" and leading zeros */
    expect_real(1.0, "1.0");                       /* a real stays a real */
    expect_real(-0.0, "-0.0");
    expect_real(0.0, "0.0");
    expect_real(100.0, "100.0"); /* plain stays plain: not "1e+02" */
    expect_real(123456.7, "123456.7");
    expect_real(1e16, "10000000000000000.0"); /* "%.17g" writes it plain */
    expect_real(1e17, "1e17");
    expect_real(5e-324, "5e-324");
    expect_real(1.7976931348623157e308, "1.7976931348623157e308");
    expect_real(-2.5e-5, "-2.5e-5");
    expect_real(0.0001, "0.0001");
}

static void test_text_outside_reals_untouched(void **state)
{
    (void)state;
    char s[] = "{\"a\":\"0.88539999999999996\",\"b\\\"0.10000000000000001\":0.10000000000000001,\"i\":123,\"n\":-45,"
               "\"big\":12345678901234567890,\"t\":true,\"z\":null,\"e\":[\"\\\\\",0.88539999999999996]}";
    size_t n = jsonfmt_shorten(s);
    assert_string_equal(s, "{\"a\":\"0.88539999999999996\",\"b\\\"0.10000000000000001\":0.1,\"i\":123,\"n\":-45,"
                           "\"big\":12345678901234567890,\"t\":true,\"z\":null,\"e\":[\"\\\\\",0.8854]}");
    assert_int_equal(n, strlen(s));
}

static void test_never_longer(void **state)
{
    (void)state;
    /* forms jansson does not write are kept when their %g form would be longer */
    char s[] = "[1e2,1.5e0,1E-7,2.50,1.0000000000000000e-7, 7,-]";
    jsonfmt_shorten(s);
    assert_string_equal(s, "[1e2,1.5e0,1e-7,2.5,1e-7, 7,-]"); /* as long: jansson's spelling */
    char t[] = "";
    assert_int_equal(jsonfmt_shorten(t), 0);
}

static void test_indented_and_nested(void **state)
{
    (void)state;
    json_t *o = json_pack("{s:f, s:[f, f], s:{s:f}}", "loss", 0.48231000000000002, "acc", 0.8854, 0.9131, "m", "p99_ms", 12.3);
    char *s = jsonfmt_dumps(o, JSON_INDENT(2) | JSON_SORT_KEYS);
    assert_non_null(strstr(s, "\"loss\": 0.48231"));
    assert_non_null(strstr(s, "0.8854,"));
    assert_non_null(strstr(s, "0.9131\n"));
    assert_non_null(strstr(s, "\"p99_ms\": 12.3\n"));
    json_t *back = json_loads(s, 0, NULL);
    assert_true(json_equal(back, o)); /* the same values */
    json_decref(back);
    json_decref(o);
    free(s);
}

static uint64_t rng = 0x9e3779b97f4a7c15ull;

static uint64_t next(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

/* random bit patterns (every exponent, subnormals, both signs) and random values in [0,1):
 * the shortened text parses back to the same bits, is a real, and has no fewer-digit form */
static void test_random_round_trip(void **state)
{
    (void)state;
    for (int i = 0; i < 200000; i++) {
        double d;
        if (i % 2) {
            uint64_t bits = next();
            memcpy(&d, &bits, sizeof(d));
            if (!isfinite(d)) continue;
        } else {
            d = (double)(next() >> 11) / 9007199254740992.0;
        }
        char *s = dump_real(d);
        assert_non_null(s);
        size_t len = strlen(s);
        assert_true(len > 2 && s[0] == '[' && s[len - 1] == ']');
        json_t *a = json_loads(s, 0, NULL);
        assert_non_null(a);
        json_t *v = json_array_get(a, 0);
        assert_true(json_is_real(v));
        if (!same_bits(json_real_value(v), d)) fail_msg("%.17g came back as %s", d, s);
        char *end;
        assert_true(same_bits(strtod(s + 1, &end), d));
        assert_ptr_equal(end, s + len - 1);
        /* shortest: one significant digit fewer, in the same notation, does not read back (plain
         * 31722300588172752.0 needs 17 digits though 3.172230058817275e16 has 16: %.17g wrote it plain) */
        char mant[64];
        int digits = 0;
        for (const char *p = s + 1; *p && *p != 'e' && *p != ']'; p++) {
            if (*p < '0' || *p > '9') continue;
            if (*p == '0' && digits == 0) continue; /* leading zeros */
            mant[digits++] = *p;
        }
        while (digits > 0 && mant[digits - 1] == '0') /* trailing zeros ("100.0") */
            digits--;
        if (digits > 1) {
            char shorter[400];
            snprintf(shorter, sizeof(shorter), "%.*g", digits - 1, d);
            int same_notation = (strchr(shorter, 'e') != NULL) == (strchr(s, 'e') != NULL);
            if (same_notation && same_bits(strtod(shorter, NULL), d)) fail_msg("%s is shorter than %s", shorter, s);
        }
        json_decref(a);
        free(s);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_shortest_forms),    cmocka_unit_test(test_text_outside_reals_untouched),
        cmocka_unit_test(test_never_longer),      cmocka_unit_test(test_indented_and_nested),
        cmocka_unit_test(test_random_round_trip),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
