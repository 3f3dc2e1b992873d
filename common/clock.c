/* clock.c - the clocks: wall-clock and monotonic milliseconds, ISO 8601 in UTC (clock.h). */
#include "common/clock.h"

#include <stdio.h>
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
