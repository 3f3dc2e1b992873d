/* clock.h - wall-clock milliseconds and ISO 8601 formatting (UTC, ms). */
#ifndef GANTRY_CLOCK_H
#define GANTRY_CLOCK_H

#include <stddef.h>
#include <stdint.h>

int64_t clock_now_ms(void);
/* monotonic, for durations and deadlines */
int64_t clock_mono_us(void);
/* "2026-11-22T07:12:00.123Z"; buf needs 25 bytes */
void clock_iso8601(int64_t ms, char *buf, size_t len);

#endif
