/* fed_sitekey.h - a federated site's identity key (Ed25519, OpenSSL libcrypto): the one text form of its
 * public key, "ed25519:<base64 of the 32 bytes>" (what gantry-worker --print-site-key prints and a spec's
 * sites[i].public_key holds), parsed and checked here and nowhere else; signing and verifying.  Pure: no
 * files (the worker reads and writes its key file: workers/site_key.h).  docs/federated.md, "Protocol". */
#ifndef GANTRY_FED_SITEKEY_H
#define GANTRY_FED_SITEKEY_H

#include <stddef.h>

#define FED_SITEKEY_LEN 32  /* a raw private or public key */
#define FED_SITEKEY_SIG 64  /* a signature */
#define FED_SITEKEY_TEXT 56 /* the text form's buffer: "ed25519:" + 44 base64 characters + NUL */
#define FED_SITEKEY_PREFIX "ed25519:"

/* a public key's text form into pub; 0, or -1 with why (a sentence, for a message naming the field) */
int fed_sitekey_parse(const char *text, unsigned char pub[FED_SITEKEY_LEN], char *why, size_t wl);
/* pub's text form into out */
void fed_sitekey_format(const unsigned char pub[FED_SITEKEY_LEN], char out[FED_SITEKEY_TEXT]);
/* a new private key (random); 0, or -1 */
int fed_sitekey_generate(unsigned char priv[FED_SITEKEY_LEN]);
/* the public key of priv; 0, or -1 */
int fed_sitekey_public(const unsigned char priv[FED_SITEKEY_LEN], unsigned char pub[FED_SITEKEY_LEN]);
/* Ed25519 signature of msg; 0, or -1 */
int fed_sitekey_sign(const unsigned char priv[FED_SITEKEY_LEN], const unsigned char *msg, size_t len,
                     unsigned char sig[FED_SITEKEY_SIG]);
/* 1 when sig is pub's signature of msg, else 0 */
int fed_sitekey_verify(const unsigned char pub[FED_SITEKEY_LEN], const unsigned char *msg, size_t len,
                       const unsigned char sig[FED_SITEKEY_SIG]);

#endif
