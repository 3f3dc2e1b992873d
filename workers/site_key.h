/* site_key.h - the worker's federated identity key file (--site-key FILE): an Ed25519 private key in PEM
 * (PKCS#8, what `openssl genpkey -algorithm ed25519` writes), read only from a regular file others cannot
 * read, and made (--make-site-key FILE) as a new file of mode 0600.  The key's use and its public text form
 * are spec/fed_sitekey.h's; docs/operations.md, "Site identity keys". */
#ifndef GANTRY_SITE_KEY_H
#define GANTRY_SITE_KEY_H

#include "spec/fed_sitekey.h"

#include <stddef.h>

/* the raw private key in FILE into priv; 0, or -1 with why */
int site_key_load(const char *path, unsigned char priv[FED_SITEKEY_LEN], char *why, size_t wl);
/* a new key written to path (which must not exist), mode 0600, into priv; 0, or -1 with why */
int site_key_make(const char *path, unsigned char priv[FED_SITEKEY_LEN], char *why, size_t wl);

#endif
