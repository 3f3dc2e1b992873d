/* clock.h - wall-clock milliseconds, ISO 8601 formatting and parsing (UTC, ms), durations for people. */
#ifndef GANTRY_CLOCK_H
#define GANTRY_CLOCK_H

#include <stddef.h>
#include <stdint.h>

int64_t clock_now_ms(void);
/* monotonic, for durations and deadlines */
int64_t clock_mono_us(void);
/* "2026-11-22T07:12:00.123Z"; buf needs 25 bytes */
void clock_iso8601(int64_t ms, char *buf, size_t len);
/* clock_iso8601's text (the fraction optional) back to milliseconds: 0, or -1 when s is not one */
int clock_parse_iso8601(const char *s, int64_t *ms);
/* a duration for people: "0.4ms", "850ms", "12.3s", "1m48s", "2h03m", "3d04h" (each rounded to its last unit);
 * a negative or NaN duration is "0.0ms"; buf needs 24 bytes */
void clock_duration(double ms, char *buf, size_t len);

#endif
