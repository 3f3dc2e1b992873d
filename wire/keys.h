/* keys.h - the one place that names Redis keys, streams, groups and message fields.
 *
 * Streams
 *   gantry:jobs    server -> scheduler.  Fields: job (the task JSON, see msg.h).
 *                  Consumer group "schedulers"; an entry is XACKed only in the same
 *                  MULTI as the LPUSH that puts the task in a worker's list.
 *   gantry:wake    workers -> scheduler: "a slot is free", read in the same XREADGROUP as
 *                  gantry:jobs so the scheduler sleeps until there is something to do.
 *   gantry:events  everyone -> server.  Fields: event (the event JSON, see msg.h).
 *                  Consumer group "servers"; XACKed after the event is committed to SQLite.
 * Registry
 *   gantry:workers             SET of worker ids ever registered (pruned by the scheduler)
 *   gantry:worker:<id>         HASH: info (JSON: kind, host, pid, slots, memory_bytes, labels),
 *                              hb (ms), util, running (job id or ""); PEXPIREd by each heartbeat,
 *                              so a missing hash means a dead worker.
 * Work
 *   gantry:tasks:<worker>      LIST of task JSON; scheduler LPUSHes, worker BLMOVEs RIGHT->LEFT
 *   gantry:inflight:<worker>   LIST the worker moved its current task into; LREM when done
 *   gantry:claim:<job>:<attempt> STRING worker id, SET NX by the scheduler so that a job
 *                              published twice (outbox retry) is assigned once
 *   gantry:cancel:<job>        STRING "1" set by the server on cancel; workers poll it
 *   gantry:preempt:<job>:<attempt> STRING the job that preempts that generation ("resize": an
 *                              elastic gang grows); its workers stop and requeue it (requeue_ask)
 *   gantry:retry:<job>:<attempt> STRING set NX by whoever requeues that attempt (a lost worker, a
 *                              preempted or failed gang member): a gang requeues its job once;
 *                              "done" when the attempt ended for good (a result, or a job failed
 *                              over its tenant's limits): the other members stop without a word
 *   gantry:runtime:<job>       HASH attempt -> ms that generation ran, written by its workers when it
 *                              ended unfinished (requeued); the tenant's max_runtime_s counts them all
 *   gantry:rdv:<job>:<gen>     HASH the rendezvous of a gang's generation (workers/rendezvous.h); field
 *                              world: the gang's size, written by the dispatch script
 *   gantry:fed:<job>:<gen>:sites HASH site index -> worker id: which worker runs each site of a federated
 *                              job's generation, claimed atomically (workers/fed_io.h)
 *   gantry:fed:<job>:<gen>:live HASH worker id -> site index, and t -> the threshold: the sites of a
 *                              generation whose rounds go on without a lost one while t remain
 *                              (wire/requeue.h, requeue_tolerate); absent: every loss requeues the job
 *   gantry:fed:<job>:<gen>:<channel> STREAM of one federated exchange's messages (field d), sealed by
 *                              the sites (workers/fed/secagg.h): hello (public keys and their tags), key:<s>
 *                              (the job's key for site s), x:<e>:<g> (group g's shares of exchange e),
 *                              x:<e> (the groups' partial sums); expire 10 min after their last message
 *   gantry:elastic             HASH job id -> its workers.max, for every elastic gang dispatched; the
 *                              scheduler grows a running one when workers are free (scheduler/elastic.c)
 * Inference (server/infer.c <-> workers/serve_io.c)
 *   gantry:infer:q:<job>       LIST of requests "<id> <reply stream> <OIP body>"; the server LPUSHes
 *                              (refused past the job's queue_limit), replicas BRPOP/RPOP batches
 *   gantry:infer:replies:<srv> STREAM of replies "<id> <status> <body>" to the server that asked
 *   gantry:infer:jobs          HASH job id -> its task, for every dispatched inference job (set by the
 *                              dispatch script; the autoscaler adds replicas with it, and drops
 *                              the entry when the job is cancelled)
 *   gantry:infer:drain:<job>:<worker> STRING: that replica finishes its batch and stops (scale-down)
 *   gantry:infer:stats:<job>   HASH arrivals, drops (server, per request) and <worker> -> replica
 *                              stats JSON (served, batches, busy_s, ts), read by the autoscaler
 *   gantry:tenants             HASH tenant id -> {"weight","max_slots"} written by the server
 *   gantry:leader              the active scheduler's lease (SET NX PX, renewed by its holder)
 *   gantry:epoch               set once by the server; its absence after a reconnect means Redis
 *                              was wiped, and the server republishes every unfinished job
 */
#ifndef GANTRY_KEYS_H
#define GANTRY_KEYS_H

#define K_JOBS_STREAM "gantry:jobs"
#define K_EVENTS_STREAM "gantry:events"
#define K_WAKE_STREAM "gantry:wake" /* a worker that finished a task wakes the scheduler (group "schedulers") */
#define K_SCHED_GROUP "schedulers"
#define K_SERVER_GROUP "servers"
#define K_WORKERS_SET "gantry:workers"
#define K_WORKER_PREFIX "gantry:worker:"
#define K_TASKS_PREFIX "gantry:tasks:"
#define K_INFLIGHT_PREFIX "gantry:inflight:"
#define K_CLAIM_PREFIX "gantry:claim:"
#define K_CANCEL_PREFIX "gantry:cancel:"
#define K_PREEMPT_PREFIX "gantry:preempt:"
#define K_RETRY_PREFIX "gantry:retry:"
#define K_RUNTIME_PREFIX "gantry:runtime:"   /* ms each unfinished generation of a job ran (workers/main.c) */
#define K_FAILURES_PREFIX "gantry:failures:" /* a job's failed attempts (requeue.c); resizes and preemptions are not */
#define K_RDV_PREFIX "gantry:rdv:"
#define K_ELASTIC "gantry:elastic"
/* a program training job's output (workers/program/): stream <job>, entries r (rank), g (generation), t (a chunk
 * of whole lines as the program wrote them, at most 64 KiB, not necessarily UTF-8); capped at K_LOGS_MAXLEN
 * entries, expires K_LOGS_TTL_S after its last entry.  Written by the worker, read by the server. */
#define K_LOGS_PREFIX "gantry:logs:"
#define K_LOGS_MAXLEN 20000
#define K_LOGS_TTL_S (30 * 86400)
#define K_FED_PREFIX "gantry:fed:" /* federated jobs: <job>:<gen>:sites and the exchange channels (workers/fed_io.h) */
#define K_INFER_QUEUE_PREFIX "gantry:infer:q:"
#define K_INFER_REPLIES_PREFIX "gantry:infer:replies:"
/* where each replica's worker takes requests directly (workers/serve_direct.h): hash, field <worker>,
 * value "<host> <port> <token> <attempt>" (wire/infer_frame.h); the server's gateway connects there */
#define K_INFER_EP_PREFIX "gantry:infer:ep:"
#define K_INFER_STATS_PREFIX "gantry:infer:stats:"
#define K_INFER_JOBS "gantry:infer:jobs"
#define K_INFER_DRAIN_PREFIX "gantry:infer:drain:"
/* + job id: while the job is overloaded, the requests per second each server's gateway admits (the rest: 429
 * at once); set by the autoscaler every tick with a short expiry (scheduler/autoscale/admit.h) */
#define K_INFER_ADMIT_PREFIX "gantry:infer:admit:"
#define K_INFER_ADMIT_TTL_S 10
/* + job id: the model version the job's replicas serve (spec.resolved's JSON) after its alias
 * moved; a replica loads it beside the one it serves and switches between batches */
#define K_INFER_MODEL_PREFIX "gantry:infer:model:"
#define K_TENANTS_HASH "gantry:tenants"
#define K_LEADER "gantry:leader"
#define K_EPOCH "gantry:epoch"

#define F_JOB "job"
#define F_EVENT "event"

/* Streams are trimmed approximately to this many entries (MAXLEN ~). */
#define K_STREAM_MAXLEN 1000000
/* A worker hash lives this long without a heartbeat. */
#define K_WORKER_TTL_MS 5000
#define K_HEARTBEAT_MS 1000
/* The scheduler's lease; a standby takes over within this time of the leader's death. */
#define K_LEADER_TTL_MS 3000
/* A job runs at most this many times when the workers running it die (attempt 0..N-1). */
#define K_MAX_ATTEMPTS 3

#endif
