/* gantry - the command-line client of the REST API (libcurl).
 *
 *   gantry login [--url URL] [--token TOKEN | reads it from stdin]
 *   gantry submit FILE|-          gantry list [--state S] [--type T] [--limit N]
 *   gantry get ID                 gantry cancel ID
 *   gantry follow ID              (live events over SSE until the job ends)
 *   gantry workers                gantry models
 *   gantry tenants                gantry tokens create TENANT_ID --role ROLE [--name NAME]   (admins)
 *
 * Tables for people; --json anywhere prints the API's JSON for scripts.  The
 * server and token come from GANTRY_URL / GANTRY_TOKEN, else from the config
 * file ($GANTRY_CONFIG, default ~/.config/gantry/config: {"url", "token"}),
 * which login writes with mode 0600 and which is refused when others can read
 * it.  Errors print the API's message and field; exit status 1 (2 for usage). */
#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define DEFAULT_URL "http://127.0.0.1:8080"

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
    char *p = realloc(b->p, b->n + k + 1);
    if (!p) return 0;
    memcpy(p + b->n, data, k);
    b->p = p, b->n += k, p[b->n] = '\0';
    return k;
}

static int usage(void)
{
    fprintf(stderr, "usage: gantry [--json] login [--url URL] [--token TOKEN]\n"
                    "       gantry [--json] submit FILE|- | list [--state S] [--type T] [--limit N] | get ID | cancel ID\n"
                    "       gantry [--json] follow ID | workers | models | tenants\n"
                    "       gantry [--json] tokens create TENANT_ID --role admin|member|viewer [--name NAME]\n");
    return 2;
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

/* an HTTP request; *out the parsed JSON body (may be NULL); returns the status, or -1 with a message printed */
static long request(const char *method, const char *path, const char *body, json_t **out)
{
    CURL *h = curl_easy_init();
    char full[2048], auth[600];
    buf b = {0};
    snprintf(full, sizeof full, "%s%s", url, path);
    snprintf(auth, sizeof auth, "Authorization: Bearer %s", token);
    struct curl_slist *hd = curl_slist_append(NULL, auth);
    hd = curl_slist_append(hd, "Content-Type: application/json");
    curl_easy_setopt(h, CURLOPT_URL, full);
    curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, method);
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, hd);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, collect);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, &b);
    curl_easy_setopt(h, CURLOPT_TIMEOUT, 60L);
    if (body) curl_easy_setopt(h, CURLOPT_POSTFIELDS, body);
    CURLcode rc = curl_easy_perform(h);
    long status = -1;
    if (rc != CURLE_OK)
        fprintf(stderr, "gantry: %s: %s\n", full, curl_easy_strerror(rc));
    else
        curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
    curl_slist_free_all(hd);
    curl_easy_cleanup(h);
    *out = b.p ? json_loads(b.p, 0, NULL) : NULL;
    free(b.p);
    return status;
}

/* prints the API's error; 1 */
static int api_error(long status, const json_t *j)
{
    const json_t *e = json_object_get(j, "error");
    const char *m = json_string_value(json_object_get(e, "message")), *f = json_string_value(json_object_get(e, "field"));
    if (as_json && j) {
        char *s = json_dumps(j, JSON_INDENT(2));
        puts(s ? s : "{}");
        free(s);
    }
    fprintf(stderr, "gantry: HTTP %ld: %s%s%s%s\n", status, m ? m : "(no message)", f ? " (field " : "", f ? f : "", f ? ")" : "");
    return 1;
}

static void print_json(const json_t *j)
{
    char *s = json_dumps(j, JSON_INDENT(2) | JSON_SORT_KEYS);
    puts(s ? s : "null");
    free(s);
}

static const char *str(const json_t *o, const char *k)
{
    const char *s = json_string_value(json_object_get(o, k));
    return s ? s : "-";
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

static int cmd_login(int argc, char **argv)
{
    for (int i = 0; i + 1 < argc; i++) {
        if (!strcmp(argv[i], "--url")) set_url(argv[i + 1]);
        if (!strcmp(argv[i], "--token")) snprintf(token, sizeof token, "%s", argv[i + 1]);
    }
    if (!token[0]) { /* from stdin, so it stays out of the shell history */
        if (isatty(0)) fprintf(stderr, "token: ");
        if (!fgets(token, sizeof token, stdin)) return usage();
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
        printf("logged in to %s as %s of tenant %s; saved in %s (mode 600)\n", url, str(me, "role"),
               str(json_object_get(me, "tenant"), "name"), path);
    json_decref(me);
    return 0;
}

static int cmd_submit(const char *file)
{
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

static int cmd_list(int argc, char **argv)
{
    char path[512] = "/v1/jobs?", *p = path + strlen(path);
    for (int i = 0; i + 1 < argc; i += 2) {
        const char *k = !strcmp(argv[i], "--state")   ? "state"
                        : !strcmp(argv[i], "--type")  ? "type"
                        : !strcmp(argv[i], "--limit") ? "limit"
                                                      : NULL;
        if (!k) return usage();
        char *esc = curl_easy_escape(NULL, argv[i + 1], 0);
        p += snprintf(p, sizeof path - (size_t)(p - path), "%s=%s&", k, esc);
        curl_free(esc);
    }
    json_t *r;
    if (get(path, &r)) return 1;
    if (as_json) {
        print_json(r);
    } else {
        printf("%-24s %-20s %-10s %-10s %8s  %s\n", "ID", "NAME", "TYPE", "STATE", "PROGRESS", "CREATED");
        size_t i;
        json_t *j;
        json_array_foreach(json_object_get(r, "jobs"), i, j)
        {
            json_t *pr = json_object_get(j, "progress");
            char pct[16] = "-";
            if (json_is_number(pr)) snprintf(pct, sizeof pct, "%.0f%%", json_number_value(pr) * 100);
            printf("%-24s %-20.20s %-10s %-10s %8s  %s\n", str(j, "id"), str(j, "name"), str(j, "type"), str(j, "state"), pct,
                   str(j, "created_at"));
        }
        if (json_is_string(json_object_get(r, "next_cursor"))) printf("(more: --limit, or the API's cursor)\n");
    }
    json_decref(r);
    return 0;
}

static int cmd_get(const char *id)
{
    char path[256];
    snprintf(path, sizeof path, "/v1/jobs/%s", id);
    json_t *j;
    if (get(path, &j)) return 1;
    if (as_json) {
        print_json(j);
    } else {
        printf("id        %s\nname      %s\ntype      %s\nstate     %s\npriority  %s\ncreated   %s\nfinished  %s\nworker    %s\n",
               str(j, "id"), str(j, "name"), str(j, "type"), str(j, "state"), str(j, "priority"), str(j, "created_at"),
               str(j, "finished_at"), str(j, "worker"));
        if (json_is_string(json_object_get(j, "error"))) printf("error     %s\n", str(j, "error"));
        const char *k;
        json_t *v;
        json_object_foreach(json_object_get(json_object_get(j, "result"), "metrics"), k, v)
        {
            char *s = json_dumps(v, JSON_ENCODE_ANY | JSON_COMPACT);
            printf("%-9.9s %s\n", k, s ? s : "");
            free(s);
        }
    }
    json_decref(j);
    return 0;
}

static int cmd_cancel(const char *id)
{
    char path[256];
    snprintf(path, sizeof path, "/v1/jobs/%s/cancel", id);
    json_t *r;
    long st = request("POST", path, "{}", &r);
    int rc = 0;
    if (st != 200 && st != 202)
        rc = st < 0 ? 1 : api_error(st, r);
    else if (as_json)
        print_json(r);
    else
        printf("%s: %s\n", id, str(r, "state"));
    json_decref(r);
    return rc;
}

/* follow: the SSE stream, lines parsed as they come; ends when the job reaches a final state */
typedef struct {
    buf line;
    const char *id;
    int done;
} follow_state;

static bool final_state(const char *s)
{
    return !strcmp(s, "succeeded") || !strcmp(s, "failed") || !strcmp(s, "cancelled");
}

static size_t on_sse(char *data, size_t size, size_t nmemb, void *arg)
{
    follow_state *f = arg;
    size_t k = size * nmemb;
    for (size_t i = 0; i < k; i++) {
        if (data[i] != '\n') {
            char c = data[i];
            if (f->line.n < 1 << 20) collect(&c, 1, 1, &f->line);
            continue;
        }
        if (f->line.p && !strncmp(f->line.p, "data: ", 6)) {
            json_t *e = json_loads(f->line.p + 6, 0, NULL);
            if (e && !strcmp(str(e, "job_id"), f->id)) {
                if (as_json) {
                    char *s = json_dumps(e, JSON_COMPACT);
                    puts(s ? s : "{}");
                    free(s);
                } else {
                    json_t *pr = json_object_get(e, "progress");
                    char pct[16] = "";
                    if (json_is_number(pr)) snprintf(pct, sizeof pct, " %3.0f%%", json_number_value(pr) * 100);
                    printf("%-10s%s %s\n", *str(e, "state") && strcmp(str(e, "state"), "-") ? str(e, "state") : "progress", pct,
                           str(e, "reason"));
                }
                fflush(stdout);
                if (final_state(str(e, "state"))) f->done = 1;
            }
            json_decref(e);
        }
        f->line.n = 0;
        if (f->line.p) f->line.p[0] = '\0';
        if (f->done) return 0; /* ends the transfer */
    }
    return k;
}

static int cmd_follow(const char *id)
{
    char path[256];
    snprintf(path, sizeof path, "/v1/jobs/%s", id);
    json_t *j;
    if (get(path, &j)) return 1; /* exists, and ours */
    int already = final_state(str(j, "state"));
    if (already) {
        printf("%s is %s\n", id, str(j, "state"));
        json_decref(j);
        return 0;
    }
    json_decref(j);
    CURL *h = curl_easy_init();
    char full[2048], auth[600];
    snprintf(full, sizeof full, "%s/v1/events", url);
    snprintf(auth, sizeof auth, "Authorization: Bearer %s", token);
    struct curl_slist *hd = curl_slist_append(NULL, auth);
    follow_state f = {{0}, id, 0};
    curl_easy_setopt(h, CURLOPT_URL, full);
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, hd);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_sse);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, &f);
    CURLcode rc = curl_easy_perform(h);
    curl_slist_free_all(hd);
    curl_easy_cleanup(h);
    free(f.line.p);
    if (f.done) return 0;
    fprintf(stderr, "gantry: the event stream ended: %s\n", curl_easy_strerror(rc));
    return 1;
}

static int cmd_table(const char *path, const char *key)
{
    json_t *r;
    if (get(path, &r)) return 1;
    if (as_json) {
        print_json(r);
        json_decref(r);
        return 0;
    }
    size_t i;
    json_t *x;
    if (!strcmp(key, "workers")) {
        printf("%-16s %-6s %-6s %-24s %s\n", "ID", "KIND", "STATE", "RUNNING", "LABELS");
        json_array_foreach(json_object_get(r, key), i, x)
        {
            char *labels = json_dumps(json_object_get(x, "labels"), JSON_COMPACT | JSON_ENCODE_ANY);
            printf("%-16s %-6s %-6s %-24s %s\n", str(x, "id"), str(x, "kind"), str(x, "state"), str(x, "running"),
                   labels ? labels : "-");
            free(labels);
        }
    } else if (!strcmp(key, "models")) {
        printf("%-24s %-8s %s\n", "NAME", "LATEST", "UPDATED");
        json_array_foreach(json_object_get(r, key), i, x)
        {
            printf("%-24s %-8lld %s\n", str(x, "name"), (long long)json_integer_value(json_object_get(x, "latest_version")),
                   str(x, "updated_at"));
        }
    } else {
        printf("%-24s %-20s %-8s %s\n", "ID", "NAME", "WEIGHT", "CREATED");
        json_array_foreach(json_object_get(r, key), i, x)
        {
            printf("%-24s %-20s %-8g %s\n", str(x, "id"), str(x, "name"), json_number_value(json_object_get(x, "weight")),
                   str(x, "created_at"));
        }
    }
    json_decref(r);
    return 0;
}

static int cmd_token_create(int argc, char **argv)
{
    if (argc < 1) return usage();
    const char *tenant = argv[0], *role = NULL, *name = NULL;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--role"))
            role = argv[i + 1];
        else if (!strcmp(argv[i], "--name"))
            name = argv[i + 1];
        else
            return usage();
    }
    if (!role) return usage();
    json_t *b = json_pack("{s:s}", "role", role);
    if (name) json_object_set_new(b, "name", json_string(name));
    char *body = json_dumps(b, JSON_COMPACT), path[256];
    json_decref(b);
    char *esc = curl_easy_escape(NULL, tenant, 0);
    snprintf(path, sizeof path, "/v1/tenants/%s/tokens", esc);
    curl_free(esc);
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

int main(int argc, char **argv)
{
    char *args[64];
    int n = 0;
    for (int i = 1; i < argc && n < 63; i++) { /* --json may come anywhere */
        if (!strcmp(argv[i], "--json"))
            as_json = true;
        else
            args[n++] = argv[i];
    }
    if (n < 1) return usage();
    curl_global_init(CURL_GLOBAL_DEFAULT);
    if (load_config()) return 1;
    const char *eu = getenv("GANTRY_URL"), *et = getenv("GANTRY_TOKEN");
    if (eu && *eu) set_url(eu);
    if (et && *et) snprintf(token, sizeof token, "%s", et);
    const char *cmd = args[0];
    if (!strcmp(cmd, "login")) return cmd_login(n - 1, args + 1);
    if (!token[0]) {
        fprintf(stderr, "gantry: no token: set GANTRY_TOKEN or run gantry login\n");
        return 1;
    }
    if (!strcmp(cmd, "submit") && n == 2) return cmd_submit(args[1]);
    if (!strcmp(cmd, "list")) return cmd_list(n - 1, args + 1);
    if (!strcmp(cmd, "get") && n == 2) return cmd_get(args[1]);
    if (!strcmp(cmd, "cancel") && n == 2) return cmd_cancel(args[1]);
    if (!strcmp(cmd, "follow") && n == 2) return cmd_follow(args[1]);
    if (!strcmp(cmd, "workers") && n == 1) return cmd_table("/v1/workers", "workers");
    if (!strcmp(cmd, "models") && n == 1) return cmd_table("/v1/models", "models");
    if (!strcmp(cmd, "tenants") && n == 1) return cmd_table("/v1/tenants", "tenants");
    if (!strcmp(cmd, "tokens") && n >= 3 && !strcmp(args[1], "create")) return cmd_token_create(n - 2, args + 2);
    return usage();
}
