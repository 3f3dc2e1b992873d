/* bus.h - the server's side of Redis.
 *
 * Owns two reconnecting Redis links (wire/redis_link.h): `cmd` (XADD to gantry:jobs through the
 * outbox, cancel keys, registry reads) and `rd` (the blocking XREADGROUP on gantry:events, and
 * its XACKs).  Outbox: a committed job is
 * XADDed and then marked published; whatever is still unpublished (Redis was
 * down, the server died between commit and XADD) is published again on every
 * (re)connect and by a periodic sweep; the cancel keys the same way (bus_cancel).  Events are persisted
 * through the store
 * (idempotent by event id), XACKed after the commit, then pushed to SSE. */
#ifndef GANTRY_BUS_H
#define GANTRY_BUS_H

#include "wire/redis_auth.h"

#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>

#include "wire/msg.h"

struct server;
typedef struct bus bus;

bus *bus_create(struct server *srv, const char *host, int port, const redis_auth *auth, const char *consumer);
void bus_publish_job(bus *b, const task_msg *t);
/* sets job_id's cancel key (SET gantry:cancel:<job> EX 86400: its worker stops it, the scheduler drops it),
 * after the commit of the transaction that owed it (jobs.h jobs_cancel_key_set), and deletes the debt
 * once Redis answered; a key not set (Redis down or refusing, the server killed first) is set again on
 * the next connect and by the sweep every 2 s */
void bus_cancel(bus *b, const char *job_id);
/* what a search decided, once its transaction committed (server/search.h): its new trials
 * published, the trials it stopped given their cancel keys, its events pushed to SSE; a is cleared */
struct search_after;
void bus_search_after(bus *b, struct search_after *a);
/* writes every tenant's weight and quota to gantry:tenants (the scheduler reads them) */
void bus_sync_tenants(bus *b);
/* the model version a serving job's replicas switch to (a moved alias: server/models.h):
 * K_INFER_MODEL_PREFIX<job> = resolved (spec.resolved's JSON), read by every replica of the job */
void bus_set_model(bus *b, const char *job_id, const char *resolved_json);
bool bus_ready(const bus *b);
/* the command link (wire/redis_link.h; its commands fail while it is down): for the server's other readers
 * of Redis (a job's logs: server/logs.c).  Non-blocking commands only (the outbox and the cancel keys share it). */
struct redis_link *bus_redis(bus *b);

/* reads the worker registry; cb gets {"workers":[...]} or NULL when Redis is unreachable */
typedef void (*bus_workers_cb)(void *arg, json_t *workers);
void bus_workers(bus *b, bus_workers_cb cb, void *arg);

void bus_render_metrics(bus *b, FILE *out);
void bus_close(bus *b);

#endif
