/* gate.c - the request gate (see gate.h): a second reader of each HTTP/1 byte
 * stream that runs just before h2o's, tracks where each request's head and body
 * are, and refuses a body from its head. */
#include "server/gate.h"
#include "common/alloc.h"
#include "common/log.h"
#include "server/reqauth.h"
#include "server/route.h"

#include <dlfcn.h> /* RTLD_NEXT: the build defines _GNU_SOURCE */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* picohttpparser, the parser h2o itself uses: libh2o exports it but Debian ships no header for it */
struct phr_header {
    const char *name;
    size_t name_len;
    const char *value;
    size_t value_len;
};
int phr_parse_request(const char *buf, size_t len, const char **method, size_t *method_len, const char **path, size_t *path_len,
                      int *minor_version, struct phr_header *headers, size_t *num_headers, size_t last_len);

/* h2o answers 400 itself to a head longer than this (H2O_MAX_REQLEN) */
#define HEAD_MAX 8192
#define MAX_HEADERS 100

typedef struct {
    char id[48];
    uint64_t bytes;
} token_use;

struct gate {
    server *srv;
    uint64_t budget, token_budget;
    uint64_t reserved; /* bodies being received or held by h2o, all connections */
    uint64_t refused;
    token_use *tokens; /* tokens with a body being received now */
    int ntokens, cap;
};

/* G_DISCARD: the body of a refused request that declared its length and did not ask to wait
 * (Expect: 100-continue) for an answer: dropped as it arrives, and the connection goes on */
enum { G_HEAD, G_BODY, G_DISCARD, G_REFUSED, G_OFF };

typedef struct {
    gate *g;
    h2o_socket_cb next; /* h2o's read callback */
    int state;
    bool started; /* h2o's HTTP/1 reader has taken the connection */
    char *head;   /* a head that spans reads, copied (HEAD_MAX bytes) */
    size_t head_len;
    uint64_t body_left; /* G_BODY, G_DISCARD: bytes of the body still to come */
    uint64_t receiving; /* reserved for the body being received */
    uint64_t held;      /* bodies received, still in h2o's buffer */
    char token[48];     /* whose body is being received ("": no token) */
    /* the last token the gate looked up on this connection: http.c reuses it for the same request
     * instead of a second lookup (gate_authorized) */
    char authz[264];
    auth_info auth;
} gate_conn;

gate *gate_create(server *srv, uint64_t budget, uint64_t token_budget)
{
    gate *g = xcalloc(1, sizeof(*g));
    g->srv = srv, g->budget = budget, g->token_budget = token_budget;
    return g;
}

void gate_free(gate *g)
{
    if (!g) return;
    free(g->tokens);
    free(g);
}

/* ---- budgets ---- */

static token_use *token_find(gate *g, const char *id)
{
    for (int i = 0; i < g->ntokens; i++)
        if (strcmp(g->tokens[i].id, id) == 0) return &g->tokens[i];
    return NULL;
}

static void token_add(gate *g, const char *id, uint64_t n)
{
    token_use *t = token_find(g, id);
    if (!t) {
        if (g->ntokens == g->cap) {
            g->cap = g->cap ? 2 * g->cap : 16;
            g->tokens = xrealloc(g->tokens, (size_t)g->cap * sizeof(*g->tokens));
        }
        t = &g->tokens[g->ntokens++];
        snprintf(t->id, sizeof(t->id), "%s", id);
        t->bytes = 0;
    }
    t->bytes += n;
}

static void token_sub(gate *g, const char *id, uint64_t n)
{
    token_use *t = token_find(g, id);
    if (!t) return;
    t->bytes -= n < t->bytes ? n : t->bytes;
    if (t->bytes == 0) *t = g->tokens[--g->ntokens];
}

/* the body being received has arrived: h2o holds it until it has answered the request */
static void body_done(gate_conn *gc)
{
    if (gc->token[0]) token_sub(gc->g, gc->token, gc->receiving);
    gc->token[0] = '\0';
    gc->held += gc->receiving;
    gc->receiving = 0;
}

static void release_held(gate_conn *gc)
{
    gc->g->reserved -= gc->held;
    gc->held = 0;
}

static void on_close(void *data);

/* ---- the decision ---- */

static bool name_is(const struct phr_header *h, const char *name)
{
    size_t n = strlen(name);
    return h->name_len == n && strncasecmp(h->name, name, n) == 0;
}

/* "123" -> 0 and *v; anything else (sign, spaces, overflow) -> -1 */
static int parse_length(const char *s, size_t n, uint64_t *v)
{
    if (n == 0 || n > 18) return -1;
    *v = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9') return -1;
        *v = *v * 10 + (uint64_t)(s[i] - '0');
    }
    return 0;
}

typedef struct {
    auth_info auth; /* whose token, when it was looked up */
    h2o_iovec_t authz;
    bool body;       /* the head declares a body */
    bool chunked;    /* ... of unknown length */
    bool expect;     /* the client waits for 100 Continue before it sends the body */
    uint64_t length; /* its declared length (0 when chunked) */
    int status;      /* 0: let it in */
    char token[48];  /* the token whose body it is ("": none) */
} verdict;

static void decide(gate *g, const char *method, size_t mlen, const char *path, size_t plen, const struct phr_header *h, size_t nh,
                   verdict *v)
{
    memset(v, 0, sizeof(*v));
    bool chunked = false, has_length = false, bad_length = false;
    h2o_iovec_t authz[4];
    int nauthz = 0;
    for (size_t i = 0; i < nh; i++) {
        if (!h[i].name) continue; /* a continuation line */
        if (name_is(&h[i], "content-length")) {
            uint64_t n = 0;
            if (parse_length(h[i].value, h[i].value_len, &n) != 0 || (has_length && n != v->length)) bad_length = true;
            has_length = true, v->length = n;
        } else if (name_is(&h[i], "transfer-encoding")) {
            chunked = true;
        } else if (name_is(&h[i], "expect")) {
            v->expect = true;
        } else if (name_is(&h[i], "authorization") && nauthz < 4) {
            authz[nauthz++] = h2o_iovec_init(h[i].value, h[i].value_len);
        }
    }
    v->body = chunked || (has_length && (bad_length || v->length > 0));
    v->chunked = chunked;
    if (!v->body) return;
    if (bad_length || (chunked && has_length)) {
        v->chunked = true; /* its end is unknown: the connection must end */
        v->status = 400;
        return;
    }

    h2o_mem_pool_t pool;
    h2o_mem_init_pool(&pool);
    size_t query_at, *norm = NULL;
    h2o_iovec_t norm_path = h2o_url_normalize_path(&pool, path, plen, &query_at, &norm);
    h2o_iovec_t params[2];
    char allow[128];
    int ri = route_find(g->srv, h2o_iovec_init(method, mlen), norm_path, params, allow, sizeof(allow));
    h2o_mem_clear_pool(&pool);
    if (ri < 0) {
        v->status = allow[0] ? 405 : route_is_api_path(norm_path) ? 404 : 405;
        return;
    }
    const route *r = &g->srv->routes[ri];
    if (r->role != ROLE_NONE) {
        auth_info info;
        gerr e;
        char msg[64];
        if (!reqauth_bearer(g->srv, authz, nauthz, r->role, &info, &e, msg, sizeof(msg))) {
            v->status = gerr_status(e);
            return;
        }
        snprintf(v->token, sizeof(v->token), "%s", info.token_id);
        v->auth = info;
        if (nauthz == 1) v->authz = authz[0]; /* always so: reqauth_bearer accepts one header only */
    }
    if (chunked) {
        v->status = 411;
        return;
    }
    if (v->length > route_body_limit(g->srv, r)) {
        v->status = 413;
        return;
    }
    token_use *t = v->token[0] ? token_find(g, v->token) : NULL;
    /* one body at a time is always let in (a model upload may exceed a budget, never its route's limit) */
    if ((g->reserved > 0 && g->reserved + v->length > g->budget) || (t && t->bytes > 0 && t->bytes + v->length > g->token_budget))
        v->status = 503;
}

/* renames the body's headers in h2o's copy of the head (same length: h2o parses it later); "-len" when
 * the connection goes on after the answer, "-cls" or "-chunks" when it ends */
static void mark(char *head_in_h2o, const char *head, const struct phr_header *h, size_t nh, int status, bool close)
{
    char len_mark[15], te_mark[18];
    snprintf(len_mark, sizeof(len_mark), "x-gate-%03d-%s", status, close ? "cls" : "len");
    snprintf(te_mark, sizeof(te_mark), "x-gate-%03d-chunks", status);
    for (size_t i = 0; i < nh; i++) {
        if (!h[i].name) continue;
        const char *m = name_is(&h[i], "content-length") ? len_mark : name_is(&h[i], "transfer-encoding") ? te_mark : NULL;
        if (m) memcpy(head_in_h2o + (h[i].name - head), m, h[i].name_len);
    }
}

int gate_mark(h2o_req_t *req, uint64_t *declared, bool *close)
{
    *declared = 0;
    *close = false;
    for (size_t i = 0; i < req->headers.size; i++) {
        const h2o_header_t *h = &req->headers.entries[i];
        const char *n = h->name->base;
        if ((h->name->len != 14 && h->name->len != 17) || strncmp(n, "x-gate-", 7) != 0) continue;
        int status = atoi(n + 7);
        if (h->name->len == 14) parse_length(h->value.base, h->value.len, declared);
        *close = h->name->len == 17 || strncmp(n + 10, "-len", 4) != 0;
        return status >= 400 && status <= 599 ? status : 400;
    }
    return 0;
}

bool gate_authorized(h2o_req_t *req, h2o_iovec_t authz, auth_info *info)
{
    h2o_socket_t *sock = req->conn->callbacks->get_socket ? req->conn->callbacks->get_socket(req->conn) : NULL;
    gate_conn *gc = sock && sock->on_close.cb == on_close ? sock->on_close.data : NULL;
    if (!gc || !gc->authz[0] || authz.len != strlen(gc->authz) || memcmp(authz.base, gc->authz, authz.len) != 0) return false;
    *info = gc->auth;
    return true;
}

/* a complete head: what the gate does with the body that follows */
static void on_head(gate_conn *gc, const char *head, int len, char *head_in_h2o, const char *method, size_t mlen, const char *path,
                    size_t plen, const struct phr_header *h, size_t nh)
{
    (void)len;
    gate *g = gc->g;
    verdict v;
    decide(g, method, mlen, path, plen, h, nh, &v);
    if (!v.body) return;
    if (v.status) {
        bool discard = !v.chunked && !v.expect;
        mark(head_in_h2o, head, h, nh, v.status, !discard);
        g->refused++;
        gc->state = discard ? G_DISCARD : G_REFUSED;
        gc->body_left = v.length;
        log_debug("gate: refused a body of %llu bytes with %d", (unsigned long long)v.length, v.status);
        return;
    }
    g->reserved += v.length;
    if (v.token[0]) {
        token_add(g, v.token, v.length);
        if (v.authz.len > 0 && v.authz.len < sizeof(gc->authz)) {
            memcpy(gc->authz, v.authz.base, v.authz.len);
            gc->authz[v.authz.len] = '\0';
            gc->auth = v.auth;
        }
    }
    snprintf(gc->token, sizeof(gc->token), "%s", v.token);
    gc->receiving = v.length;
    gc->body_left = v.length;
    gc->state = G_BODY;
}

/* the last n bytes of sock->input (at p) are new: follow them through heads and bodies */
static void feed(gate_conn *gc, h2o_socket_t *sock, char *p, size_t n)
{
    while (n > 0) {
        if (gc->state == G_OFF) return;
        if (gc->state == G_REFUSED) { /* nothing after a refused head reaches h2o */
            sock->input->size -= n;
            return;
        }
        if (gc->state == G_DISCARD) { /* drop the bytes from h2o's buffer; what follows them stays */
            size_t k = n < gc->body_left ? n : (size_t)gc->body_left;
            memmove(p, p + k, n - k);
            sock->input->size -= k;
            gc->body_left -= k, n -= k;
            if (gc->body_left == 0) gc->state = G_HEAD;
            continue;
        }
        if (gc->state == G_BODY) {
            size_t k = n < gc->body_left ? n : (size_t)gc->body_left;
            gc->body_left -= k, p += k, n -= k;
            if (gc->body_left == 0) {
                body_done(gc);
                gc->state = G_HEAD;
            }
            continue;
        }
        /* G_HEAD: most heads arrive in one read and are parsed where they lie */
        size_t prev = gc->head_len, len;
        const char *buf;
        if (prev == 0) {
            buf = p, len = n < HEAD_MAX ? n : HEAD_MAX;
        } else {
            size_t k = n < HEAD_MAX - prev ? n : HEAD_MAX - prev;
            memcpy(gc->head + prev, p, k);
            gc->head_len += k;
            buf = gc->head, len = gc->head_len;
        }
        const char *method, *path;
        size_t mlen, plen, nh = MAX_HEADERS;
        int minor;
        struct phr_header h[MAX_HEADERS];
        int r = phr_parse_request(buf, len, &method, &mlen, &path, &plen, &minor, h, &nh, 0);
        if (r == -2 && len < HEAD_MAX) { /* the head goes on in a later read */
            if (prev == 0) {
                if (!gc->head) gc->head = xmalloc(HEAD_MAX);
                memcpy(gc->head, p, n);
                gc->head_len = n;
            }
            return;
        }
        gc->head_len = 0;
        if (r < 0) { /* h2o answers 400 and closes */
            gc->state = G_OFF;
            return;
        }
        size_t used = (size_t)r - prev; /* of this read's bytes */
        on_head(gc, buf, r, p + used - r, method, mlen, path, plen, h, nh);
        p += used, n -= used;
    }
}

/* ---- the seam: the gate's read callback in front of h2o's ---- */

static void on_read(h2o_socket_t *sock, const char *err);

static void on_close(void *data)
{
    gate_conn *gc = data;
    if (gc->token[0]) token_sub(gc->g, gc->token, gc->receiving);
    gc->g->reserved -= gc->receiving + gc->held;
    free(gc->head);
    free(gc);
}

static void on_read(h2o_socket_t *sock, const char *err)
{
    gate_conn *gc = sock->on_close.data;
    if (!err && sock->bytes_read > 0) feed(gc, sock, sock->input->bytes + sock->input->size - sock->bytes_read, sock->bytes_read);
    gc->next(sock, err);
}

void gate_attach(gate *g, h2o_socket_t *sock)
{
    gate_conn *gc = xcalloc(1, sizeof(*gc));
    gc->g = g;
    sock->on_close.cb = on_close;
    sock->on_close.data = gc;
}

typedef void (*read_start_fn)(h2o_socket_t *, h2o_socket_cb);

void h2o_socket_read_start(h2o_socket_t *sock, h2o_socket_cb cb)
{
    static read_start_fn h2o_read_start;
    if (!h2o_read_start) *(void **)&h2o_read_start = dlsym(RTLD_NEXT, "h2o_socket_read_start");
    gate_conn *gc = sock->on_close.cb == on_close ? sock->on_close.data : NULL;
    /* h2o's HTTP/1 reader: the socket's data is its connection, whose first member is the context
     * (a TLS handshake reads with the accept state as data) */
    if (gc && cb != on_read && sock->data && *(h2o_context_t **)sock->data == &gc->g->srv->h2o_ctx) {
        if (!gc->started) { /* bytes that came with the TLS handshake */
            gc->started = true;
            if (sock->input->size) feed(gc, sock, sock->input->bytes, sock->input->size);
        }
        /* h2o reads again after it answered a request (or sent 100 Continue): what it held is gone */
        if (gc->state != G_BODY && gc->state != G_DISCARD) release_held(gc);
        gc->next = cb;
        cb = on_read;
    }
    h2o_read_start(sock, cb);
}
