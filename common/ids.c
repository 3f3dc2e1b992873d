#include "common/ids.h"

#include <openssl/rand.h>
#include <stdio.h>

int id_random(const char *prefix, size_t nbytes, char *out, size_t outlen)
{
    unsigned char raw[64];
    if (nbytes > sizeof(raw) || RAND_bytes(raw, (int)nbytes) != 1) return -1;
    int n = snprintf(out, outlen, "%s_", prefix);
    if (n < 0 || (size_t)n + 2 * nbytes + 1 > outlen) return -1;
    static const char hex[] = "0123456789abcdef";
    for (size_t i = 0; i < nbytes; i++) {
        out[n + 2 * i] = hex[raw[i] >> 4];
        out[n + 2 * i + 1] = hex[raw[i] & 15];
    }
    out[n + 2 * nbytes] = '\0';
    return 0;
}
