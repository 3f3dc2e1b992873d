/* ids.h - random identifiers and secrets from OpenSSL's CSPRNG.
 * Ids look like "<prefix>_<hex>": j_ (job), t_ (tenant), k_ (token), e_ (event), w_ (worker). */
#ifndef GANTRY_IDS_H
#define GANTRY_IDS_H

#include <stddef.h>

/* writes prefix + '_' + 2*nbytes hex chars; returns 0 or -1 when the RNG fails */
int id_random(const char *prefix, size_t nbytes, char *out, size_t outlen);

#endif
