/* log_entry.c - the log stream's entries (log_entry.h). */
#include "wire/log_entry.h"

#include <stdbool.h>
#include <stdio.h>
#include <string.h>

int log_entry_encode(const log_entry *e, log_entry_nums *nums, const char *argv[LOG_ENTRY_ARGC], size_t lens[LOG_ENTRY_ARGC])
{
    if (e->rank < 0 || e->rank > LOG_ENTRY_NUM_MAX || e->gen < 0 || e->gen > LOG_ENTRY_NUM_MAX || !e->text == !e->end) return -1;
    snprintf(nums->rank, sizeof(nums->rank), "%ld", e->rank);
    snprintf(nums->gen, sizeof(nums->gen), "%ld", e->gen);
    argv[0] = "r", lens[0] = 1;
    argv[1] = nums->rank, lens[1] = strlen(nums->rank);
    argv[2] = "g", lens[2] = 1;
    argv[3] = nums->gen, lens[3] = strlen(nums->gen);
    if (e->text)
        argv[4] = "t", lens[4] = 1, argv[5] = e->text, lens[5] = e->text_len;
    else
        argv[4] = "end", lens[4] = 3, argv[5] = e->end, lens[5] = e->end_len;
    return 0;
}

static bool is(const char *s, size_t n, const char *name)
{
    return n == strlen(name) && memcmp(s, name, n) == 0;
}

/* a decimal from 0 to LOG_ENTRY_NUM_MAX, no sign, no leading zero: the value, or -1 */
static long number(const char *s, size_t n)
{
    if (n == 0 || n > 9 || (n > 1 && s[0] == '0')) return -1;
    long v = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9') return -1;
        v = v * 10 + (s[i] - '0');
    }
    return v;
}

int log_entry_decode(size_t n, const char *const *v, const size_t *lens, log_entry *out)
{
    memset(out, 0, sizeof(*out));
    out->rank = out->gen = -1;
    if (n % 2 || n > LOG_ENTRY_MAX_FIELDS) return -1;
    bool seen_r = false, seen_g = false;
    for (size_t i = 0; i < n; i += 2) {
        const char *k = v[i], *val = v[i + 1];
        size_t kn = lens[i], vn = lens[i + 1];
        if (!k || !val) return -1;
        if (is(k, kn, "r")) {
            if (seen_r || (out->rank = number(val, vn)) < 0) return -1;
            seen_r = true;
        } else if (is(k, kn, "g")) {
            if (seen_g || (out->gen = number(val, vn)) < 0) return -1;
            seen_g = true;
        } else if (is(k, kn, "t")) {
            if (out->text) return -1;
            out->text = val, out->text_len = vn;
        } else if (is(k, kn, "end")) {
            if (out->end) return -1;
            out->end = val, out->end_len = vn;
        }
    }
    return seen_r && seen_g && !out->text != !out->end ? 0 : -1;
}
