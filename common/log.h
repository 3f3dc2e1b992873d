/* log.h - one line per event on stderr: "<iso time> <component> <level> message".
 * Owns nothing but the component name set once at start. */
#ifndef GANTRY_LOG_H
#define GANTRY_LOG_H

enum { LOG_DEBUG, LOG_INFO, LOG_WARN, LOG_ERROR };

void log_init(const char *component);
void log_set_level(int level);
void glog(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#define log_info(...) glog(LOG_INFO, __VA_ARGS__)
#define log_warn(...) glog(LOG_WARN, __VA_ARGS__)
#define log_error(...) glog(LOG_ERROR, __VA_ARGS__)
#define log_debug(...) glog(LOG_DEBUG, __VA_ARGS__)

#endif
