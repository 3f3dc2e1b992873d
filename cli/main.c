/* cli/main.c - gantry, the user's command-line client of the REST API (libcurl): it owns the
 * commands below, the config file and the terminal output; it includes only common/ (the layering
 * lint's rule for cli/) and talks to the server over HTTP alone.
 *
 *   gantry login [--url URL] [--token TOKEN | reads it from stdin]
 *   gantry submit FILE|-          gantry list [--state S] [--type T] [--limit N]
 *   gantry get ID                 gantry cancel ID
 *   gantry follow ID              (the job's state, why it waits, then live events over SSE until it ends;
 *                                  the progress as one line in place on a terminal, a line per 10% elsewhere)
 *   gantry logs ID [-f] [--rank R] [--tail N]       gantry outputs ID [PATH [-o FILE]]   (program jobs)
 *   gantry trials ID              (a search's trials: parameters, last metric, rung decisions, the best)
 *   gantry workers                gantry models [show NAME]
 *   gantry models upload NAME FILE.pt --metadata META.json      (a TorchScript version; sha256 checked)
 *   gantry models alias NAME ALIAS VERSION                      gantry models unalias NAME ALIAS
 *   gantry tenants                gantry tokens create TENANT_ID --role ROLE [--name NAME]   (admins)
 *   gantry help [COMMAND]         gantry COMMAND --help          gantry --version
 *
 * Tables for people (each column as wide as its widest cell); durations as 850ms, 12.3s, 1m48s, 2h03m;
 * --json anywhere prints the API's JSON for scripts.  The
 * server and token come from GANTRY_URL / GANTRY_TOKEN, else from the config
 * file ($GANTRY_CONFIG, default ~/.config/gantry/config: {"url", "token"}),
 * which login writes with mode 0600 and which is refused when others can read
 * it.  Errors print the API's message and field; exit status 1 (2 for usage).
 *
 * Every string from the server is printed with its control characters escaped
 * (\x1b, \r, \n, \u009b: common/utf8.h), in tables, plain lines and errors, so
 * that a name another tenant chose cannot rewrite the reader's terminal; --json
 * stays valid JSON (the encoder escapes C0, and DEL and C1 are written \u00XX). */
#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <openssl/evp.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stdarg.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/jsonfmt.h"
#include "common/alloc.h"
#include "common/clock.h"
#include "common/utf8.h"

#define DEFAULT_URL "http://127.0.0.1:8080"
#ifndef GANTRY_VERSION
#define GANTRY_VERSION "unknown" /* meson passes the project's version */
#endif

static bool as_json;
static char url[1024] = DEFAULT_URL, token[512];

typedef struct {
    char *p;
    size_t n;
} buf;

static size_t collect(char *data, size_t size, size_t nmemb, void *arg)
{
    buf *b = arg;
    size_t k = size * nmemb;
    char *p = xrealloc(b->p, b->n + k + 1);
    memcpy(p + b->n, data, k);
    b->p = p, b->n += k, p[b->n] = '\0';
    return k;
}

/* ---- printing what the server sent: control characters escaped ---- */

/* strings handed out by esc() live until 64 more were handed out (a printf's arguments at most) */
static char *ring[64];
static unsigned ring_next;

static void ring_free(void)
{
    for (unsigned i = 0; i < sizeof ring / sizeof ring[0]; i++)
        free(ring[i]), ring[i] = NULL;
}

static const char *keep(char *s)
{
    unsigned i = ring_next++ % (sizeof ring / sizeof ring[0]);
    free(ring[i]);
    ring[i] = s;
    return s ? s : "?";
}

/* s with its control characters escaped, for a terminal */
static const char *esc(const char *s)
{
    return keep(utf8_escape_control(s));
}

/* s escaped, then cut or padded to width characters (a column of a table); a cut falls between
 * whole characters and whole escapes */
static const char *cell(const char *s, size_t width)
{
    const char *e = esc(s);
    size_t n = strlen(e), used = 0, chars = 0;
    char *out = xmalloc(n + width + 1);
    for (const char *p = s ? s : ""; *p;) {
        size_t k = 1; /* the bytes of one character of s */
        while (p[k] && ((unsigned char)p[k] & 0xC0) == 0x80)
            k++;
        char one[8];
        snprintf(one, sizeof one, "%.*s", (int)k, p);
        char *shown = utf8_escape_control(one);
        if (!shown) break;
        size_t len = strlen(shown), cols = strcmp(shown, one) ? len : 1; /* an escape is ASCII */
        if (chars + cols > width) {
            free(shown);
            break;
        }
        memcpy(out + used, shown, len);
        used += len, chars += cols, p += k;
        free(shown);
    }
    memset(out + used, ' ', width - chars);
    out[used + width - chars] = '\0';
    return keep(out);
}

/* the columns s takes once escaped: an escape is ASCII, any other character one column (wide CJK
 * characters take two on most terminals: such a row is off by their number) */
static size_t shown_width(const char *s)
{
    size_t n = 0;
    for (const unsigned char *p = (const unsigned char *)esc(s); *p; p++)
        n += (*p & 0xC0) != 0x80;
    return n;
}

/* ---- tables: each column as wide as its widest cell ---- */

#define TABLE_MAX_COLS 48 /* gantry trials: 7 columns and one per parameter (at most 32) */

typedef struct {
    int ncols;
    const char *head[TABLE_MAX_COLS];
    bool right[TABLE_MAX_COLS];  /* right-aligned (numbers) */
    size_t most[TABLE_MAX_COLS]; /* the widest a column may be (longer cells are cut), 0: no limit */
    char **cells;                /* nrows * ncols strings as the server sent them (escaped when printed) */
    size_t nrows;
} table;

/* a table with its headers, NULL-terminated; a header starting with '>' is right-aligned (the '>' not shown) */
static void table_init(table *t, ...)
{
    memset(t, 0, sizeof *t);
    va_list ap;
    va_start(ap, t);
    for (const char *h; t->ncols < TABLE_MAX_COLS && (h = va_arg(ap, const char *));) {
        t->right[t->ncols] = h[0] == '>';
        t->head[t->ncols++] = h + (h[0] == '>');
    }
    va_end(ap);
}

/* one row: ncols strings (NULL shows as "-") */
static void table_row(table *t, ...)
{
    t->cells = xrealloc(t->cells, sizeof(char *) * (t->nrows + 1) * (size_t)t->ncols);
    va_list ap;
    va_start(ap, t);
    for (int c = 0; c < t->ncols; c++) {
        const char *v = va_arg(ap, const char *);
        t->cells[t->nrows * (size_t)t->ncols + (size_t)c] = xstrdup(v && *v ? v : "-");
    }
    va_end(ap);
    t->nrows++;
}

/* one more column, its header as table_init's (kept, not copied); past TABLE_MAX_COLS it is left out */
static void table_col(table *t, const char *h)
{
    if (t->ncols >= TABLE_MAX_COLS || t->nrows) return;
    t->right[t->ncols] = h[0] == '>';
    t->head[t->ncols++] = h + (h[0] == '>');
}

/* one row from an array of ncols strings (NULL shows as "-") */
static void table_row_cells(table *t, const char *const *v)
{
    t->cells = xrealloc(t->cells, sizeof(char *) * (t->nrows + 1) * (size_t)t->ncols);
    for (int c = 0; c < t->ncols; c++)
        t->cells[t->nrows * (size_t)t->ncols + (size_t)c] = xstrdup(v[c] && *v[c] ? v[c] : "-");
    t->nrows++;
}

/* prints the table (two spaces between columns, the last one not padded) and frees it */
static void table_print(table *t)
{
    size_t width[TABLE_MAX_COLS];
    for (int c = 0; c < t->ncols; c++) {
        width[c] = strlen(t->head[c]);
        for (size_t r = 0; r < t->nrows; r++) {
            size_t w = shown_width(t->cells[r * (size_t)t->ncols + (size_t)c]);
            if (w > width[c]) width[c] = w;
        }
        if (t->most[c] && width[c] > t->most[c]) width[c] = t->most[c];
    }
    for (size_t r = 0; r <= t->nrows; r++) {
        for (int c = 0; c < t->ncols; c++) {
            const char *v = r ? t->cells[(r - 1) * (size_t)t->ncols + (size_t)c] : t->head[c];
            bool last = c == t->ncols - 1;
            size_t w = shown_width(v);
            if (t->right[c])
                printf("%*s%s", (int)(w < width[c] ? width[c] - w : 0), "", esc(v));
            else
                fputs(last && w <= width[c] ? esc(v) : cell(v, width[c]), stdout); /* no blanks after the last */
            if (!last) fputs("  ", stdout);
        }
        putchar('\n');
    }
    for (size_t i = 0; i < t->nrows * (size_t)t->ncols; i++)
        free(t->cells[i]);
    free(t->cells);
    t->cells = NULL, t->nrows = 0;
}

/* JSON text as printed: jansson escapes C0 already; DEL and C1 (raw in UTF-8 text) become \u00XX, which
 * only strings can hold, so the text stays valid JSON with the same values */
static void put_json_text(const char *text)
{
    for (const unsigned char *p = (const unsigned char *)text; *p; p++) {
        if (*p == 0x7F)
            fputs("\\u007f", stdout);
        else if (p[0] == 0xC2 && p[1] >= 0x80 && p[1] <= 0x9F)
            printf("\\u%04x", p[1]), p++;
        else
            putchar(*p);
    }
    putchar('\n');
}

static void print_json_flags(const json_t *j, size_t flags)
{
    char *s = jsonfmt_dumps(j, flags | JSON_ENCODE_ANY); /* 0.8854, not 0.88539999999999996 */
    put_json_text(s ? s : "null");
    free(s);
}

static void print_json(const json_t *j)
{
    print_json_flags(j, JSON_INDENT(2) | JSON_SORT_KEYS);
}

/* ---- usage and help ---- */

/* a command's handler, git's way: argv[0] is the command, argc counts it; arity_ok has checked the words */
typedef int command_fn(int argc, char **argv);
static command_fn cmd_login, cmd_submit, cmd_list, cmd_get, cmd_cancel, cmd_follow, cmd_logs, cmd_outputs, cmd_trials, cmd_table,
    cmd_models, cmd_tokens;

typedef struct {
    const char *name, *args, *about, *details;
    command_fn *run; /* NULL for help (answered before any config) */
} command;

static const command commands[] = {
    {"login", "[--url URL] [--token TOKEN]", "check a token and save it with the server's URL",
     "  --url URL      the server (default: $GANTRY_URL, the config's, else " DEFAULT_URL ")\n"
     "  --token TOKEN  the token; without it the token is read from stdin (out of the shell history)\n"
     "Asks the server who the token is (GET /v1/whoami), then writes the config file\n"
     "($GANTRY_CONFIG, default ~/.config/gantry/config) with mode 600.\n"
     "example:\n"
     "  gantry login --url http://127.0.0.1:8080 < admin.token\n",
     cmd_login},
    {"submit", "FILE|-", "submit a job (JSON: type, name, spec); prints its id",
     "  FILE  a job as JSON, e.g. deploy/examples/training.json; - reads it from stdin\n"
     "An invalid spec prints the API's message and the field it names (exit status 1).\n"
     "example:\n"
     "  gantry submit deploy/examples/placement.json\n"
     "  gantry --json submit - < job.json\n",
     cmd_submit},
    {"list", "[--state S] [--type T] [--limit N]", "the tenant's jobs, newest first",
     "  --state S  queued, scheduled, running, succeeded, failed or cancelled\n"
     "  --type T   placement, training, inference or federated\n"
     "  --limit N  at most N jobs (the API's default page otherwise)\n"
     "example:\n"
     "  gantry list --state running\n",
     cmd_list},
    {"get", "ID", "one job: name, type, state, times, duration, worker, error, metrics",
     "example:\n"
     "  gantry get j_0123456789abcdef\n"
     "  gantry get j_0123456789abcdef --json   (the whole job: spec and result too)\n",
     cmd_get},
    {"cancel", "ID", "cancel a job that has not finished",
     "A finished job cannot be cancelled (HTTP 409, exit status 1).\n"
     "example:\n"
     "  gantry cancel j_0123456789abcdef\n",
     cmd_cancel},
    {"follow", "ID", "the job's state, why it waits, then its events until it ends",
     "Prints the job's current state first; while it is queued, why it waits (the scheduler's\n"
     "reason: no free worker, the tenant's quota, a gang not complete) and how many workers are free.\n"
     "Then prints its events as they come (Server-Sent Events) until the job ends: each state change\n"
     "and note on a line; the progress (a training job's steps, a serving job's requests/s and latency)\n"
     "as one line updated in place on a terminal, else (a pipe, a file) a line per 10% (or after 30 s\n"
     "without one); --json prints every event.  Exit status 0 when it succeeded, 1 when it failed or was\n"
     "cancelled (at once when it had already finished).\n"
     "example:\n"
     "  gantry follow j_0123456789abcdef\n",
     cmd_follow},
    {"logs", "ID [-f] [--rank R] [--tail N]", "a program job's output: its last lines, or followed live",
     "  -f, --follow  print new lines as the program writes them, until the job ends (exit status 0\n"
     "                when it succeeded, 1 otherwise)\n"
     "  --rank R      rank R's lines only (else every rank's, \"[rank R] \" before each when there are several)\n"
     "  --tail N      the last N lines (default 100, at most 10000; 0: none, with -f only new ones)\n"
     "Control characters the program printed are shown escaped (\\x1b), invalid UTF-8 as '?'.\n"
     "A job that is not a program job has no logs (HTTP 404, exit status 1).\n"
     "example:\n"
     "  gantry logs j_0123456789abcdef --tail 20\n"
     "  gantry logs j_0123456789abcdef -f --rank 0\n",
     cmd_logs},
    {"outputs", "ID [PATH [-o FILE]]", "a program job's output files, or one of them",
     "Without PATH: the files the job wrote to its output directory (path, bytes, sha256).\n"
     "With PATH (as listed): that file, to stdout or to FILE (-o; the sha256 is checked).\n"
     "example:\n"
     "  gantry outputs j_0123456789abcdef\n"
     "  gantry outputs j_0123456789abcdef model.pt -o model.pt\n",
     cmd_outputs},
    {"trials", "ID", "a search's trials: parameters, last metric, rung decisions; the best marked",
     "A row per trial of the search ID (docs/search.md): its number (the best, by its last reported\n"
     "metric, marked *: *5), state (running, paused, succeeded, stopped, failed, cancelled), a column per\n"
     "parameter (the trial's variable: upper-cased), the metric's last value and the resource it was reported\n"
     "at, asha's decision at each rung it reached (r0 ok: continued past rung 0; r1 stop: stopped there;\n"
     "with pause, r0 up: promoted past rung 0; r1 paused: paused there, not promoted),\n"
     "its failures (retries) and the job that runs it now.  --json prints GET /v1/jobs/ID/trials (every\n"
     "value exact, every job that ran each trial, the reasons).  A job that is not a search: HTTP 404.\n"
     "example:\n"
     "  gantry trials j_0123456789abcdef\n"
     "  gantry --json trials j_0123456789abcdef\n",
     cmd_trials},
    {"workers", "", "the workers: kind, idle or busy, what runs, labels", "example:\n  gantry workers\n", cmd_table},
    {"models", "[show NAME | upload | alias | unalias ...]", "the tenant's models; one model's versions; upload, alias",
     "  (no words)                                   the models: name, latest version, last update\n"
     "  show NAME                                    its aliases and versions (format, size, sha256 prefix,\n"
     "                                               created, description)\n"
     "  upload NAME FILE --metadata META.json        a new version from a TorchScript file (torch.jit.save's\n"
     "                                               output); META: {\"inputs\": [{\"name\", \"datatype\",\n"
     "                                               \"shape\": [-1, ...]}], \"outputs\"?, \"description\"?,\n"
     "                                               \"metrics\"?}; prints the version, its size and sha256, which\n"
     "                                               must equal the local file's (else exit status 1)\n"
     "  alias NAME ALIAS VERSION                     point ALIAS at VERSION: prints previous -> new and the\n"
     "                                               inference jobs on NAME@ALIAS that roll to it\n"
     "  unalias NAME ALIAS                           remove an alias (refused while a job serves it)\n"
     "A refused upload prints the API's message and the field it names (file, metadata.inputs[0].shape[0]...).\n"
     "example:\n"
     "  gantry models upload resnet resnet18.pt --metadata resnet18.json\n"
     "  gantry models alias resnet production 2\n"
     "  gantry models show resnet\n",
     cmd_models},
    {"tenants", "", "every tenant (admins)", "example:\n  GANTRY_TOKEN=$(cat ~/.local/state/gantry/admin.token) gantry tenants\n",
     cmd_table},
    {"tokens", "create TENANT_ID --role ROLE [--name NAME]", "create a token for a tenant (admins)",
     "  --role ROLE  admin, member or viewer\n"
     "  --name NAME  a label for people (no control characters)\n"
     "Prints the token's secret once: keep it.\n"
     "example:\n"
     "  gantry tokens create t_0123abcd --role member --name ci\n",
     cmd_tokens},
    {"help", "[COMMAND]", "this text, or one command's", "example:\n  gantry help submit\n", NULL},
};
#define NCOMMANDS (sizeof commands / sizeof commands[0])

static const command *find_command(const char *name)
{
    for (size_t i = 0; i < NCOMMANDS; i++)
        if (!strcmp(commands[i].name, name)) return &commands[i];
    return NULL;
}

static void print_usage(FILE *out)
{
    fprintf(out, "usage: gantry [--json] COMMAND [ARGS]\n\n"
                 "The command-line client of a gantry server.\n\ncommands:\n");
    for (size_t i = 0; i < NCOMMANDS; i++) {
        char head[96];
        snprintf(head, sizeof head, "%s %s", commands[i].name, commands[i].args);
        fprintf(out, "  %-50s %s\n", head, commands[i].about);
    }
    fprintf(out, "\noptions:\n"
                 "  --json         print the API's JSON (for scripts), anywhere on the line\n"
                 "  -h, --help     this text; gantry COMMAND --help: that command's\n"
                 "  --version      the version\n"
                 "\nenvironment:\n"
                 "  GANTRY_URL     the server (default " DEFAULT_URL ")\n"
                 "  GANTRY_TOKEN   the token (instead of the config file's)\n"
                 "  GANTRY_CONFIG  the config file (default ~/.config/gantry/config, written by gantry login)\n"
                 "\nexample:\n"
                 "  gantry login --url http://127.0.0.1:8080 < token.txt\n"
                 "  gantry submit deploy/examples/training.json\n"
                 "  gantry follow j_...\n"
                 "\nExit status: 0 done, 1 an error (the API's message and field on stderr), 2 wrong usage.\n");
}

static void print_command_help(FILE *out, const command *c)
{
    fprintf(out, "usage: gantry [--json] %s %s\n\n%s.\n\n%s", c->name, c->args, c->about, c->details);
}

/* wrong usage: the general text, or the command's, on stderr; 2 */
static int usage_of(const char *cmd)
{
    const command *c = cmd ? find_command(cmd) : NULL;
    if (c)
        print_command_help(stderr, c);
    else
        print_usage(stderr);
    return 2;
}

static int usage(void)
{
    return usage_of(NULL);
}

/* the server's base URL, without trailing slashes */
static void set_url(const char *u)
{
    snprintf(url, sizeof url, "%s", u);
    size_t n = strlen(url);
    while (n > 0 && url[n - 1] == '/')
        url[--n] = '\0';
}

static void config_path(char *out, size_t len)
{
    const char *env = getenv("GANTRY_CONFIG"), *home = getenv("HOME");
    if (env && *env)
        snprintf(out, len, "%s", env);
    else
        snprintf(out, len, "%s/.config/gantry/config", home ? home : ".");
}

/* the config file, if any: refused when group or others may read it (it holds a token) */
static int load_config(void)
{
    char path[1024];
    config_path(path, sizeof path);
    struct stat sb;
    if (stat(path, &sb) != 0) return 0;
    if (sb.st_mode & 077) {
        fprintf(stderr, "gantry: %s is readable by others (mode %03o); it holds a token: chmod 600 %s\n", path,
                (unsigned)(sb.st_mode & 0777), path);
        return -1;
    }
    json_error_t je;
    json_t *c = json_load_file(path, 0, &je);
    if (!c) {
        fprintf(stderr, "gantry: %s: %s (line %d)\n", path, je.text, je.line);
        return -1;
    }
    const char *u = json_string_value(json_object_get(c, "url")), *t = json_string_value(json_object_get(c, "token"));
    if (u) set_url(u);
    if (t) snprintf(token, sizeof token, "%s", t);
    json_decref(c);
    return 0;
}

/* an HTTP request with a JSON body or a multipart/form-data one (form, made on h by the caller; then
 * curl writes its Content-Type with the boundary); *out the parsed JSON answer (may be NULL); returns
 * the status, or -1 with a message printed */
static long perform(CURL *h, const char *method, const char *path, const char *body, curl_mime *form, long timeout_s, json_t **out)
{
    char full[2048], auth[600];
    buf b = {0};
    snprintf(full, sizeof full, "%s%s", url, path);
    snprintf(auth, sizeof auth, "Authorization: Bearer %s", token);
    struct curl_slist *hd = curl_slist_append(NULL, auth);
    if (!form) hd = curl_slist_append(hd, "Content-Type: application/json");
    curl_easy_setopt(h, CURLOPT_URL, full);
    curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, method);
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, hd);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, collect);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, &b);
    curl_easy_setopt(h, CURLOPT_TIMEOUT, timeout_s);
    if (body) curl_easy_setopt(h, CURLOPT_POSTFIELDS, body);
    if (form) curl_easy_setopt(h, CURLOPT_MIMEPOST, form);
    CURLcode rc = curl_easy_perform(h);
    long status = -1;
    if (rc != CURLE_OK)
        fprintf(stderr, "gantry: %s: %s\n", full, curl_easy_strerror(rc));
    else
        curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
    curl_slist_free_all(hd);
    *out = b.p ? json_loads(b.p, 0, NULL) : NULL;
    free(b.p);
    return status;
}

static long request(const char *method, const char *path, const char *body, json_t **out)
{
    CURL *h = curl_easy_init();
    long status = perform(h, method, path, body, NULL, 60, out);
    curl_easy_cleanup(h);
    return status;
}

/* prints the API's error (escaped); 1 */
static int api_error(long status, const json_t *j)
{
    const json_t *e = json_object_get(j, "error");
    const char *m = json_string_value(json_object_get(e, "message")), *f = json_string_value(json_object_get(e, "field"));
    if (!m) m = json_string_value(e); /* an error given as a plain string */
    if (as_json && j) print_json(j);
    fprintf(stderr, "gantry: HTTP %ld: %s%s%s%s\n", status, m ? esc(m) : "(no message)", f ? " (field " : "", f ? esc(f) : "",
            f ? ")" : "");
    return 1;
}

/* a string member as it came, or "" */
static const char *raw(const json_t *o, const char *k)
{
    const char *s = json_string_value(json_object_get(o, k));
    return s ? s : "";
}

/* a string member for people: escaped, "-" when absent */
static const char *str(const json_t *o, const char *k)
{
    const char *s = json_string_value(json_object_get(o, k));
    return s ? esc(s) : "-";
}

/* GET path: 0 with *out, or 1 (error printed) */
static int get(const char *path, json_t **out)
{
    long st = request("GET", path, NULL, out);
    if (st == 200) return 0;
    int rc = st < 0 ? 1 : api_error(st, *out);
    json_decref(*out);
    *out = NULL;
    return rc;
}

/* ---- streamed answers: SSE, text, downloads ---- */

/* GET path with its body handed to sink as it comes when the answer is 200; another answer's body
 * (the API's error) is kept and printed.  sink returns the bytes it took (fewer ends the transfer:
 * the caller knows why).  timeout_s 0: none (a stream). */
typedef size_t sink_fn(const char *p, size_t n, void *arg);
typedef struct {
    CURL *h;
    sink_fn *sink;
    void *arg;
    long status;
    buf err;
} streamed;

static size_t on_streamed(char *data, size_t size, size_t nmemb, void *arg)
{
    streamed *g = arg;
    size_t k = size * nmemb;
    if (!g->status) curl_easy_getinfo(g->h, CURLINFO_RESPONSE_CODE, &g->status);
    if (g->status == 200) return g->sink(data, k, g->arg);
    if (g->err.n < 1 << 20) collect(data, 1, k, &g->err);
    return k;
}

/* 0 when the answer was 200 (its body went to sink; *cut when sink ended it), else 1 with the error printed */
static int get_streamed(const char *path, long timeout_s, sink_fn *sink, void *arg, bool *cut)
{
    char full[2048], auth[600];
    snprintf(full, sizeof full, "%s%s", url, path);
    snprintf(auth, sizeof auth, "Authorization: Bearer %s", token);
    streamed g = {curl_easy_init(), sink, arg, 0, {0}};
    struct curl_slist *hd = curl_slist_append(NULL, auth);
    curl_easy_setopt(g.h, CURLOPT_URL, full);
    curl_easy_setopt(g.h, CURLOPT_HTTPHEADER, hd);
    curl_easy_setopt(g.h, CURLOPT_WRITEFUNCTION, on_streamed);
    curl_easy_setopt(g.h, CURLOPT_WRITEDATA, &g);
    curl_easy_setopt(g.h, CURLOPT_TIMEOUT, timeout_s);
    CURLcode rc = curl_easy_perform(g.h);
    if (!g.status) curl_easy_getinfo(g.h, CURLINFO_RESPONSE_CODE, &g.status);
    *cut = rc == CURLE_WRITE_ERROR && g.status == 200;
    int out = 0;
    if (g.status != 200 && g.status > 0) {
        json_t *j = g.err.p ? json_loads(g.err.p, 0, NULL) : NULL;
        out = api_error(g.status, j);
        json_decref(j);
    } else if (rc != CURLE_OK && !*cut) {
        fprintf(stderr, "gantry: %s: %s\n", full, curl_easy_strerror(rc));
        out = 1;
    }
    curl_slist_free_all(hd);
    curl_easy_cleanup(g.h);
    free(g.err.p);
    return out;
}

/* Server-Sent Events as they come: each event's name and data (its data lines joined by LF) to
 * on_event, each comment (":connected", ":keepalive") to on_comment; either returns false to end
 * the stream. */
typedef struct sse_reader {
    buf line, data;
    char event[32];
    bool (*on_event)(struct sse_reader *r, const char *event, const char *data);
    bool (*on_comment)(struct sse_reader *r, const char *text);
    void *arg;
} sse_reader;

/* one line of the stream; false to end it */
static bool sse_line(sse_reader *r, const char *line)
{
    if (!*line) { /* the end of an event */
        bool go = !r->data.p || r->on_event(r, r->event[0] ? r->event : "message", r->data.p);
        r->event[0] = '\0';
        r->data.n = 0;
        if (r->data.p) free(r->data.p), r->data.p = NULL;
        return go;
    }
    if (line[0] == ':') return !r->on_comment || r->on_comment(r, line);
    if (!strncmp(line, "event: ", 7)) {
        snprintf(r->event, sizeof r->event, "%s", line + 7);
    } else if (!strncmp(line, "data: ", 6)) {
        if (r->data.p) collect((char *)"\n", 1, 1, &r->data);
        collect((char *)line + 6, 1, strlen(line + 6), &r->data);
    }
    return true;
}

static size_t on_sse(const char *data, size_t k, void *arg)
{
    sse_reader *r = arg;
    for (size_t i = 0; i < k; i++) {
        if (data[i] != '\n') {
            if (r->line.n < 1 << 20) collect((char *)&data[i], 1, 1, &r->line);
            continue;
        }
        if (r->line.n && r->line.p[r->line.n - 1] == '\r') r->line.p[--r->line.n] = '\0';
        bool go = sse_line(r, r->line.p ? r->line.p : "");
        r->line.n = 0;
        if (r->line.p) r->line.p[0] = '\0';
        if (!go) return 0; /* ends the transfer */
    }
    return k;
}

static void sse_reader_free(sse_reader *r)
{
    free(r->line.p);
    free(r->data.p);
}

static int cmd_login(int argc, char **argv)
{
    for (int i = 1; i + 1 < argc; i++) {
        if (!strcmp(argv[i], "--url")) set_url(argv[i + 1]);
        if (!strcmp(argv[i], "--token")) snprintf(token, sizeof token, "%s", argv[i + 1]);
    }
    if (!token[0]) { /* from stdin, so it stays out of the shell history */
        if (isatty(0)) fprintf(stderr, "token: ");
        if (!fgets(token, sizeof token, stdin)) return usage_of("login");
        token[strcspn(token, "\r\n")] = '\0';
    }
    json_t *me;
    if (get("/v1/whoami", &me)) return 1;
    char path[1024], dir[1024];
    config_path(path, sizeof path);
    snprintf(dir, sizeof dir, "%s", path);
    char *slash = strrchr(dir, '/');
    if (slash) {
        *slash = '\0';
        for (char *p = dir + 1; *p; p++) /* mkdir -p */
            if (*p == '/') *p = '\0', mkdir(dir, 0700), *p = '/';
        mkdir(dir, 0700);
    }
    json_t *c = json_pack("{s:s, s:s}", "url", url, "token", token);
    char *text = json_dumps(c, JSON_INDENT(2));
    json_decref(c);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    int ok = fd >= 0 && fchmod(fd, 0600) == 0 && write(fd, text, strlen(text)) == (ssize_t)strlen(text);
    if (fd >= 0 && close(fd) != 0) ok = 0;
    free(text);
    if (!ok) {
        fprintf(stderr, "gantry: cannot write %s: %s\n", path, strerror(errno));
        json_decref(me);
        return 1;
    }
    if (as_json)
        print_json(me);
    else
        printf("logged in to %s as %s of tenant %s; saved in %s (mode 600)\n", esc(url), str(me, "role"),
               str(json_object_get(me, "tenant"), "name"), esc(path));
    json_decref(me);
    return 0;
}

static int cmd_submit(int argc, char **argv)
{
    (void)argc; /* one word */
    const char *file = argv[1];
    json_error_t je;
    json_t *job = strcmp(file, "-") == 0 ? json_loadf(stdin, 0, &je) : json_load_file(file, 0, &je);
    if (!job) {
        fprintf(stderr, "gantry: %s: %s (line %d, column %d)\n", strcmp(file, "-") == 0 ? "stdin" : file, je.text, je.line,
                je.column);
        return 1;
    }
    char *body = json_dumps(job, JSON_COMPACT);
    json_decref(job);
    json_t *r;
    long st = request("POST", "/v1/jobs", body, &r);
    free(body);
    int rc = 0;
    if (st != 201 && st != 200)
        rc = st < 0 ? 1 : api_error(st, r);
    else if (as_json)
        print_json(r);
    else
        printf("%s\n", str(r, "id"));
    json_decref(r);
    return rc;
}

/* prefix, then name escaped for a URL, then suffix: "/v1/jobs/" "j_1" "/events" */
static void api_path(char *out, size_t len, const char *prefix, const char *name, const char *suffix)
{
    char *e = curl_easy_escape(NULL, name, 0);
    snprintf(out, len, "%s%s%s", prefix, e ? e : "", suffix);
    curl_free(e);
}

/* appends &name=value (escaped) to a path */
static void add_query(char *path, size_t len, const char *name, const char *value)
{
    char *e = curl_easy_escape(NULL, value, 0);
    size_t n = strlen(path);
    snprintf(path + n, len - n, "%s%s=%s", strchr(path, '?') ? "&" : "?", name, e ? e : "");
    curl_free(e);
}

static int cmd_list(int argc, char **argv)
{
    char path[512] = "/v1/jobs";
    for (int i = 1; i + 1 < argc; i += 2) { /* --flag value pairs */
        const char *k = !strcmp(argv[i], "--state")   ? "state"
                        : !strcmp(argv[i], "--type")  ? "type"
                        : !strcmp(argv[i], "--limit") ? "limit"
                                                      : NULL;
        if (!k) return usage_of("list");
        add_query(path, sizeof path, k, argv[i + 1]);
    }
    json_t *r;
    if (get(path, &r)) return 1;
    if (as_json) {
        print_json(r);
    } else {
        table t;
        table_init(&t, "ID", "NAME", "TYPE", "STATE", ">PROGRESS", "CREATED", NULL);
        t.most[1] = 40; /* a longer name is cut (gantry get shows it whole) */
        size_t i;
        json_t *j;
        json_array_foreach(json_object_get(r, "jobs"), i, j)
        {
            json_t *pr = json_object_get(j, "progress");
            char pct[16] = "-";
            if (json_is_number(pr)) snprintf(pct, sizeof pct, "%.0f%%", json_number_value(pr) * 100);
            table_row(&t, raw(j, "id"), raw(j, "name"), raw(j, "type"), raw(j, "state"), pct, raw(j, "created_at"));
        }
        table_print(&t);
        if (json_is_string(json_object_get(r, "next_cursor"))) printf("(more: --limit, or the API's cursor)\n");
    }
    json_decref(r);
    return 0;
}

/* /v1/jobs/ID followed by suffix, the id escaped for a URL */
static void job_path(char *out, size_t len, const char *id, const char *suffix)
{
    api_path(out, len, "/v1/jobs/", id, suffix);
}

/* how long the job ran (finished - started), or has run so far, for people: "1m48s", "12.3s (running)";
 * "-" before it started, or when it never did */
static void job_duration(const json_t *j, char *out, size_t len)
{
    int64_t started, finished;
    snprintf(out, len, "-");
    if (clock_parse_iso8601(raw(j, "started_at"), &started) != 0) return;
    bool done = clock_parse_iso8601(raw(j, "finished_at"), &finished) == 0;
    char took[24];
    clock_duration((double)((done ? finished : clock_now_ms()) - started), took, sizeof took);
    snprintf(out, len, "%s%s", took, done ? "" : " so far");
}

static int cmd_get(int argc, char **argv)
{
    (void)argc; /* one word */
    const char *id = argv[1];
    char path[512];
    job_path(path, sizeof path, id, "");
    json_t *j;
    if (get(path, &j)) return 1;
    if (as_json) {
        print_json(j);
    } else {
        char took[48];
        job_duration(j, took, sizeof took);
        printf("id        %s\nname      %s\ntype      %s\nstate     %s\npriority  %s\ncreated   %s\nstarted   %s\n"
               "finished  %s\nduration  %s\nworker    %s\n",
               str(j, "id"), str(j, "name"), str(j, "type"), str(j, "state"), str(j, "priority"), str(j, "created_at"),
               str(j, "started_at"), str(j, "finished_at"), took, str(j, "worker"));
        if (json_is_string(json_object_get(j, "error"))) printf("error     %s\n", str(j, "error"));
        /* the result's metrics under their whole names, the values in one column */
        const json_t *metrics = json_object_get(json_object_get(j, "result"), "metrics");
        const char *k;
        json_t *v;
        size_t wide = 0;
        json_object_foreach((json_t *)metrics, k, v)
        {
            if (shown_width(k) > wide) wide = shown_width(k);
        }
        if (json_object_size(metrics)) printf("metrics\n");
        json_object_foreach((json_t *)metrics, k, v)
        {
            char *s = jsonfmt_dumps(v, JSON_ENCODE_ANY | JSON_COMPACT);
            printf("  %s  %s\n", cell(k, wide), s ? esc(s) : "");
            free(s);
        }
    }
    json_decref(j);
    return 0;
}

static int cmd_cancel(int argc, char **argv)
{
    (void)argc; /* one word */
    const char *id = argv[1];
    char path[512];
    job_path(path, sizeof path, id, "/cancel");
    json_t *r;
    long st = request("POST", path, "{}", &r);
    int rc = 0;
    if (st != 200 && st != 202)
        rc = st < 0 ? 1 : api_error(st, r);
    else if (as_json)
        print_json(r);
    else
        printf("%s: %s\n", esc(id), str(r, "state"));
    json_decref(r);
    return rc;
}

/* follow: the job's state first (and why it waits), then the SSE stream, lines parsed as they come;
 * ends when the job reaches a final state.  A state change, a note or an adaptation is a line of its
 * own; progress points and serving windows (many: up to twenty a second) are one line rewritten in
 * place on a terminal, and elsewhere (a pipe, a file, a CI log) a line per tenth of the progress, or
 * after FOLLOW_QUIET_S without one (a job whose progress does not move, a serving job). */
#define FOLLOW_QUIET_S 30

typedef struct {
    const char *id;
    char state[32]; /* the job's last state shown */
    int done;
    bool tty;             /* stdout is a terminal: the progress line is rewritten in place */
    bool live;            /* that line is on the screen, not yet ended by a newline */
    int tenth;            /* not a terminal: the last tenth of progress printed, -1 none */
    int64_t last_live_us; /* not a terminal: when the last progress line was printed (monotonic) */
} follow_state;

/* the terminal's width in columns (80 when it does not say) */
static size_t term_cols(void)
{
    struct winsize ws;
    if (ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col >= 20) return ws.ws_col;
    return 80;
}

/* ends the progress line on the screen, so that what comes next has a line of its own */
static void end_live(follow_state *f)
{
    if (f->live) putchar('\n');
    f->live = false;
}

/* a progress line (as the server sent it: escaped here): in place on a terminal, cut to its width
 * (a wrapped line could not be rewritten), else printed when it is worth a line */
static void show_live(follow_state *f, const char *text, double fraction)
{
    if (f->tty) {
        printf("\r%s", cell(text, term_cols() - 1)); /* padded: the longer line before is covered */
        f->live = true;
        return;
    }
    int tenth = fraction >= 0 ? (int)(fraction * 10 + 1e-9) : f->tenth;
    int64_t now = clock_mono_us();
    if (tenth <= f->tenth && now - f->last_live_us < (int64_t)FOLLOW_QUIET_S * 1000000) return;
    if (tenth > f->tenth) f->tenth = tenth;
    f->last_live_us = now;
    printf("%s\n", esc(text));
}

static bool final_state(const char *s)
{
    return !strcmp(s, "succeeded") || !strcmp(s, "failed") || !strcmp(s, "cancelled");
}

/* the exit status for a job in a final state: 0 succeeded, 1 failed or cancelled */
static int final_status(const char *s)
{
    return strcmp(s, "succeeded") ? 1 : 0;
}

/* the job's state as a line: "queued    j_... "name" (placement, priority normal, created ...)" */
static void show_job(follow_state *f, const json_t *j)
{
    snprintf(f->state, sizeof f->state, "%s", raw(j, "state"));
    if (final_state(f->state)) f->done = 1;
    if (as_json) {
        print_json_flags(j, JSON_COMPACT | JSON_SORT_KEYS);
    } else {
        end_live(f);
        const char *when = f->done ? "finished" : "created", *at = str(j, f->done ? "finished_at" : "created_at");
        char took[64] = "", ran[48];
        if (f->done && json_is_string(json_object_get(j, "started_at"))) {
            job_duration(j, ran, sizeof ran);
            snprintf(took, sizeof took, ", after %s", ran);
        }
        printf("%-10s%s \"%s\" (%s, priority %s, %s %s%s)\n", esc(f->state), str(j, "id"), str(j, "name"), str(j, "type"),
               str(j, "priority"), when, at, took);
        if (json_is_string(json_object_get(j, "error"))) printf("%-10s%s\n", "error", str(j, "error"));
    }
    fflush(stdout);
}

/* why a queued job waits: the scheduler's latest note since the job's last state (quota, no capacity,
 * gang incomplete), and how many workers are free */
static void show_waiting(const char *id)
{
    char path[512];
    job_path(path, sizeof path, id, "/events");
    json_t *evs = NULL, *ws = NULL, *e;
    const char *why = NULL, *state_why = NULL;
    size_t i;
    if (request("GET", path, NULL, &evs) == 200) {
        json_array_foreach(json_object_get(evs, "events"), i, e)
        {
            const char *reason = raw(e, "reason");
            if (*raw(e, "state")) /* a new state: older notes no longer hold */
                why = NULL, state_why = strcmp(reason, "accepted") ? reason : NULL;
            else if (*reason && !json_is_number(json_object_get(e, "progress")))
                why = reason;
        }
    }
    if (!why) why = state_why && *state_why ? state_why : NULL;
    int total = -1, idle = 0;
    if (request("GET", "/v1/workers", NULL, &ws) == 200) {
        json_t *list = json_object_get(ws, "workers");
        total = (int)json_array_size(list);
        json_array_foreach(list, i, e) idle += !strcmp(raw(e, "state"), "idle");
    }
    if (as_json) {
        json_t *o = json_pack("{s:s, s:s, s:s?}", "job_id", id, "state", "queued", "waiting", why);
        if (total >= 0) json_object_set_new(o, "workers", json_pack("{s:i, s:i}", "free", idle, "total", total));
        print_json_flags(o, JSON_COMPACT | JSON_SORT_KEYS);
        json_decref(o);
    } else {
        char counts[96] = "";
        if (total >= 0) snprintf(counts, sizeof counts, " (%d of %d worker%s free)", idle, total, total == 1 ? "" : "s");
        printf("%-10s%s%s\n", "waiting", why ? esc(why) : "the scheduler has not placed it yet", counts);
    }
    fflush(stdout);
    json_decref(evs);
    json_decref(ws);
}

/* a serving window's figures (server/infer.c), for people: "serving   12.5 req/s, p50 1.2ms, p99 3.4ms, SLO 100.0%
 * within 100ms, 0 dropped, 0 timed out" */
static void serving_line(const json_t *m, char *out, size_t len)
{
    char p50[24], p99[24], slo[24];
    clock_duration(json_number_value(json_object_get(m, "p50_ms")), p50, sizeof p50);
    clock_duration(json_number_value(json_object_get(m, "p99_ms")), p99, sizeof p99);
    clock_duration(json_number_value(json_object_get(m, "slo_ms")), slo, sizeof slo);
    snprintf(out, len, "%-10s%.1f req/s, p50 %s, p99 %s, SLO %.1f%% within %s, %lld dropped, %lld timed out", "serving",
             json_number_value(json_object_get(m, "rate")), p50, p99, json_number_value(json_object_get(m, "slo_attainment")) * 100,
             slo, (long long)json_integer_value(json_object_get(m, "drops")),
             (long long)json_integer_value(json_object_get(m, "timeouts")));
}

/* one event of the job: its new state (or waiting / progress / note), progress, reason */
static void show_event(follow_state *f, const json_t *e)
{
    const char *st = raw(e, "state");
    json_t *pr = json_object_get(e, "progress"), *m = json_object_get(e, "metrics");
    if (as_json) {
        print_json_flags(e, JSON_COMPACT);
    } else {
        char pct[16] = "", line[1200];
        if (json_is_number(pr)) snprintf(pct, sizeof pct, " %3.0f%%", json_number_value(pr) * 100);
        const char *label = *st ? st : json_is_number(pr) ? "progress" : !strcmp(f->state, "queued") ? "waiting" : "note";
        snprintf(line, sizeof line, "%-10s%s %s", label, pct, raw(e, "reason"));
        /* a point of a curve (it has metrics, and is not an adaptation's sentence) or a serving window; the
         * scheduler's notes are lines of their own (an autoscaler's decision carries its replicas for the
         * dashboard's curve, and it must not take the quiet minute's one line from the serving windows) */
        bool point = !*st && json_is_object(m) && !json_object_get(m, "event") && strcmp(raw(e, "source"), "scheduler") != 0;
        if (point && !json_is_number(pr) && json_object_get(m, "rate")) serving_line(m, line, sizeof line);
        if (point) {
            show_live(f, line, json_is_number(pr) ? json_number_value(pr) : -1);
        } else {
            end_live(f);
            printf("%s\n", esc(line));
        }
    }
    fflush(stdout);
    if (*st) snprintf(f->state, sizeof f->state, "%s", st);
    if (final_state(st)) f->done = 1;
}

/* once subscribed: the job may have moved between the first look and the subscription */
static void recheck(follow_state *f)
{
    char path[512];
    job_path(path, sizeof path, f->id, "");
    json_t *j = NULL;
    if (request("GET", path, NULL, &j) == 200 && strcmp(raw(j, "state"), f->state) != 0) show_job(f, j);
    json_decref(j);
}

static bool follow_comment(sse_reader *r, const char *text)
{
    if (!strcmp(text, ":connected")) recheck(r->arg);
    return true;
}

static bool follow_event(sse_reader *r, const char *event, const char *data)
{
    (void)event;
    follow_state *f = r->arg;
    json_t *e = json_loads(data, 0, NULL);
    if (e && !strcmp(raw(e, "job_id"), f->id)) show_event(f, e);
    json_decref(e);
    return !f->done;
}

static int cmd_follow(int argc, char **argv)
{
    (void)argc; /* one word */
    const char *id = argv[1];
    char path[512];
    job_path(path, sizeof path, id, "");
    json_t *j;
    if (get(path, &j)) return 1; /* exists, and ours */
    follow_state f = {id, "", 0, isatty(STDOUT_FILENO) != 0, false, -1, 0};
    show_job(&f, j);
    json_decref(j);
    if (f.done) return final_status(f.state); /* it had already finished */
    if (!strcmp(f.state, "queued")) show_waiting(id);
    sse_reader r = {.on_event = follow_event, .on_comment = follow_comment, .arg = &f};
    bool cut;
    int rc = get_streamed("/v1/events", 0, on_sse, &r, &cut);
    sse_reader_free(&r);
    end_live(&f);
    fflush(stdout);
    if (f.done) return final_status(f.state);
    if (!rc) fprintf(stderr, "gantry: the event stream ended before the job did\n");
    return 1;
}

/* ---- a program job's logs and outputs ---- */

/* a line of a program's output for a terminal: its control characters escaped (the server did; a
 * server is not trusted with the reader's terminal either), a tab kept */
static void put_line(const char *line)
{
    if (as_json) {
        json_t *o = json_pack("{s:s, s:s}", "event", "log", "line", line);
        print_json_flags(o, JSON_COMPACT);
        json_decref(o);
    } else {
        char *e = utf8_escape_line(line);
        fputs(e ? e : "", stdout);
        putchar('\n');
        free(e);
    }
}

static size_t to_buf(const char *p, size_t n, void *arg)
{
    return collect((char *)p, 1, n, arg);
}

typedef struct {
    char state[32]; /* the job's final state, from the "done" event */
    bool done;
} logs_follow;

static bool logs_event(sse_reader *r, const char *event, const char *data)
{
    logs_follow *lf = r->arg;
    json_t *e = strcmp(event, "log") ? json_loads(data, 0, NULL) : NULL;
    if (!strcmp(event, "log")) {
        put_line(data);
    } else if (!strcmp(event, "end") && as_json) {
        json_object_set_new(e, "event", json_string("end"));
        print_json_flags(e, JSON_COMPACT | JSON_SORT_KEYS);
    } else if (!strcmp(event, "end")) {
        fprintf(stderr, "gantry: rank %lld (generation %lld) ended: %s\n",
                (long long)json_integer_value(json_object_get(e, "rank")),
                (long long)json_integer_value(json_object_get(e, "generation")), str(e, "reason"));
    } else if (!strcmp(event, "done")) {
        snprintf(lf->state, sizeof lf->state, "%s", raw(e, "state"));
        lf->done = true;
        if (as_json) {
            json_object_set_new(e, "event", json_string("done"));
            print_json_flags(e, JSON_COMPACT | JSON_SORT_KEYS);
        } else {
            fprintf(stderr, "gantry: the job %s\n", esc(lf->state));
        }
    }
    fflush(stdout);
    json_decref(e);
    return !lf->done;
}

static int cmd_logs(int argc, char **argv)
{
    const char *id = argv[1], *rank = NULL, *tail = NULL;
    bool follow = false;
    for (int i = 2; i < argc; i++) {
        if (!strcmp(argv[i], "-f") || !strcmp(argv[i], "--follow"))
            follow = true;
        else if (!strcmp(argv[i], "--rank") && i + 1 < argc)
            rank = argv[++i];
        else if (!strcmp(argv[i], "--tail") && i + 1 < argc)
            tail = argv[++i];
        else
            return usage_of("logs");
    }
    char path[1024];
    job_path(path, sizeof path, id, "/logs");
    if (rank) add_query(path, sizeof path, "rank", rank);
    if (tail) add_query(path, sizeof path, "tail", tail);
    bool cut;
    if (!follow) {
        buf b = {0};
        int rc = get_streamed(path, 60, to_buf, &b, &cut);
        for (char *line = b.p, *nl; !rc && line && *line; line = nl + 1) {
            nl = strchr(line, '\n');
            if (nl) *nl = '\0';
            put_line(line);
            if (!nl) break;
        }
        free(b.p);
        return rc;
    }
    add_query(path, sizeof path, "follow", "1");
    logs_follow lf = {"", false};
    sse_reader r = {.on_event = logs_event, .arg = &lf};
    int rc = get_streamed(path, 0, on_sse, &r, &cut);
    sse_reader_free(&r);
    if (lf.done) return final_status(lf.state);
    if (!rc) fprintf(stderr, "gantry: the log stream ended before the job did\n");
    return 1;
}

/* a download: to a file (its SHA-256 computed on the way) or to stdout */
typedef struct {
    FILE *out;
    EVP_MD_CTX *sha;
    unsigned long long bytes;
} download;

static size_t to_file(const char *p, size_t n, void *arg)
{
    download *d = arg;
    if (d->sha) EVP_DigestUpdate(d->sha, p, n);
    d->bytes += n;
    return fwrite(p, 1, n, d->out);
}

/* /v1/jobs/ID/outputs/PATH, both escaped (a '/' of PATH as %2F, which the server reads as '/') */
static void output_path(char *out, size_t len, const char *id, const char *file_path)
{
    job_path(out, len, id, "/outputs/");
    char *e = curl_easy_escape(NULL, file_path, 0);
    snprintf(out + strlen(out), len - strlen(out), "%s", e ? e : "");
    curl_free(e);
}

/* outputs ID PATH -o FILE: written to FILE.part, checked against the listing, then renamed */
static int save_output(const char *id, const char *file_path, const json_t *listed, const char *target)
{
    char path[2048], part[4096], hex[65] = "";
    output_path(path, sizeof path, id, file_path);
    snprintf(part, sizeof part, "%s.part", target);
    download d = {fopen(part, "wb"), EVP_MD_CTX_new(), 0};
    if (!d.out) {
        fprintf(stderr, "gantry: cannot write %s: %s\n", esc(part), strerror(errno));
        EVP_MD_CTX_free(d.sha);
        return 1;
    }
    EVP_DigestInit_ex(d.sha, EVP_sha256(), NULL);
    bool cut;
    int rc = get_streamed(path, 0, to_file, &d, &cut);
    unsigned char md[32];
    EVP_DigestFinal_ex(d.sha, md, NULL);
    EVP_MD_CTX_free(d.sha);
    for (int i = 0; i < 32; i++)
        snprintf(hex + 2 * i, 3, "%02x", md[i]);
    if (fclose(d.out) != 0 || cut) rc = rc ? rc : (fprintf(stderr, "gantry: cannot write %s\n", esc(part)), 1);
    if (!rc && strcmp(hex, raw(listed, "sha256")) != 0) {
        fprintf(stderr, "gantry: %s: sha256 %s, the job listed %s: not saved\n", esc(file_path), hex, str(listed, "sha256"));
        rc = 1;
    }
    if (!rc && rename(part, target) != 0) {
        fprintf(stderr, "gantry: cannot rename %s to %s: %s\n", esc(part), esc(target), strerror(errno));
        rc = 1;
    }
    if (rc) {
        unlink(part);
        return rc;
    }
    if (as_json) {
        json_t *o =
            json_pack("{s:s, s:s, s:I, s:s}", "path", file_path, "saved", target, "bytes", (json_int_t)d.bytes, "sha256", hex);
        print_json(o);
        json_decref(o);
    } else {
        printf("%s: %llu bytes, sha256 %s (as listed)\n", esc(target), d.bytes, hex);
    }
    return 0;
}

static int cmd_outputs(int argc, char **argv)
{
    const char *id = argv[1], *want = argc >= 3 ? argv[2] : NULL, *target = argc == 5 ? argv[4] : NULL;
    char path[1024];
    job_path(path, sizeof path, id, "/outputs");
    json_t *r;
    if (get(path, &r)) return 1;
    const json_t *listed = NULL, *f;
    size_t i;
    json_array_foreach(json_object_get(r, "files"), i, f)
    {
        if (want && !strcmp(raw(f, "path"), want)) listed = f;
    }
    int rc = 0;
    if (!want && as_json) {
        print_json(r);
    } else if (!want) {
        table t;
        table_init(&t, ">BYTES", "SHA256", "PATH", NULL);
        json_array_foreach(json_object_get(r, "files"), i, f)
        {
            char bytes[24];
            snprintf(bytes, sizeof bytes, "%lld", (long long)json_integer_value(json_object_get(f, "bytes")));
            table_row(&t, bytes, raw(f, "sha256"), raw(f, "path"));
        }
        table_print(&t);
    } else if (!listed) {
        fprintf(stderr, "gantry: job %s has no output file %s (gantry outputs %s lists them)\n", esc(id), esc(want), esc(id));
        rc = 1;
    } else if (target) {
        rc = save_output(id, want, listed, target);
    } else if (isatty(1)) { /* a file's bytes would drive the terminal */
        fprintf(stderr, "gantry: not writing %s to a terminal: use -o FILE, or a pipe\n", esc(want));
        rc = 2;
    } else {
        output_path(path, sizeof path, id, want);
        download d = {stdout, NULL, 0};
        bool cut;
        rc = get_streamed(path, 0, to_file, &d, &cut);
        if (cut || fflush(stdout) != 0) rc = rc ? rc : (fprintf(stderr, "gantry: cannot write to stdout\n"), 1);
    }
    json_decref(r);
    return rc;
}

/* ---- a search's trials ---- */

/* a value for a cell (a new string): integers whole, other numbers to 6 significant digits, strings as
 * they are, anything else as JSON; NULL (shown "-") for none */
static char *value_text(const json_t *v)
{
    if (json_is_integer(v)) return xasprintf("%lld", (long long)json_integer_value(v));
    if (json_is_real(v)) return xasprintf("%.6g", json_real_value(v));
    if (json_is_string(v)) return xstrdup(json_string_value(v));
    if (!v || json_is_null(v)) return NULL;
    return jsonfmt_dumps(v, JSON_ENCODE_ANY | JSON_COMPACT);
}

/* a header from a name: upper-cased, as the trial's variable is (">" first: right-aligned) */
static char *header_of(const char *name, bool right)
{
    char *h = xasprintf("%s%s", right ? ">" : "", name);
    for (char *p = h; *p; p++)
        if (*p >= 'a' && *p <= 'z') *p = (char)(*p - 'a' + 'A');
    return h;
}

static int by_string(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* trials ID: GET /v1/jobs/ID/trials as a table, a row per trial, the best marked */
static int cmd_trials(int argc, char **argv)
{
    (void)argc; /* one word */
    char path[512];
    job_path(path, sizeof path, argv[1], "/trials");
    json_t *r;
    if (get(path, &r)) return 1;
    if (as_json) {
        print_json(r);
        json_decref(r);
        return 0;
    }
    const json_t *trials = json_object_get(r, "trials"), *t, *v;
    const json_t *best = json_object_get(r, "best");
    size_t i;
    /* the parameters: every name any trial has, in name order (the search's own order) */
    const char *names[TABLE_MAX_COLS];
    size_t nnames = 0;
    const char *k;
    json_array_foreach(trials, i, t)
    {
        json_object_foreach(json_object_get(t, "params"), k, v)
        {
            size_t j = 0;
            while (j < nnames && strcmp(names[j], k))
                j++;
            if (j == nnames && nnames < TABLE_MAX_COLS - 7) names[nnames++] = k;
        }
    }
    qsort(names, nnames, sizeof names[0], by_string);
    /* the search: algorithm, metric and mode, rungs, trials started, the best */
    char rungs[256] = "";
    size_t n = 0;
    json_array_foreach(json_object_get(r, "rungs"), i, v)
    {
        if (n < sizeof rungs) n += (size_t)snprintf(rungs + n, sizeof rungs - n, "%s%g", i ? ", " : "", json_number_value(v));
    }
    bool pause = json_is_true(json_object_get(r, "pause"));
    printf("%s: %s%s, %s (%s)", str(r, "job_id"), str(r, "algorithm"), pause ? " (pause and promote)" : "", str(r, "metric"),
           str(r, "mode"));
    if (n) printf(", rungs at %s %s", str(r, "resource"), esc(rungs));
    printf("; %zu of %lld trials started", json_array_size(trials),
           (long long)json_integer_value(json_object_get(r, "max_trials")));
    if (json_is_integer(best))
        printf("; best: trial %lld (*)\n\n", (long long)json_integer_value(best));
    else
        printf("; no trial has reported %s yet\n\n", str(r, "metric"));
    table tb;
    table_init(&tb, ">TRIAL", "STATE", NULL);
    char *heads[TABLE_MAX_COLS];
    int nheads = 0;
    for (size_t p = 0; p < nnames; p++)
        table_col(&tb, heads[nheads++] = header_of(names[p], false));
    table_col(&tb, heads[nheads++] = header_of(raw(r, "metric"), true));
    table_col(&tb, heads[nheads++] = header_of(raw(r, "resource"), true));
    table_col(&tb, "RUNGS");
    table_col(&tb, ">FAILURES");
    table_col(&tb, "JOB");
    json_array_foreach(trials, i, t)
    {
        char *cells[TABLE_MAX_COLS] = {0};
        int c = 0;
        long long idx = json_integer_value(json_object_get(t, "trial"));
        cells[c++] = xasprintf("%s%lld", json_is_integer(best) && json_integer_value(best) == idx ? "*" : "", idx);
        cells[c++] = xstrdup(raw(t, "state"));
        for (size_t p = 0; p < nnames; p++)
            cells[c++] = value_text(json_object_get(json_object_get(t, "params"), names[p]));
        const json_t *last = json_object_get(t, "last");
        cells[c++] = value_text(json_object_get(last, "value"));
        cells[c++] = value_text(json_object_get(last, "resource"));
        /* each rung decision: "r0 ok r1 stop", with pause "r0 up r1 paused" (the values: gantry --json trials) */
        char dec[512] = "";
        size_t dn = 0;
        json_array_foreach(json_object_get(t, "rungs"), n, v)
        {
            if (dn < sizeof dec)
                dn += (size_t)snprintf(dec + dn, sizeof dec - dn, "%sr%lld %s", n ? " " : "",
                                       (long long)json_integer_value(json_object_get(v, "rung")),
                                       json_is_true(json_object_get(v, "continued")) ? (pause ? "up" : "ok")
                                       : pause                                       ? "paused"
                                                                                     : "stop");
        }
        cells[c++] = xstrdup(dec);
        cells[c++] = xasprintf("%lld", (long long)json_integer_value(json_object_get(t, "failures")));
        cells[c++] = xstrdup(raw(t, "job_id"));
        table_row_cells(&tb, (const char *const *)cells);
        for (int x = 0; x < c; x++)
            free(cells[x]);
    }
    table_print(&tb);
    for (int x = 0; x < nheads; x++)
        free(heads[x]);
    json_decref(r);
    return 0;
}

/* what a worker runs, for people: a job id, another tenant's work, or "-" (as sent: the table escapes it) */
static const char *running_of(const json_t *w)
{
    const json_t *r = json_object_get(w, "running");
    if (json_is_string(r)) return json_string_value(r);
    if (!json_is_object(r)) return "-";
    const char *job = json_string_value(json_object_get(r, "job_id"));
    return job ? job : "(other tenant)";
}

/* workers, models, tenants: GET /v1/COMMAND, a table of its COMMAND array */
static int cmd_table(int argc, char **argv)
{
    (void)argc; /* no words */
    const char *key = argv[0];
    char path[64];
    snprintf(path, sizeof path, "/v1/%s", key);
    json_t *r;
    if (get(path, &r)) return 1;
    if (as_json) {
        print_json(r);
        json_decref(r);
        return 0;
    }
    size_t i;
    json_t *x;
    table t;
    if (!strcmp(key, "workers")) {
        table_init(&t, "ID", "KIND", "STATE", "RUNNING", "LABELS", NULL);
        json_array_foreach(json_object_get(r, key), i, x)
        {
            char *labels = json_dumps(json_object_get(x, "labels"), JSON_COMPACT | JSON_ENCODE_ANY);
            table_row(&t, raw(x, "id"), raw(x, "kind"), raw(x, "state"), running_of(x), labels);
            free(labels);
        }
    } else if (!strcmp(key, "models")) {
        table_init(&t, "NAME", ">LATEST", "UPDATED", NULL);
        json_array_foreach(json_object_get(r, key), i, x)
        {
            char latest[24];
            snprintf(latest, sizeof latest, "%lld", (long long)json_integer_value(json_object_get(x, "latest_version")));
            table_row(&t, raw(x, "name"), latest, raw(x, "updated_at"));
        }
    } else {
        table_init(&t, "ID", "NAME", ">WEIGHT", "CREATED", NULL);
        json_array_foreach(json_object_get(r, key), i, x)
        {
            char weight[32];
            snprintf(weight, sizeof weight, "%g", json_number_value(json_object_get(x, "weight")));
            table_row(&t, raw(x, "id"), raw(x, "name"), weight, raw(x, "created_at"));
        }
    }
    table_print(&t);
    json_decref(r);
    return 0;
}

/* ---- the model registry: upload, show, alias, unalias ---- */

/* /v1/models/NAME followed by suffix, the name escaped for a URL */
static void model_path(char *out, size_t len, const char *name, const char *suffix)
{
    api_path(out, len, "/v1/models/", name, suffix);
}

/* the SHA-256 (hex) and size of a local file; -1 with the reason printed */
static int file_sha256(const char *file, char hex[65], unsigned long long *size)
{
    FILE *f = fopen(file, "rb");
    if (!f) {
        fprintf(stderr, "gantry: cannot read %s: %s\n", esc(file), strerror(errno));
        return -1;
    }
    EVP_MD_CTX *sha = EVP_MD_CTX_new();
    EVP_DigestInit_ex(sha, EVP_sha256(), NULL);
    char chunk[1 << 16];
    size_t k;
    *size = 0;
    while ((k = fread(chunk, 1, sizeof chunk, f)) > 0)
        EVP_DigestUpdate(sha, chunk, k), *size += k;
    int failed = ferror(f);
    fclose(f);
    unsigned char md[32];
    EVP_DigestFinal_ex(sha, md, NULL);
    EVP_MD_CTX_free(sha);
    for (int i = 0; i < 32; i++)
        snprintf(hex + 2 * i, 3, "%02x", md[i]);
    if (failed) fprintf(stderr, "gantry: cannot read %s\n", esc(file));
    return failed ? -1 : 0;
}

/* a whole small file (the metadata), NUL-terminated; NULL with the reason printed */
static char *read_small(const char *file, size_t *len)
{
    FILE *f = fopen(file, "rb");
    buf b = {0};
    char chunk[4096];
    size_t k;
    if (!f) {
        fprintf(stderr, "gantry: cannot read %s: %s\n", esc(file), strerror(errno));
        return NULL;
    }
    while ((k = fread(chunk, 1, sizeof chunk, f)) > 0 && b.n < 1 << 20)
        collect(chunk, 1, k, &b);
    fclose(f);
    *len = b.n;
    return b.p ? b.p : xstrdup("");
}

/* models upload NAME FILE --metadata META.json: multipart (parts metadata and file), then the
 * server's SHA-256 compared with the local file's */
static int model_upload(const char *name, const char *file, const char *meta_file)
{
    char hex[65], path[1024];
    unsigned long long size;
    size_t meta_len;
    if (file_sha256(file, hex, &size)) return 1;
    char *meta = read_small(meta_file, &meta_len);
    if (!meta) return 1;
    CURL *h = curl_easy_init();
    curl_mime *form = curl_mime_init(h);
    curl_mimepart *part = curl_mime_addpart(form);
    curl_mime_name(part, "metadata");
    curl_mime_data(part, meta, meta_len);
    curl_mime_type(part, "application/json");
    part = curl_mime_addpart(form);
    curl_mime_name(part, "file");
    int rc = curl_mime_filedata(part, file) != CURLE_OK; /* streamed from the file */
    curl_mime_type(part, "application/octet-stream");
    free(meta);
    model_path(path, sizeof path, name, "/versions");
    json_t *r = NULL;
    long st = rc ? -1 : perform(h, "POST", path, NULL, form, 0, &r);
    curl_mime_free(form);
    curl_easy_cleanup(h);
    if (rc) fprintf(stderr, "gantry: cannot read %s\n", esc(file));
    if (st != 201) {
        rc = st < 0 ? 1 : api_error(st, r);
    } else if (strcmp(raw(r, "sha256"), hex) != 0 || json_integer_value(json_object_get(r, "size_bytes")) != (json_int_t)size) {
        fprintf(stderr, "gantry: %s v%lld: the server recorded sha256 %s and %lld bytes, the local file has %s and %llu bytes\n",
                esc(name), (long long)json_integer_value(json_object_get(r, "version")), str(r, "sha256"),
                (long long)json_integer_value(json_object_get(r, "size_bytes")), hex, size);
        rc = 1;
    } else if (as_json) {
        print_json(r);
    } else {
        printf("%s version %lld: %lld bytes, sha256 %s (matches %s)\n", str(r, "name"),
               (long long)json_integer_value(json_object_get(r, "version")),
               (long long)json_integer_value(json_object_get(r, "size_bytes")), str(r, "sha256"), esc(file));
    }
    json_decref(r);
    return rc;
}

/* models show NAME: its aliases, then a row per version */
static int model_show(const char *name)
{
    char path[1024];
    model_path(path, sizeof path, name, "");
    json_t *r;
    if (get(path, &r)) return 1;
    if (as_json) {
        print_json(r);
        json_decref(r);
        return 0;
    }
    printf("model    %s\naliases ", str(r, "name"));
    const char *alias;
    json_t *x;
    size_t i = 0;
    json_object_foreach(json_object_get(r, "aliases"), alias, x)
    {
        printf("%s %s -> v%lld", i++ ? "," : "", esc(alias), (long long)json_integer_value(x));
    }
    printf("%s\n\n", i ? "" : " -");
    table t;
    table_init(&t, ">VERSION", "FORMAT", ">SIZE", "SHA256", "CREATED", "DESCRIPTION", NULL);
    t.most[3] = 12; /* a prefix: gantry --json models show NAME has the whole sha256 */
    json_array_foreach(json_object_get(r, "versions"), i, x)
    {
        char version[24], size[24] = "-";
        snprintf(version, sizeof version, "%lld", (long long)json_integer_value(json_object_get(x, "version")));
        if (json_is_integer(json_object_get(x, "size_bytes")))
            snprintf(size, sizeof size, "%lld", (long long)json_integer_value(json_object_get(x, "size_bytes")));
        table_row(&t, version, raw(x, "format"), size, raw(x, "sha256"), raw(x, "created_at"), raw(x, "description"));
    }
    table_print(&t);
    json_decref(r);
    return 0;
}

/* models alias NAME ALIAS VERSION: previous -> new, and the serving jobs that roll */
static int model_alias(const char *name, const char *alias, const char *version)
{
    char *end;
    errno = 0;
    long long v = strtoll(version, &end, 10);
    if (errno || end == version || *end || v < 1) {
        fprintf(stderr, "gantry: VERSION is a version number of the model (gantry models show %s lists them), not '%s'\n",
                esc(name), esc(version));
        return usage_of("models");
    }
    char path[1024], suffix[600];
    api_path(suffix, sizeof suffix, "/aliases/", alias, "");
    model_path(path, sizeof path, name, suffix);
    json_t *b = json_pack("{s:I}", "version", (json_int_t)v), *r;
    char *body = json_dumps(b, JSON_COMPACT);
    json_decref(b);
    long st = request("PUT", path, body, &r);
    free(body);
    int rc = 0;
    if (st != 200) {
        rc = st < 0 ? 1 : api_error(st, r);
    } else if (as_json) {
        print_json(r);
    } else {
        const json_t *prev = json_object_get(r, "previous"), *rolled = json_object_get(r, "rolled"), *j;
        char was[32] = "(unset)";
        if (json_is_integer(prev)) snprintf(was, sizeof was, "v%lld", (long long)json_integer_value(prev));
        printf("%s@%s: %s -> v%lld\n", str(r, "name"), str(r, "alias"), was,
               (long long)json_integer_value(json_object_get(r, "version")));
        size_t i;
        printf("rolled:");
        json_array_foreach(rolled, i, j) printf(" %s", esc(json_string_value(j)));
        printf("%s\n", json_array_size(rolled) ? "" : " no serving job uses the alias");
    }
    json_decref(r);
    return rc;
}

/* models unalias NAME ALIAS */
static int model_unalias(const char *name, const char *alias)
{
    char path[1024], suffix[600];
    api_path(suffix, sizeof suffix, "/aliases/", alias, "");
    model_path(path, sizeof path, name, suffix);
    json_t *r;
    long st = request("DELETE", path, NULL, &r);
    int rc = 0;
    if (st != 200)
        rc = st < 0 ? 1 : api_error(st, r);
    else if (as_json)
        print_json(r);
    else
        printf("%s@%s: removed\n", str(r, "name"), str(r, "alias"));
    json_decref(r);
    return rc;
}

/* models [show NAME | upload NAME FILE --metadata META | alias NAME ALIAS VERSION | unalias NAME ALIAS]
 * (arity_ok has checked the words) */
static int cmd_models(int argc, char **argv)
{
    if (argc == 1) return cmd_table(argc, argv);
    const char *sub = argv[1];
    if (!strcmp(sub, "show")) return model_show(argv[2]);
    if (!strcmp(sub, "upload")) return model_upload(argv[2], argv[3], argv[5]);
    if (!strcmp(sub, "alias")) return model_alias(argv[2], argv[3], argv[4]);
    return model_unalias(argv[2], argv[3]);
}

/* tokens create TENANT_ID --role ROLE [--name NAME] */
static int cmd_tokens(int argc, char **argv)
{
    const char *tenant = argv[2], *role = NULL, *name = NULL;
    for (int i = 3; i < argc; i += 2) {
        if (i + 1 >= argc)
            return usage_of("tokens");
        else if (!strcmp(argv[i], "--role"))
            role = argv[i + 1];
        else if (!strcmp(argv[i], "--name"))
            name = argv[i + 1];
        else
            return usage_of("tokens");
    }
    if (!role) return usage_of("tokens");
    json_t *b = json_pack("{s:s}", "role", role);
    if (name) json_object_set_new(b, "name", json_string(name));
    char *body = json_dumps(b, JSON_COMPACT), path[256];
    json_decref(b);
    api_path(path, sizeof path, "/v1/tenants/", tenant, "/tokens");
    json_t *r;
    long st = request("POST", path, body, &r);
    free(body);
    int rc = 0;
    if (st != 201)
        rc = st < 0 ? 1 : api_error(st, r);
    else if (as_json)
        print_json(r);
    else
        printf("%s\n(shown once: keep it)\n", str(r, "token"));
    json_decref(r);
    return rc;
}

/* whether a command has the words it takes (args[0] is the command, n the number of words) */
static bool arity_ok(const char *cmd, int n, char **args)
{
    if (!strcmp(cmd, "login")) return true;
    if (!strcmp(cmd, "list")) return n % 2 == 1; /* --flag value pairs */
    if (!strcmp(cmd, "submit") || !strcmp(cmd, "get") || !strcmp(cmd, "cancel") || !strcmp(cmd, "follow") || !strcmp(cmd, "trials"))
        return n == 2;
    if (!strcmp(cmd, "logs")) return n >= 2; /* its options are checked by cmd_logs */
    if (!strcmp(cmd, "outputs")) return n == 2 || n == 3 || (n == 5 && !strcmp(args[3], "-o"));
    if (!strcmp(cmd, "tokens")) return n >= 3 && !strcmp(args[1], "create");
    if (!strcmp(cmd, "models") && n > 1) {
        const char *sub = args[1];
        return (!strcmp(sub, "show") && n == 3) || (!strcmp(sub, "upload") && n == 6 && !strcmp(args[4], "--metadata")) ||
               (!strcmp(sub, "alias") && n == 5) || (!strcmp(sub, "unalias") && n == 4);
    }
    return n == 1;
}

static bool is_help(const char *a)
{
    return !strcmp(a, "-h") || !strcmp(a, "--help");
}

/* the command line checked before any config or token is needed: 0/2 when answered here (help,
 * version, wrong usage), -1 to go on with *run the command to run */
static int before_config(int n, char **args, const command **run)
{
    if (n < 1) return usage();
    const char *cmd = args[0];
    if (is_help(cmd)) {
        print_usage(stdout);
        return 0;
    }
    if (!strcmp(cmd, "--version") || !strcmp(cmd, "-V")) {
        printf("gantry %s\n", GANTRY_VERSION);
        return 0;
    }
    if (!strcmp(cmd, "help")) {
        if (n == 1) {
            print_usage(stdout);
            return 0;
        }
        const command *c = find_command(args[1]);
        if (!c) {
            fprintf(stderr, "gantry: no command '%s'\n", esc(args[1]));
            return usage();
        }
        print_command_help(stdout, c);
        return 0;
    }
    const command *c = find_command(cmd);
    if (!c) {
        fprintf(stderr, "gantry: unknown command '%s'\n\n", esc(cmd));
        return usage();
    }
    for (int i = 1; i < n; i++) {
        if (is_help(args[i])) {
            print_command_help(stdout, c);
            return 0;
        }
    }
    *run = c;
    return arity_ok(cmd, n, args) ? -1 : usage_of(cmd);
}

int main(int argc, char **argv)
{
    json_set_alloc_funcs(xmalloc, free); /* jansson never returns NULL for memory (common/alloc.h) */
    char *args[64];
    int n = 0;
    for (int i = 1; i < argc && n < 63; i++) { /* --json may come anywhere */
        if (!strcmp(argv[i], "--json"))
            as_json = true;
        else
            args[n++] = argv[i];
    }
    atexit(ring_free);
    const command *c = NULL;
    int early = before_config(n, args, &c);
    if (early >= 0) return early;
    curl_global_init(CURL_GLOBAL_DEFAULT);
    if (load_config()) return 1;
    const char *eu = getenv("GANTRY_URL"), *et = getenv("GANTRY_TOKEN");
    if (eu && *eu) set_url(eu);
    if (et && *et) snprintf(token, sizeof token, "%s", et);
    if (c->run != cmd_login && !token[0]) { /* login checks the token it is given */
        fprintf(stderr, "gantry: no token: set GANTRY_TOKEN or run gantry login\n");
        return 1;
    }
    return c->run(n, args);
}
