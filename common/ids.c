/* ids.c - random ids and secrets from OpenSSL's CSPRNG (ids.h). */
#include "common/ids.h"
#include "common/clock.h"

#include <openssl/rand.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
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

int id_sortable(const char *prefix, size_t nbytes, char *out, size_t outlen)
{
    char rnd[136]; /* "_" + up to 64 random bytes in hex */
    if (id_random("", nbytes, rnd, sizeof(rnd)) != 0) return -1;
    int n = snprintf(out, outlen, "%s_%012llx%s", prefix, (unsigned long long)clock_now_ms() & 0xffffffffffffULL, rnd + 1);
    return n >= 0 && (size_t)n < outlen ? 0 : -1;
}

int id_sequential(const char *prefix, char *out, size_t outlen)
{
    static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
    static uint64_t last_ms, last_low;
    static bool started;
    unsigned char step[2];
    if (RAND_bytes(step, sizeof(step)) != 1) return -1;
    uint64_t now = (uint64_t)clock_now_ms() & 0xffffffffffffULL, inc = 1 + ((uint64_t)step[0] << 8 | step[1]);
    pthread_mutex_lock(&lock);
    uint64_t ms = now, low;
    if (!started || now > last_ms) {
        unsigned char r[4];
        if (RAND_bytes(r, sizeof(r)) != 1) {
            pthread_mutex_unlock(&lock);
            return -1;
        }
        low = ((uint64_t)r[0] << 24 | (uint64_t)r[1] << 16 | (uint64_t)r[2] << 8 | r[3]) >> 1; /* room to step up */
    } else if (last_low + inc <= 0xffffffffULL) { /* the same ms (or the clock went back): above the last one */
        ms = last_ms;
        low = last_low + inc;
    } else { /* this ms is used up: the next one */
        ms = last_ms + 1;
        low = inc;
    }
    last_ms = ms, last_low = low, started = true;
    pthread_mutex_unlock(&lock);
    int n = snprintf(out, outlen, "%s_%012llx%08llx", prefix, (unsigned long long)ms, (unsigned long long)low);
    return n >= 0 && (size_t)n < outlen ? 0 : -1;
}
