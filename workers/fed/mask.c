/* mask.c - pairwise masks (mask.h). */
#include "workers/fed/mask.h"

#include <math.h>
#include <openssl/evp.h>
#include <openssl/sha.h>
#include <stdlib.h>
#include <string.h>

int fed_keypair(unsigned char pub[32], unsigned char priv[32])
{
    EVP_PKEY *k = EVP_PKEY_Q_keygen(NULL, NULL, "X25519");
    size_t pl = 32, sl = 32;
    int ok = k && EVP_PKEY_get_raw_public_key(k, pub, &pl) == 1 && EVP_PKEY_get_raw_private_key(k, priv, &sl) == 1 && pl == 32 &&
             sl == 32;
    EVP_PKEY_free(k);
    return ok ? 0 : -1;
}

int fed_shared_key(const unsigned char priv[32], const unsigned char pub[32], const unsigned char peer_pub[32],
                   unsigned char key[32])
{
    EVP_PKEY *me = EVP_PKEY_new_raw_private_key(EVP_PKEY_X25519, NULL, priv, 32);
    EVP_PKEY *peer = EVP_PKEY_new_raw_public_key(EVP_PKEY_X25519, NULL, peer_pub, 32);
    EVP_PKEY_CTX *ctx = me ? EVP_PKEY_CTX_new(me, NULL) : NULL;
    unsigned char secret[32];
    size_t sl = sizeof secret;
    int ok = ctx && peer && EVP_PKEY_derive_init(ctx) == 1 && EVP_PKEY_derive_set_peer(ctx, peer) == 1 &&
             EVP_PKEY_derive(ctx, secret, &sl) == 1 && sl == 32;
    if (ok) { /* both sides hash the same bytes: the secret, then the two public keys in order */
        const unsigned char *lo = memcmp(pub, peer_pub, 32) < 0 ? pub : peer_pub, *hi = lo == pub ? peer_pub : pub;
        unsigned char buf[96];
        memcpy(buf, secret, 32), memcpy(buf + 32, lo, 32), memcpy(buf + 64, hi, 32);
        SHA256(buf, sizeof buf, key);
    }
    EVP_PKEY_CTX_free(ctx);
    EVP_PKEY_free(me), EVP_PKEY_free(peer);
    return ok ? 0 : -1;
}

void fed_encode(const double *v, uint64_t *out, size_t dim)
{
    for (size_t j = 0; j < dim; j++)
        out[j] = (uint64_t)(int64_t)llround(v[j] * 4294967296.0);
}

double fed_decode(uint64_t v)
{
    return (double)(int64_t)v / 4294967296.0;
}

int fed_mask(uint64_t *msg, size_t dim, const unsigned char key[32], int sign, uint64_t round, uint64_t iter)
{
    /* ChaCha20 (OpenSSL's IV: a 32-bit block counter, then a 96-bit nonce) */
    unsigned char iv[16] = {0};
    memcpy(iv + 4, &round, 8), memcpy(iv + 12, &iter, 4);
    EVP_CIPHER_CTX *c = EVP_CIPHER_CTX_new();
    int ok = c && EVP_EncryptInit_ex(c, EVP_chacha20(), NULL, key, iv) == 1;
    uint64_t block[512];
    static const uint64_t zeros[512];
    for (size_t off = 0; ok && off < dim; off += 512) {
        size_t n = dim - off < 512 ? dim - off : 512;
        int len = 0;
        ok = EVP_EncryptUpdate(c, (unsigned char *)block, &len, (const unsigned char *)zeros, (int)(n * 8)) == 1 &&
             len == (int)(n * 8);
        for (size_t j = 0; ok && j < n; j++)
            msg[off + j] += sign > 0 ? block[j] : (uint64_t)0 - block[j];
    }
    EVP_CIPHER_CTX_free(c);
    return ok ? 0 : -1;
}
