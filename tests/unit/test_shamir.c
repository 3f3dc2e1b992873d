/* test_shamir.c - Shamir's secret sharing over GF(2^8) (workers/fed/shamir.h): the field's laws, any t of n
 * shares give the secret back, and t - 1 shares are uniform whatever the secret. */
#include "workers/fed/shamir.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

static uint64_t rng = 88172645463325252ull;
static unsigned char rbyte(void)
{
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return (unsigned char)(rng >> 24);
}

static void test_field(void **state)
{
    (void)state;
    for (int a = 0; a < 256; a++) {
        assert_int_equal(fed_gf_mul((unsigned char)a, 1), a);
        assert_int_equal(fed_gf_mul((unsigned char)a, 0), 0);
        if (a) assert_int_equal(fed_gf_mul((unsigned char)a, fed_gf_inv((unsigned char)a)), 1);
        for (int b = 0; b < 256; b += 7) {
            assert_int_equal(fed_gf_mul((unsigned char)a, (unsigned char)b), fed_gf_mul((unsigned char)b, (unsigned char)a));
            unsigned char c = rbyte(); /* distributive over xor */
            assert_int_equal(fed_gf_mul((unsigned char)a, (unsigned char)(b ^ c)),
                             fed_gf_mul((unsigned char)a, (unsigned char)b) ^ fed_gf_mul((unsigned char)a, c));
        }
    }
    assert_int_equal(fed_gf_mul(0x57, 0x83), 0xc1); /* FIPS-197's example */
}

/* every subset of at least t of the n shares gives the secret; t - 1 do not (for a random secret of 32 bytes) */
static void test_any_t_of_n(void **state)
{
    (void)state;
    enum { LEN = 32 };
    for (int n = 1; n <= 9; n++)
        for (int t = 1; t <= n; t++) {
            unsigned char secret[LEN], coef[8 * LEN], shares[9 * LEN], back[LEN];
            for (int i = 0; i < LEN; i++)
                secret[i] = rbyte();
            for (int i = 0; i < (t - 1) * LEN; i++)
                coef[i] = rbyte();
            assert_int_equal(fed_shamir_split(secret, LEN, n, t, coef, shares), 0);
            for (unsigned mask = 1; mask < (1u << n); mask++) {
                int xs[9], k = 0;
                const unsigned char *parts[9];
                for (int i = 0; i < n; i++)
                    if (mask >> i & 1) xs[k] = i + 1, parts[k++] = shares + i * LEN;
                assert_int_equal(fed_shamir_combine(xs, parts, k, LEN, back), 0);
                if (k >= t)
                    assert_memory_equal(back, secret, LEN);
                else if (k == t - 1) /* 2^-256 to be equal by chance */
                    assert_memory_not_equal(back, secret, LEN);
            }
        }
}

/* t - 1 shares say nothing: for t = 3, any two holders' shares of one byte take every pair of values exactly
 * once as the coefficients run over all 65536 choices, whatever the secret */
static void test_fewer_than_t_are_uniform(void **state)
{
    (void)state;
    static unsigned short seen[256 * 256];
    for (int secret = 0; secret < 256; secret += 51) {
        memset(seen, 0, sizeof seen);
        for (int c = 0; c < 65536; c++) {
            unsigned char s = (unsigned char)secret, coef[2] = {(unsigned char)(c & 0xff), (unsigned char)(c >> 8)}, sh[5];
            assert_int_equal(fed_shamir_split(&s, 1, 5, 3, coef, sh), 0);
            seen[sh[1] << 8 | sh[4]]++; /* holders 2 and 5 */
        }
        for (int v = 0; v < 65536; v++)
            assert_int_equal(seen[v], 1);
    }
}

static void test_bad_arguments(void **state)
{
    (void)state;
    unsigned char s[4] = {1, 2, 3, 4}, coef[4] = {0}, sh[16], back[4];
    assert_int_equal(fed_shamir_split(s, 4, 3, 4, coef, sh), -1); /* t > n */
    assert_int_equal(fed_shamir_split(s, 4, 3, 0, coef, sh), -1);
    assert_int_equal(fed_shamir_split(s, 4, 256, 2, coef, sh), -1);
    int xs[2] = {1, 1};
    const unsigned char *parts[2] = {sh, sh};
    assert_int_equal(fed_shamir_combine(xs, parts, 2, 4, back), -1); /* a repeated x */
    xs[1] = 0;
    assert_int_equal(fed_shamir_combine(xs, parts, 2, 4, back), -1); /* x = 0 is the secret itself */
    assert_int_equal(fed_shamir_combine(xs, parts, 0, 4, back), -1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_field),
        cmocka_unit_test(test_any_t_of_n),
        cmocka_unit_test(test_fewer_than_t_are_uniform),
        cmocka_unit_test(test_bad_arguments),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
