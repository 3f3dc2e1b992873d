/* infer_link.c - the gateway's connections to the replicas' workers (infer_link.h). */
#include "server/infer_link.h"
#include "common/alloc.h"
#include "common/log.h"
#include "wire/infer_frame.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define READ_ROOM 65536

typedef enum { LK_CONNECTING, LK_READY, LK_CLOSING } lk_state;

typedef struct ilink {
    infer_links *L;
    struct ilink *next;
    uint32_t id;
    lk_state state;
    int outstanding;
    char job_id[48], endpoint[320], token[96];
    uv_tcp_t tcp;
    uv_connect_t creq;
    char *in; /* bytes read, not yet a whole frame */
    size_t in_len, in_cap;
} ilink;

struct infer_links {
    uv_loop_t *loop;
    ilink_reply_fn on_reply;
    ilink_lost_fn on_lost;
    void *arg;
    ilink *links;
    uint32_t next_id;
    unsigned turn;     /* round robin among the links tied for the fewest outstanding */
    int closing, open; /* open: links whose handle is not closed yet */
};

typedef struct {
    uv_write_t w;
    ilink_frame *f;
} wreq;

ilink_frame *ilink_frame_new(const if_head *h, const void *body)
{
    ilink_frame *f = xmalloc(sizeof(*f) + IF_HEAD + h->len);
    f->refs = 1, f->len = IF_HEAD + h->len;
    if_head_encode((unsigned char *)f->data, h);
    if (h->len) memcpy(f->data + IF_HEAD, body, h->len);
    return f;
}

void ilink_frame_unref(ilink_frame *f)
{
    if (f && --f->refs == 0) free(f);
}

infer_links *ilinks_create(uv_loop_t *loop, ilink_reply_fn on_reply, ilink_lost_fn on_lost, void *arg)
{
    infer_links *L = xcalloc(1, sizeof(*L));
    L->loop = loop, L->on_reply = on_reply, L->on_lost = on_lost, L->arg = arg;
    return L;
}

static void on_closed(uv_handle_t *h)
{
    ilink *k = h->data;
    infer_links *L = k->L;
    free(k->in);
    free(k);
    if (--L->open == 0 && L->closing) free(L);
}

/* out of the list, reported lost, its handle closed */
static void shut(ilink *k)
{
    infer_links *L = k->L;
    if (k->state == LK_CLOSING) return;
    k->state = LK_CLOSING;
    for (ilink **pp = &L->links; *pp; pp = &(*pp)->next)
        if (*pp == k) {
            *pp = k->next;
            break;
        }
    if (!L->closing) L->on_lost(L->arg, k->id);
    uv_close((uv_handle_t *)&k->tcp, on_closed);
}

static void on_written(uv_write_t *w, int status)
{
    wreq *r = (wreq *)w;
    ilink *k = w->handle->data;
    ilink_frame_unref(r->f);
    free(r);
    if (status < 0 && status != UV_ECANCELED) shut(k);
}

/* queues the frame on k's socket; the write holds a reference to it until it is on the socket */
static int write_frame(ilink *k, ilink_frame *f)
{
    wreq *r = xcalloc(1, sizeof(*r));
    uv_buf_t b = uv_buf_init(f->data, (unsigned)f->len);
    if (uv_write(&r->w, (uv_stream_t *)&k->tcp, &b, 1, on_written) != 0) {
        free(r);
        return -1;
    }
    r->f = f; /* the callback runs on a later turn of the loop, after this */
    f->refs++;
    return 0;
}

static void on_alloc(uv_handle_t *h, size_t want, uv_buf_t *buf)
{
    (void)want;
    ilink *k = h->data;
    if (k->in_cap - k->in_len < READ_ROOM) {
        k->in_cap = k->in_len + READ_ROOM > 2 * k->in_cap ? k->in_len + READ_ROOM : 2 * k->in_cap;
        k->in = xrealloc(k->in, k->in_cap);
    }
    *buf = uv_buf_init(k->in + k->in_len, (unsigned)(k->in_cap - k->in_len));
}

static void on_read(uv_stream_t *s, ssize_t n, const uv_buf_t *buf)
{
    (void)buf;
    ilink *k = s->data;
    if (n < 0) {
        if (n != UV_EOF) log_warn("inference link to %s (job %s): %s", k->endpoint, k->job_id, uv_strerror((int)n));
        shut(k);
        return;
    }
    k->in_len += (size_t)n;
    size_t at = 0;
    while (k->in_len - at >= IF_HEAD && k->state == LK_READY) {
        if_head h;
        if (if_head_decode((const unsigned char *)k->in + at, &h) != 0 || h.kind != IF_REPLY) {
            log_warn("inference link to %s (job %s): not a reply frame; closed", k->endpoint, k->job_id);
            shut(k);
            return;
        }
        if (k->in_len - at - IF_HEAD < h.len) break;
        k->L->on_reply(k->L->arg, h.id, (int)h.arg, k->in + at + IF_HEAD, (size_t)h.len);
        at += IF_HEAD + (size_t)h.len;
    }
    memmove(k->in, k->in + at, k->in_len - at);
    k->in_len -= at;
}

static void on_connect(uv_connect_t *c, int status)
{
    ilink *k = c->data;
    if (k->state == LK_CLOSING) return;
    if (status < 0) {
        log_warn("inference link to %s (job %s): cannot connect: %s", k->endpoint, k->job_id, uv_strerror(status));
        shut(k);
        return;
    }
    size_t tl = strlen(k->token);
    ilink_frame *hello = ilink_frame_new(&(if_head){.kind = IF_HELLO, .len = tl}, k->token);
    int rc = write_frame(k, hello);
    ilink_frame_unref(hello);
    if (rc != 0 || uv_read_start((uv_stream_t *)&k->tcp, on_alloc, on_read) != 0) {
        shut(k);
        return;
    }
    k->state = LK_READY;
}

static void open_link(infer_links *L, const char *job_id, const char *endpoint)
{
    char host[256], token[96];
    int port;
    struct sockaddr_storage sa;
    if (sscanf(endpoint, "%255s %d %95s", host, &port, token) != 3 || port <= 0 || port > 65535 ||
        (uv_ip4_addr(host, port, (struct sockaddr_in *)&sa) != 0 && uv_ip6_addr(host, port, (struct sockaddr_in6 *)&sa) != 0)) {
        log_warn("job %s: a replica's endpoint is not \"<address> <port> <token>\": %.80s", job_id, endpoint);
        return;
    }
    ilink *k = xcalloc(1, sizeof(*k));
    k->L = L, k->id = ++L->next_id ? L->next_id : ++L->next_id; /* never 0 */
    snprintf(k->job_id, sizeof(k->job_id), "%s", job_id);
    snprintf(k->endpoint, sizeof(k->endpoint), "%s", endpoint);
    snprintf(k->token, sizeof(k->token), "%s", token);
    uv_tcp_init(L->loop, &k->tcp);
    k->tcp.data = k, k->creq.data = k;
    L->open++;
    k->next = L->links, L->links = k;
    uv_tcp_nodelay(&k->tcp, 1);
    if (uv_tcp_connect(&k->creq, &k->tcp, (const struct sockaddr *)&sa, on_connect) != 0) shut(k);
}

void ilinks_set(infer_links *L, const char *job_id, const char *const *endpoints, int n)
{
    if (L->closing) return;
    for (ilink *k = L->links, *next; k; k = next) { /* the links to endpoints gone */
        next = k->next;
        if (strcmp(k->job_id, job_id) != 0) continue;
        int listed = 0;
        for (int i = 0; i < n && !listed; i++)
            listed = strcmp(endpoints[i], k->endpoint) == 0;
        if (!listed) shut(k);
    }
    for (int i = 0; i < n; i++) { /* and to the new ones */
        int known = 0;
        for (ilink *k = L->links; k && !known; k = k->next)
            known = strcmp(k->job_id, job_id) == 0 && strcmp(k->endpoint, endpoints[i]) == 0;
        if (!known) open_link(L, job_id, endpoints[i]);
    }
}

/* whether k may take the job's next request (pass 0: not `avoid`) */
static int candidate(const ilink *k, const char *job_id, uint32_t avoid, int pass)
{
    return k->state == LK_READY && strcmp(k->job_id, job_id) == 0 && (pass == 1 || k->id != avoid);
}

uint32_t ilinks_send(infer_links *L, const char *job_id, ilink_frame *f, uint32_t avoid)
{
    ilink *best = NULL;
    for (int pass = 0; pass < 2 && !best; pass++) { /* the first pass skips `avoid` */
        int least = -1, ties = 0;
        for (ilink *k = L->links; k; k = k->next)
            if (candidate(k, job_id, avoid, pass) && (least < 0 || k->outstanding <= least))
                ties = least == k->outstanding ? ties + 1 : 1, least = k->outstanding;
        if (least < 0) continue;
        int pick = (int)(L->turn++ % (unsigned)ties); /* the links tied for the fewest take turns */
        for (ilink *k = L->links; k && !best; k = k->next)
            if (candidate(k, job_id, avoid, pass) && k->outstanding == least && pick-- == 0) best = k;
    }
    if (!best || write_frame(best, f) != 0) return 0;
    best->outstanding++;
    return best->id;
}

void ilinks_done(infer_links *L, uint32_t id)
{
    for (ilink *k = L->links; k; k = k->next)
        if (k->id == id) {
            if (k->outstanding > 0) k->outstanding--;
            return;
        }
}

int ilinks_outstanding(const infer_links *L, const char *job_id, int *ready)
{
    int out = 0;
    *ready = 0;
    for (const ilink *k = L->links; k; k = k->next)
        if (k->state == LK_READY && strcmp(k->job_id, job_id) == 0) out += k->outstanding, (*ready)++;
    return out;
}

void ilinks_close(infer_links *L)
{
    if (!L) return;
    L->closing = 1;
    while (L->links)
        shut(L->links);
    if (L->open == 0) free(L);
}
