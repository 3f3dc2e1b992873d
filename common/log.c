/* log.c - the log line on stderr and the component name set at start (log.h). */
#include "common/log.h"
#include "common/clock.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static char component[32] = "gantry";
static int min_level = LOG_INFO;
static const char *names[] = {"debug", "info", "warn", "error"};

void log_init(const char *name)
{
    snprintf(component, sizeof(component), "%s", name);
}

void log_set_level(int level)
{
    min_level = level;
}

void glog(int level, const char *fmt, ...)
{
    if (level < min_level) return;
    char ts[32], line[2048];
    clock_iso8601(clock_now_ms(), ts, sizeof(ts));
    int n = snprintf(line, sizeof(line), "%s %s %s ", ts, component, names[level]);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line + n, sizeof(line) - (size_t)n, fmt, ap);
    va_end(ap);
    /* one write per line so concurrent processes sharing stderr do not interleave */
    size_t len = strnlen(line, sizeof(line) - 2);
    line[len++] = '\n';
    fwrite(line, 1, len, stderr);
}
