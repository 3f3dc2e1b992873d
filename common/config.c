/* config.c - daemon settings: the option table read from a config file, then the command line (config.h). */
#include "common/config.h"
#include "common/alloc.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static config_opt *find(config_opt *opts, size_t n, const char *name, size_t len)
{
    for (size_t i = 0; i < n; i++)
        if (strlen(opts[i].name) == len && strncmp(opts[i].name, name, len) == 0) return &opts[i];
    return NULL;
}

static void set_owned(config_opt *o, char *copy)
{
    free(o->owned);
    o->owned = copy;
    o->value = copy;
}

static void set_borrowed(config_opt *o, const char *value)
{
    free(o->owned);
    o->owned = NULL;
    o->value = value;
}

static char *trim(char *s)
{
    while (isspace((unsigned char)*s))
        s++;
    char *e = s + strlen(s);
    while (e > s && isspace((unsigned char)e[-1]))
        *--e = '\0';
    return s;
}

static int load_file(const char *path, config_opt *opts, size_t n)
{
    FILE *f = fopen(path, "r");
    if (!f) {
        fprintf(stderr, "cannot open config file %s\n", path);
        return -1;
    }
    char line[4096];
    int lineno = 0, rc = 0;
    while (fgets(line, sizeof(line), f)) {
        lineno++;
        char *s = trim(line);
        if (*s == '\0' || *s == '#') continue;
        char *eq = strchr(s, '=');
        if (!eq) {
            fprintf(stderr, "%s:%d: expected 'name = value'\n", path, lineno);
            rc = -1;
            break;
        }
        *eq = '\0';
        char *key = trim(s), *val = trim(eq + 1);
        config_opt *o = find(opts, n, key, strlen(key));
        if (!o) {
            fprintf(stderr, "%s:%d: unknown setting '%s'\n", path, lineno, key);
            rc = -1;
            break;
        }
        set_owned(o, xstrdup(val));
    }
    fclose(f);
    return rc;
}

static void usage(config_opt *opts, size_t n, const char *program, const char *about)
{
    printf("usage: %s [--config FILE] [--name value ...]\n%s\n\noptions:\n", program, about);
    printf("  --%-18s %s\n", "config FILE", "read settings from FILE (lines 'name = value')");
    for (size_t i = 0; i < n; i++)
        printf("  --%-18s %s (default: %s)\n", opts[i].name, opts[i].help, opts[i].value ? opts[i].value : "none");
}

int config_parse(int argc, char **argv, config_opt *opts, size_t n, const char *program, const char *about)
{
    /* the config file first, so that flags override it wherever they appear */
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--config") == 0 && i + 1 == argc) {
            fprintf(stderr, "%s: option '--config' needs a file name\n", program);
            return -1;
        }
        if (strcmp(argv[i], "--config") == 0) {
            if (load_file(argv[i + 1], opts, n) != 0) return -1;
        } else if (strncmp(argv[i], "--config=", 9) == 0 && load_file(argv[i] + 9, opts, n) != 0) {
            return -1;
        }
    }
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            usage(opts, n, program, about);
            return 1;
        }
        if (strncmp(a, "--", 2) != 0) {
            fprintf(stderr, "%s: unexpected argument '%s' (try --help)\n", program, a);
            return -1;
        }
        const char *name = a + 2, *eq = strchr(name, '=');
        size_t len = eq ? (size_t)(eq - name) : strlen(name);
        if (len == 6 && strncmp(name, "config", 6) == 0) {
            if (!eq) i++;
            continue;
        }
        config_opt *o = find(opts, n, name, len);
        if (!o) {
            fprintf(stderr, "%s: unknown option '%s' (try --help)\n", program, a);
            return -1;
        }
        if (eq) {
            set_borrowed(o, eq + 1);
        } else if (i + 1 < argc) {
            set_borrowed(o, argv[++i]);
        } else {
            fprintf(stderr, "%s: option '%s' needs a value\n", program, a);
            return -1;
        }
    }
    return 0;
}

const char *config_get(const config_opt *opts, size_t n, const char *name)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(opts[i].name, name) == 0) return opts[i].value;
    return NULL;
}

void config_free(config_opt *opts, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (opts[i].owned) set_borrowed(&opts[i], NULL);
}
