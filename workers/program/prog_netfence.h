/* prog_netfence.h - what a rank of a program job may reach on the network: its own job's peers, nothing else.
 *
 * The design (docs/programs.md "The network"): ranks keep the host's network namespace (a DDP job's
 * ranks on one host talk over loopback, across hosts over the hosts' addresses, exactly as torchrun's
 * do), and each worker slot runs its ranks as its own uid in [PROG_NETFENCE_UID_MIN, PROG_NETFENCE_UID_MAX].  The
 * worker keeps, in its host's (its network namespace's) nftables, one table "inet gantry" shared by
 * every worker of the host:
 *
 *   map slots { rank uid : jump slot_<uid> }          one element per worker (its own)
 *   chain output (hook output, priority filter, policy accept):
 *     meta skuid <uid range> meta skuid vmap @slots     a rank's packet: its slot's chain
 *     meta skuid <uid range> drop                       a rank uid with no slot here: nothing
 *     ct direction reply ct mark & BIT == BIT drop      a non-rank socket (Redis, the worker, sshd, the
 *                                                       API) answering a connection a rank opened
 *   chain slot_<uid> (rewritten whole, atomically, by its worker at each rank start and end):
 *     idle: drop
 *     running job J (mark M = PROG_NETFENCE_MARK_BIT | hash(J)):
 *       ct direction reply ct mark M accept               answering a rank of J (on this host)
 *       ct direction reply ct mark BIT, daddr {J's peers} accept   a rank of J's peer hosts (DSCP, below)
 *       ct direction reply ct mark & BIT == BIT drop      a rank of another job here, or of another host
 *       ct direction reply ip/ip6 daddr {J's peers} accept unmarked, from J's peer hosts
 *       ct direction reply fib daddr type local accept    answering a local non-rank client (an operator)
 *       ct direction reply drop                           anyone else
 *       ct state established,related accept              its own connections
 *       ct state new tcp, daddr local: mark M, accept     (the listener's own slot decides, above)
 *       ct state new tcp, daddr one of J's peers: mark M; to a peer: dscp set PROG_NETFENCE_DSCP, accept
 *       tcp: reject with tcp reset; anything else: reject (UDP, ICMP, raw: none)
 *
 * So a connection between two sockets of one host is let through only when the listener's reply
 * (its SYN-ACK) carries the mark of the listener's own job: a rank reaches its own job's ranks, and
 * never Redis, the worker's ports, the API server or another job's MASTER_PORT/gloo/NCCL listeners
 * (their replies are dropped: the connect times out, closed and open ports look alike).  Across hosts
 * the address is all there is: a rank reaches J's peer hosts only, and a listener answers only J's
 * peer hosts (and local clients).  Across hosts a rank's packets carry DSCP PROG_NETFENCE_DSCP (set by its
 * slot's chain), and the receiving host's prerouting chain marks such a new connection PROG_NETFENCE_MARK_BIT
 * alone: its non-rank services drop their answer, its ranks answer it from their job's peer hosts only:
 *   chain prerouting (hook prerouting, priority filter):
 *     iifname != "lo" ip/ip6 dscp PROG_NETFENCE_DSCP ct state new ct mark set PROG_NETFENCE_MARK_BIT
 * Residual risk: the job does not cross hosts, only "a rank": another job with ranks on both hosts
 * passes the address check; a network that clears DSCP makes remote ranks look like any process of
 * their host (the peer host's services answer them); abstract unix sockets are not packets (the pid and
 * mount namespaces do not hide them).
 *
 * Why not a network namespace per job (veth, a bridge, routed or NATed addresses): it needs addresses
 * and routes per job on every host and across hosts (an overlay, or NAT that NCCL's and gloo's
 * address exchange does not survive), and its own DNS and MTU care; the uid-keyed rules keep the
 * ranks on the hosts' own addresses, as torchrun's are, and cost one chain per worker.
 *
 * Each worker owns its element of slots and its chain slot_<uid> only; the table, the map and the
 * base chain are written idempotently by every worker (the same content, in one transaction).  A
 * worker restarted after a crash rewrites its chain (to "drop") before anything else, and a worker that
 * starts removes the chains of uids no running worker holds (a worker killed for good).  Applied with
 * nft(8) ("nft -f -"), run as root.
 *
 * The script builders are pure (unit-tested); prog_netfence_apply runs one. */
#ifndef GANTRY_PROGRAM_PROG_NETFENCE_H
#define GANTRY_PROGRAM_PROG_NETFENCE_H

#include <stddef.h>
#include <stdint.h>

/* the uids ranks run as: above systemd's container range (0x00080000-0x6fffffff), below -1 */
#define PROG_NETFENCE_UID_MIN 1879048192u /* 0x70000000 */
#define PROG_NETFENCE_UID_COUNT 65536u
#define PROG_NETFENCE_UID_MAX (PROG_NETFENCE_UID_MIN + PROG_NETFENCE_UID_COUNT - 1)
#define PROG_NETFENCE_MARK_BIT 0x80000000u /* set in every job mark: "a rank opened this connection" */
#define PROG_NETFENCE_DSCP 0x2f            /* on a rank's packets to another host: DSCP 47, pool 2 (experimental or local use) */
#define PROG_NETFENCE_NFT "/usr/sbin/nft"
#define PROG_NETFENCE_MAX_PEERS 64
#define PROG_NETFENCE_LOCK_DIR "/run/lock"

/* the default uid of a worker slot: derived from its id (workers on a host have distinct ids) */
unsigned prog_netfence_default_uid(const char *worker_id);
/* the gid every rank of a job runs as, whatever its slot's uid: the job's shared directories are its group's */
unsigned prog_netfence_job_gid(const char *job_id);
/* a job's conntrack mark: PROG_NETFENCE_MARK_BIT | a hash of the job id (every worker of the job computes the same) */
uint32_t prog_netfence_job_mark(const char *job_id);

/* nft scripts (malloc'd): the table, map and base chain, and this uid's chain reset to drop, its element added */
char *prog_netfence_script_setup(unsigned uid);
/* this uid's chain for a running rank of the job with mark: peers are addresses (IPv4 or IPv6 literals; others are
 * skipped), n of them; NULL with err when an address is not a literal */
char *prog_netfence_script_job(unsigned uid, uint32_t mark, const char *const *peers, size_t n, char *err, size_t errlen);
/* this uid's element and chain removed */
char *prog_netfence_script_teardown(unsigned uid);

/* a lock on uid among the workers of this host (a file in PROG_NETFENCE_LOCK_DIR, flock): the descriptor, held until
 * closed or the process ends; -1 when another process holds it, -2 when the file cannot be opened */
int prog_netfence_lock_uid(unsigned uid);
/* removes the chains and elements of uids no worker holds (prog_netfence_lock_uid: their worker was killed and did not
 * come back), but own_uid's; how many, or -1 with why */
int prog_netfence_reap(unsigned own_uid, char *why, size_t whylen);

/* runs nft -f - with script; 0, or -1 with nft's message (or why it could not run) in why */
int prog_netfence_apply(const char *script, char *why, size_t whylen);

/* whether the worker can fence programs here: root and nft present, the table made (prog_netfence_script_setup
 * applied); 0, or -1 with why */
int prog_netfence_setup(unsigned uid, char *why, size_t whylen);
/* the slot's chain for a rank of job_id with those peer addresses (host names are resolved); 0 or -1 with why */
int prog_netfence_job(unsigned uid, const char *job_id, const char *const *peers, size_t n, char *why, size_t whylen);
/* the slot's chain back to drop */
int prog_netfence_idle(unsigned uid, char *why, size_t whylen);
/* the slot's element and chain removed (the worker's exit) */
int prog_netfence_teardown(unsigned uid, char *why, size_t whylen);

#endif
