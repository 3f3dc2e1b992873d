/* shamir.c - Shamir's secret sharing over GF(2^8) (shamir.h). */
#include "workers/fed/shamir.h"

unsigned char fed_gf_mul(unsigned char a, unsigned char b)
{
    unsigned char p = 0;
    for (int i = 0; i < 8; i++) {
        if (b & 1) p ^= a;
        unsigned char hi = a & 0x80;
        a = (unsigned char)(a << 1);
        if (hi) a ^= 0x1b;
        b >>= 1;
    }
    return p;
}

unsigned char fed_gf_inv(unsigned char a)
{
    /* a^254 = a^-1 in the multiplicative group of order 255 (and 0 for 0) */
    unsigned char r = 1, x = a;
    for (int e = 254; e; e >>= 1) {
        if (e & 1) r = fed_gf_mul(r, x);
        x = fed_gf_mul(x, x);
    }
    return r;
}

int fed_shamir_split(const unsigned char *secret, size_t len, int n, int t, const unsigned char *coef, unsigned char *shares)
{
    if (t < 1 || t > n || n > FED_SHAMIR_MAX) return -1;
    for (int i = 0; i < n; i++) {
        unsigned char x = (unsigned char)(i + 1);
        for (size_t b = 0; b < len; b++) { /* Horner: ((c_{t-1} x + c_{t-2}) x + ...) x + secret */
            unsigned char y = 0;
            for (int k = t - 2; k >= 0; k--)
                y = fed_gf_mul(y, x) ^ coef[(size_t)k * len + b];
            shares[(size_t)i * len + b] = fed_gf_mul(y, x) ^ secret[b];
        }
    }
    return 0;
}

int fed_shamir_combine(const int *xs, const unsigned char *const *shares, int k, size_t len, unsigned char *secret)
{
    if (k < 1 || k > FED_SHAMIR_MAX) return -1;
    unsigned char lambda[FED_SHAMIR_MAX];
    for (int q = 0; q < k; q++) {
        if (xs[q] < 1 || xs[q] > FED_SHAMIR_MAX) return -1;
        /* the Lagrange basis at 0: prod_{r != q} x_r / (x_r - x_q); subtraction is xor */
        unsigned char num = 1, den = 1;
        for (int r = 0; r < k; r++) {
            if (r == q) continue;
            if (xs[r] == xs[q]) return -1;
            num = fed_gf_mul(num, (unsigned char)xs[r]);
            den = fed_gf_mul(den, (unsigned char)(xs[r] ^ xs[q]));
        }
        lambda[q] = fed_gf_mul(num, fed_gf_inv(den));
    }
    for (size_t b = 0; b < len; b++) {
        unsigned char s = 0;
        for (int q = 0; q < k; q++)
            s ^= fed_gf_mul(lambda[q], shares[q][b]);
        secret[b] = s;
    }
    return 0;
}
