/* config.h - daemon settings from a config file and command-line flags.
 *
 * Each daemon declares a table of options (name, help, default).  Values come, in
 * increasing precedence, from the default, the file named by --config (lines
 * "name = value", '#' comments), and flags "--name value" or "--name=value".
 * Values stay strings; callers convert them. */
#ifndef GANTRY_CONFIG_H
#define GANTRY_CONFIG_H

#include <stddef.h>

typedef struct {
    const char *name;
    const char *help;
    const char *value; /* default on input; final value after config_parse */
    char *owned;       /* private: the copy `value` points to when it came from a file */
} config_opt;

/* a table row: CONFIG_OPT("listen", "HTTP address host:port", "127.0.0.1:8080") */
#define CONFIG_OPT(name, help, def)                                                                                                \
    {                                                                                                                              \
        (name), (help), (def), NULL                                                                                                \
    }

/* returns 0 to run, 1 when --help was printed, -1 on an error (printed) */
int config_parse(int argc, char **argv, config_opt *opts, size_t n, const char *program, const char *about);
const char *config_get(const config_opt *opts, size_t n, const char *name);
/* frees the copies made while reading a config file */
void config_free(config_opt *opts, size_t n);

#endif
