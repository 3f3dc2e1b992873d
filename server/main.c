/* gantry-server: the REST API, the dashboard, SQLite's only writer. */
#include "common/config.h"
#include "common/alloc.h"
#include "common/log.h"
#include "common/paths.h"
#include "wire/redis_auth.h"
#include "server/auth.h"
#include "server/bus.h"
#include "server/infer.h"
#include "server/db.h"
#include "server/gate.h"
#include "server/http.h"
#include "server/logs.h"
#include "server/httpstats.h"
#include "server/ratelimit.h"
#include "server/routes.h"
#include "server/server.h"
#include "server/sse.h"

#include <errno.h>
#include <openssl/ssl.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static config_opt opts[] = {
    CONFIG_OPT("listen", "HTTP address host:port", "127.0.0.1:8080"),
    CONFIG_OPT("redis", "Redis address host:port", "127.0.0.1:6380"),
    REDIS_AUTH_OPTS, /* redis-user, redis-password-file, redis-password (wire/redis_auth.h) */
    CONFIG_OPT("state",
               "state directory, made mode 700 (database, admin token; default: /var/lib/gantry as root, else "
               "$XDG_STATE_HOME/gantry or ~/.local/state/gantry)",
               ""),
    CONFIG_OPT("db", "SQLite database file (default: STATE/gantry.db)", ""),
    CONFIG_OPT("web", "directory of the dashboard's static files", GANTRY_SOURCE_DIR "/web"),
    CONFIG_OPT("migrations", "directory of NNNN_name.sql migrations", GANTRY_SOURCE_DIR "/migrations"),
    CONFIG_OPT("admin-token", "bootstrap admin token (default: $GANTRY_ADMIN_TOKEN, else STATE/admin.token, else generated)", ""),
    CONFIG_OPT("body-limit", "largest JSON body in bytes", "1048576"),
    CONFIG_OPT("placement-body-limit", "largest placement job submission in bytes", "33554432"),
    CONFIG_OPT("infer-body-limit", "largest prediction request (POST /v2/models/{name}/infer) in bytes", "20971520"),
    CONFIG_OPT("model-upload-limit", "largest model upload (POST /v1/models/{name}/versions) in bytes", "536870912"),
    CONFIG_OPT("model-store",
               "directory of uploaded model files (default: STATE/models); replicas read them, so workers on other "
               "hosts need it on a shared file system",
               ""),
    CONFIG_OPT("json-max-depth", "deepest JSON nesting accepted", "64"),
    CONFIG_OPT("body-memory", "bytes of request bodies the server holds at once; over it, 503 with Retry-After", "268435456"),
    CONFIG_OPT("token-body-memory", "bytes of request bodies one token may have in flight at once; over it, 503", "67108864"),
    CONFIG_OPT("tls-cert", "PEM certificate chain: serve HTTPS (with tls-key)", ""),
    CONFIG_OPT("tls-key", "PEM private key of tls-cert", ""),
    CONFIG_OPT("rate-limit", "requests per second per token on average (0: no limit)", "200"),
    CONFIG_OPT("rate-burst", "requests a token may send at once above the average", "400"),
    CONFIG_OPT("infer-rate-limit",
               "predictions per second per token on average (0: no limit; the queue_limit of each "
               "inference job sheds load too)",
               "20000"),
    CONFIG_OPT("infer-rate-burst", "predictions a token may send at once above the average", "40000"),
    CONFIG_OPT("metrics-token-file",
               "file holding a token that GET /metrics accepts as a Bearer token for every series (mode 600; "
               "Prometheus's credentials_file); without it only an admin token sees tenants and jobs",
               ""),
    CONFIG_OPT("infer-stats-jobs",
               "inference jobs whose request counters the server keeps (/metrics); beyond, the oldest without a request "
               "in flight is forgotten",
               "1024"),
    CONFIG_OPT("consumer", "this server's consumer name in the gantry:events group", "server"),
    CONFIG_OPT("log-level", "debug, info, warn or error", "info"),
};
#define NOPTS (sizeof(opts) / sizeof(opts[0]))
#define OPT(name) config_get(opts, NOPTS, name)

static server srv;
static gate *body_gate;
static uv_signal_t sigterm, sigint;

static int split_hostport(const char *s, char *host, size_t hlen, int *port)
{
    const char *colon = strrchr(s, ':');
    if (!colon || colon == s || (size_t)(colon - s) >= hlen) return -1;
    memcpy(host, s, (size_t)(colon - s));
    host[colon - s] = '\0';
    *port = atoi(colon + 1);
    return *port > 0 && *port < 65536 ? 0 : -1;
}

static int admin_token(const char *state)
{
    char secret[256] = "", path[4096];
    const char *preset = OPT("admin-token")[0] ? OPT("admin-token") : getenv("GANTRY_ADMIN_TOKEN");
    snprintf(path, sizeof(path), "%s/admin.token", state);
    if (preset && *preset) {
        snprintf(secret, sizeof(secret), "%s", preset);
    } else {
        FILE *f = fopen(path, "r");
        if (f) {
            if (fchmod(fileno(f), 0600) != 0) log_warn("cannot make %s private (chmod 600): %s", path, strerror(errno));
            if (!fgets(secret, sizeof(secret), f)) secret[0] = '\0';
            fclose(f);
            secret[strcspn(secret, "\r\n")] = '\0';
        }
    }
    if (!secret[0]) {
        if (auth_new_secret(secret) != 0) return -1;
        int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        if (fd < 0 || write(fd, secret, strlen(secret)) < 0 || write(fd, "\n", 1) < 0) {
            log_error("cannot write %s: %s", path, strerror(errno));
            if (fd >= 0) close(fd);
            return -1;
        }
        close(fd);
        log_info("generated the bootstrap admin token into %s", path);
    }
    if (strlen(secret) < 16) {
        log_error("the admin token must be at least 16 characters");
        return -1;
    }
    return auth_ensure_admin(srv.db, secret);
}

static void on_accept(uv_stream_t *listener, int status)
{
    if (status != 0) return;
    uv_tcp_t *conn = xmalloc(sizeof(*conn));
    uv_tcp_init(listener->loop, conn);
    if (uv_accept(listener, (uv_stream_t *)conn) != 0) {
        uv_close((uv_handle_t *)conn, (uv_close_cb)free);
        return;
    }
    uv_tcp_nodelay(conn, 1);
    h2o_socket_t *sock = h2o_uv_socket_create((uv_stream_t *)conn, (uv_close_cb)free);
    gate_attach(body_gate, sock);
    h2o_accept(&srv.accept, sock);
}

static void on_signal(uv_signal_t *h, int signum)
{
    (void)h;
    log_info("signal %d: stopping", signum);
    srv.stopping = true;
    uv_close((uv_handle_t *)&srv.listener, NULL);
    store_close(srv.store);
    bus_close(srv.bus);
    infer_close(srv.infer);
    logs_close(srv.logs);
    sse_close(srv.sse);
    uv_signal_stop(&sigterm);
    uv_signal_stop(&sigint);
    uv_stop(srv.loop);
}

/* Every response: a strict Content-Security-Policy (the dashboard has no inline script and talks
 * to its own origin only), no MIME sniffing, no framing, no referrer. */
static void security_headers(h2o_pathconf_t *conf)
{
    static h2o_iovec_t names[] = {{H2O_STRLIT("content-security-policy")},
                                  {H2O_STRLIT("x-content-type-options")},
                                  {H2O_STRLIT("x-frame-options")},
                                  {H2O_STRLIT("referrer-policy")}};
    static h2o_headers_command_t cmds[] = {
        {H2O_HEADERS_CMD_SET,
         &names[0],
         {H2O_STRLIT("default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
                     "object-src 'none'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'")}},
        {H2O_HEADERS_CMD_SET, &names[1], {H2O_STRLIT("nosniff")}},
        {H2O_HEADERS_CMD_SET, &names[2], {H2O_STRLIT("DENY")}},
        {H2O_HEADERS_CMD_SET, &names[3], {H2O_STRLIT("no-referrer")}},
        {H2O_HEADERS_CMD_NULL, NULL, {NULL, 0}}};
    h2o_headers_register(conf, cmds);
}

/* --metrics-token-file: the Prometheus scrape token (api_ops.c); 0, or -1 logged */
static int load_metrics_token(const char *path)
{
    if (!path[0]) return 0;
    char err[512];
    int len = secret_file_read(path, srv.metrics_token, sizeof(srv.metrics_token), err, sizeof(err));
    if (len < 0) {
        log_error("--metrics-token-file %s", err);
        return -1;
    }
    if (len < 16) {
        log_error("--metrics-token-file %s: the token must be 16 bytes or more (e.g. openssl rand -hex 32)", path);
        return -1;
    }
    srv.metrics_token_len = (size_t)len;
    return 0;
}

/* HTTPS when a certificate and key are configured: TLS 1.2 or newer */
static int setup_tls(const char *cert, const char *key)
{
    if (!cert[0] && !key[0]) return 0;
    if (!cert[0] || !key[0]) {
        log_error("TLS needs both --tls-cert and --tls-key");
        return -1;
    }
    SSL_CTX *ctx = SSL_CTX_new(TLS_server_method());
    SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
    if (SSL_CTX_use_certificate_chain_file(ctx, cert) != 1 || SSL_CTX_use_PrivateKey_file(ctx, key, SSL_FILETYPE_PEM) != 1 ||
        SSL_CTX_check_private_key(ctx) != 1) {
        log_error("cannot load the TLS certificate %s and key %s", cert, key);
        SSL_CTX_free(ctx);
        return -1;
    }
    srv.accept.ssl_ctx = ctx;
    log_info("TLS enabled with %s", cert);
    return 0;
}

static int setup_http(const char *listen)
{
    char host[256];
    int port;
    if (split_hostport(listen, host, sizeof(host), &port) != 0) {
        log_error("--listen must be host:port, got '%s'", listen);
        return -1;
    }
    h2o_config_init(&srv.h2o);
    /* h2o itself refuses (plain-text 413, connection closed) only beyond twice the largest limit;
     * below that the per-route limits answer 413 in JSON */
    size_t largest = srv.placement_body_limit > srv.infer_body_limit ? srv.placement_body_limit : srv.infer_body_limit;
    if (srv.upload_body_limit > largest) largest = srv.upload_body_limit;
    srv.h2o.max_request_entity_size = 2 * largest;
    /* HTTP/1 only: the request gate (gate.h) reads HTTP/1, and h2o's HTTP/2 buffers whole bodies too */
    srv.h2o.http1.upgrade_to_http2 = 0;
    h2o_hostconf_t *host_conf = h2o_config_register_host(&srv.h2o, h2o_iovec_init(H2O_STRLIT("default")), 65535);
    h2o_pathconf_t *root = h2o_config_register_path(host_conf, "/", 0);
    security_headers(root);
    http_register(&srv, root); /* API first: it passes every other path on to the files */
    h2o_file_register(root, srv.web_dir, NULL, NULL, 0);
    h2o_context_init(&srv.h2o_ctx, srv.loop, &srv.h2o);
    srv.accept.ctx = &srv.h2o_ctx;
    srv.accept.hosts = srv.h2o.hosts;

    struct sockaddr_in addr;
    if (uv_ip4_addr(host, port, &addr) != 0) {
        log_error("bad listen address %s", listen);
        return -1;
    }
    uv_tcp_init(srv.loop, &srv.listener);
    int rc = uv_tcp_bind(&srv.listener, (struct sockaddr *)&addr, 0);
    if (rc == 0) rc = uv_listen((uv_stream_t *)&srv.listener, 1024, on_accept);
    if (rc != 0) {
        log_error("cannot listen on %s: %s", listen, uv_strerror(rc));
        return -1;
    }
    log_info("listening on %s://%s", srv.accept.ssl_ctx ? "https" : "http", listen);
    return 0;
}

int main(int argc, char **argv)
{
    json_set_alloc_funcs(xmalloc, free); /* jansson never returns NULL for memory (common/alloc.h) */
    log_init("server");
    int rc = config_parse(argc, argv, opts, NOPTS, "gantry-server",
                          "The gantry REST API and dashboard; the only writer of the SQLite database.");
    if (rc != 0) return rc < 0 ? 2 : 0;
    const char *lvl = OPT("log-level");
    log_set_level(strcmp(lvl, "debug") == 0 ? LOG_DEBUG : strcmp(lvl, "warn") == 0 ? LOG_WARN : LOG_INFO);
    signal(SIGPIPE, SIG_IGN);

    /* Everything the server writes is private (docs/operations.md, "Secrets and the state directory"): the
     * database and its -wal and -shm files, admin.token, uploaded models.  A state directory made by an
     * older version (mode 755) is closed too; files made before are chmod-ed below. */
    umask(077);
    char state_default[PATH_MAX];
    const char *state = OPT("state");
    if (!state[0]) {
        if (path_default_state("", state_default, sizeof(state_default)) != 0) {
            log_error("no --state given and no default state directory (HOME is not set)");
            return 2;
        }
        state = xstrdup(state_default); /* lives as long as the process (srv.state_dir) */
    }
    if (path_mkdirs(state) != 0) {
        log_error("cannot create state directory %s: %s", state, strerror(errno));
        return 1;
    }
    if (chmod(state, 0700) != 0) log_warn("cannot make the state directory %s private (chmod 700): %s", state, strerror(errno));
    char dbpath[4096], err[512];
    snprintf(dbpath, sizeof(dbpath), "%s", OPT("db")[0] ? OPT("db") : "");
    if (!dbpath[0]) snprintf(dbpath, sizeof(dbpath), "%s/gantry.db", state);

    srv.loop = uv_default_loop();
    srv.state_dir = state;
    srv.web_dir = OPT("web");
    srv.body_limit = strtoull(OPT("body-limit"), NULL, 10);
    srv.placement_body_limit = strtoull(OPT("placement-body-limit"), NULL, 10);
    srv.json_max_depth = atoi(OPT("json-max-depth"));
    srv.list_max = 500;
    if (srv.placement_body_limit < srv.body_limit) srv.placement_body_limit = srv.body_limit;
    srv.infer_body_limit = strtoull(OPT("infer-body-limit"), NULL, 10);
    if (srv.infer_body_limit < srv.body_limit) srv.infer_body_limit = srv.body_limit;
    srv.upload_body_limit = strtoull(OPT("model-upload-limit"), NULL, 10);
    if (srv.upload_body_limit < srv.body_limit) srv.upload_body_limit = srv.body_limit;
    static char store_dir[PATH_MAX];
    char want[4096];
    snprintf(want, sizeof(want), "%s", OPT("model-store")[0] ? OPT("model-store") : "");
    if (!want[0]) snprintf(want, sizeof(want), "%s/models", state);
    if ((mkdir(want, 0700) != 0 && errno != EEXIST) || !realpath(want, store_dir)) { /* absolute: replicas open it */
        log_error("cannot create the model store %s: %s", want, strerror(errno));
        return 1;
    }
    srv.model_store = store_dir;

    if (db_open(dbpath, &srv.db, err, sizeof(err)) != 0 || db_migrate(srv.db, OPT("migrations"), err, sizeof(err)) < 0) {
        log_error("%s", err);
        return 1;
    }
    const char *suffixes[] = {"", "-wal", "-shm"};
    for (size_t i = 0; i < sizeof(suffixes) / sizeof(suffixes[0]); i++) {
        char p[4200];
        snprintf(p, sizeof(p), "%s%s", dbpath, suffixes[i]);
        if (chmod(p, 0600) != 0 && errno != ENOENT) log_warn("cannot make %s private (chmod 600): %s", p, strerror(errno));
    }
    if (load_metrics_token(OPT("metrics-token-file")) != 0) return 2;
    if (admin_token(state) != 0) {
        log_error("cannot set up the bootstrap admin token");
        return 1;
    }
    char rhost[256];
    int rport;
    if (split_hostport(OPT("redis"), rhost, sizeof(rhost), &rport) != 0) {
        log_error("--redis must be host:port");
        return 2;
    }
    redis_auth rauth;
    if (redis_auth_from_options(&rauth, OPT("redis-user"), OPT("redis-password"), OPT("redis-password-file")) != 0) return 2;
    srv.store = store_create(srv.loop, srv.db);
    srv.sse = sse_create(srv.loop);
    srv.routes = routes;
    srv.routes_count = routes_count;
    srv.httpstats = httpstats_create(routes, routes_count);
    srv.ratelimit = ratelimit_create(strtod(OPT("rate-limit"), NULL), strtod(OPT("rate-burst"), NULL));
    srv.infer_ratelimit = ratelimit_create(strtod(OPT("infer-rate-limit"), NULL), strtod(OPT("infer-rate-burst"), NULL));
    srv.bus = bus_create(&srv, rhost, rport, &rauth, OPT("consumer"));
    srv.infer = infer_create(&srv, rhost, rport, &rauth, atoi(OPT("infer-stats-jobs")));
    srv.logs = logs_create(&srv);
    body_gate = gate_create(&srv, strtoull(OPT("body-memory"), NULL, 10), strtoull(OPT("token-body-memory"), NULL, 10));
    if (setup_tls(OPT("tls-cert"), OPT("tls-key")) != 0 || setup_http(OPT("listen")) != 0) return 1;

    uv_signal_init(srv.loop, &sigterm);
    uv_signal_init(srv.loop, &sigint);
    uv_signal_start(&sigterm, on_signal, SIGTERM);
    uv_signal_start(&sigint, on_signal, SIGINT);
    log_info("database %s, redis %s, dashboard files %s", dbpath, OPT("redis"), srv.web_dir);
    uv_run(srv.loop, UV_RUN_DEFAULT);
    store_flush(srv.store);
    db_close(srv.db);
    gate_free(body_gate);
    log_info("stopped");
    return 0;
}
