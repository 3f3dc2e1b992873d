/* clock.c - the clocks: wall-clock and monotonic milliseconds, ISO 8601 in UTC, durations (clock.h). */
#include "common/clock.h"

#include <math.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

int64_t clock_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int64_t clock_mono_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

void clock_iso8601(int64_t ms, char *buf, size_t len)
{
    int64_t frac = ms % 1000;
    if (frac < 0) frac += 1000; /* floor division: -1 ms is 23:59:59.999 the day before */
    time_t s = (time_t)((ms - frac) / 1000);
    struct tm tm;
    gmtime_r(&s, &tm);
    snprintf(buf, len, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min,
             tm.tm_sec, (int)frac);
}

int clock_parse_iso8601(const char *s, int64_t *ms)
{
    struct tm tm = {0};
    int used = 0, frac_at = 0, frac_end = 0;
    if (!s ||
        sscanf(s, "%4d-%2d-%2dT%2d:%2d:%2d%n", &tm.tm_year, &tm.tm_mon, &tm.tm_mday, &tm.tm_hour, &tm.tm_min, &tm.tm_sec, &used) !=
            6 ||
        used != 19)
        return -1;
    int64_t frac = 0;
    if (s[used] == '.') {
        frac_at = used + 1;
        for (frac_end = frac_at; s[frac_end] >= '0' && s[frac_end] <= '9'; frac_end++)
            if (frac_end - frac_at < 3) frac = frac * 10 + (s[frac_end] - '0');
        if (frac_end == frac_at) return -1;
        for (int k = frac_end - frac_at; k < 3; k++) /* ".5" is 500 ms */
            frac *= 10;
        used = frac_end;
    }
    if (strcmp(s + used, "Z") != 0 || tm.tm_mon < 1 || tm.tm_mon > 12 || tm.tm_mday < 1 || tm.tm_mday > 31 || tm.tm_hour > 23 ||
        tm.tm_min > 59 || tm.tm_sec > 60)
        return -1;
    tm.tm_year -= 1900, tm.tm_mon -= 1;
    *ms = (int64_t)timegm(&tm) * 1000 + frac;
    return 0;
}

void clock_duration(double ms, char *buf, size_t len)
{
    if (!(ms >= 0)) ms = 0; /* NaN too */
    if (ms < 9.95) {
        snprintf(buf, len, "%.1fms", ms);
    } else if (ms < 999.5) {
        snprintf(buf, len, "%.0fms", ms);
    } else if (ms < 59950) {
        snprintf(buf, len, "%.1fs", ms / 1000);
    } else if (ms < 3599.5e3) {
        long long s = llround(ms / 1000);
        snprintf(buf, len, "%lldm%02llds", s / 60, s % 60);
    } else if (ms < 86370e3) {
        long long m = llround(ms / 60e3);
        snprintf(buf, len, "%lldh%02lldm", m / 60, m % 60);
    } else {
        long long h = ms < 1e18 ? llround(ms / 3600e3) : 277777777777LL; /* about 31,700 years: enough */
        snprintf(buf, len, "%lldd%02lldh", h / 24, h % 24);
    }
}
