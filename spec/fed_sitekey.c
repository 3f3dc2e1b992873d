/* fed_sitekey.c - a federated site's Ed25519 identity key: its text form, signing, verifying (fed_sitekey.h). */
#include "spec/fed_sitekey.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/rand.h>
#include <stdio.h>
#include <string.h>

#define PREFIX_LEN (sizeof FED_SITEKEY_PREFIX - 1)
#define B64_LEN 44 /* base64 of 32 bytes, with one '=' */

int fed_sitekey_parse(const char *text, unsigned char pub[FED_SITEKEY_LEN], char *why, size_t wl)
{
    static const char form[] = "must be ed25519:<base64 of 32 bytes>, as gantry-worker --print-site-key FILE prints it";
    if (!text || strncmp(text, FED_SITEKEY_PREFIX, PREFIX_LEN) != 0 || strlen(text) != PREFIX_LEN + B64_LEN ||
        text[PREFIX_LEN + B64_LEN - 1] != '=') {
        snprintf(why, wl, "%s", form);
        return -1;
    }
    const char *b = text + PREFIX_LEN;
    for (int i = 0; i < B64_LEN - 1; i++)
        if (!((b[i] >= 'A' && b[i] <= 'Z') || (b[i] >= 'a' && b[i] <= 'z') || (b[i] >= '0' && b[i] <= '9') || b[i] == '+' ||
              b[i] == '/')) {
            snprintf(why, wl, "%s (character %d is not base64)", form, (int)PREFIX_LEN + i + 1);
            return -1;
        }
    unsigned char raw[36];
    if (EVP_DecodeBlock(raw, (const unsigned char *)b, B64_LEN) != 33) { /* 33: the padding's zero byte counted */
        snprintf(why, wl, "%s", form);
        return -1;
    }
    char again[FED_SITEKEY_TEXT];
    fed_sitekey_format(raw, again); /* one text per key: the padding bits must be zero */
    if (strcmp(again, text) != 0) {
        snprintf(why, wl, "%s (not canonical base64)", form);
        return -1;
    }
    EVP_PKEY *k = EVP_PKEY_new_raw_public_key(EVP_PKEY_ED25519, NULL, raw, FED_SITEKEY_LEN);
    if (!k) {
        snprintf(why, wl, "is not an Ed25519 public key");
        return -1;
    }
    EVP_PKEY_free(k);
    memcpy(pub, raw, FED_SITEKEY_LEN);
    return 0;
}

void fed_sitekey_format(const unsigned char pub[FED_SITEKEY_LEN], char out[FED_SITEKEY_TEXT])
{
    memcpy(out, FED_SITEKEY_PREFIX, PREFIX_LEN);
    EVP_EncodeBlock((unsigned char *)out + PREFIX_LEN, pub, FED_SITEKEY_LEN); /* 44 characters and a NUL */
}

int fed_sitekey_generate(unsigned char priv[FED_SITEKEY_LEN])
{
    return RAND_bytes(priv, FED_SITEKEY_LEN) == 1 ? 0 : -1; /* an Ed25519 private key is 32 random bytes */
}

int fed_sitekey_public(const unsigned char priv[FED_SITEKEY_LEN], unsigned char pub[FED_SITEKEY_LEN])
{
    EVP_PKEY *k = EVP_PKEY_new_raw_private_key(EVP_PKEY_ED25519, NULL, priv, FED_SITEKEY_LEN);
    size_t len = FED_SITEKEY_LEN;
    int ok = k && EVP_PKEY_get_raw_public_key(k, pub, &len) == 1 && len == FED_SITEKEY_LEN;
    EVP_PKEY_free(k);
    return ok ? 0 : -1;
}

int fed_sitekey_sign(const unsigned char priv[FED_SITEKEY_LEN], const unsigned char *msg, size_t len,
                     unsigned char sig[FED_SITEKEY_SIG])
{
    EVP_PKEY *k = EVP_PKEY_new_raw_private_key(EVP_PKEY_ED25519, NULL, priv, FED_SITEKEY_LEN);
    EVP_MD_CTX *c = EVP_MD_CTX_new();
    size_t sl = FED_SITEKEY_SIG;
    int ok = k && c && EVP_DigestSignInit(c, NULL, NULL, NULL, k) == 1 && EVP_DigestSign(c, sig, &sl, msg, len) == 1 &&
             sl == FED_SITEKEY_SIG;
    EVP_MD_CTX_free(c);
    EVP_PKEY_free(k);
    return ok ? 0 : -1;
}

int fed_sitekey_verify(const unsigned char pub[FED_SITEKEY_LEN], const unsigned char *msg, size_t len,
                       const unsigned char sig[FED_SITEKEY_SIG])
{
    EVP_PKEY *k = EVP_PKEY_new_raw_public_key(EVP_PKEY_ED25519, NULL, pub, FED_SITEKEY_LEN);
    EVP_MD_CTX *c = EVP_MD_CTX_new();
    int ok =
        k && c && EVP_DigestVerifyInit(c, NULL, NULL, NULL, k) == 1 && EVP_DigestVerify(c, sig, FED_SITEKEY_SIG, msg, len) == 1;
    EVP_MD_CTX_free(c);
    EVP_PKEY_free(k);
    return ok;
}
