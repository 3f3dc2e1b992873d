/* ids.h - random identifiers and secrets from OpenSSL's CSPRNG.
 * Ids look like "<prefix>_<hex>": j_ (job), t_ (tenant), k_ (token), e_ (event), w_ (worker). */
#ifndef GANTRY_IDS_H
#define GANTRY_IDS_H

#include <stddef.h>

/* writes prefix + '_' + 2*nbytes hex chars; returns 0 or -1 when the RNG fails */
int id_random(const char *prefix, size_t nbytes, char *out, size_t outlen);

/* prefix + '_' + the Unix time in ms (12 hex digits) + 2*nbytes random hex chars: ids that sort by
 * when they were made, so that an index on them (jobs.id, job_events.id) grows at its end instead of
 * taking a random page of a large table on every insert.  0, or -1 when the RNG fails. */
int id_sortable(const char *prefix, size_t nbytes, char *out, size_t outlen);

/* prefix + '_' + 20 hex chars (the length of id_random(prefix, 10)): the ms clock in 12, then 8 that
 * make every id this process writes greater than the one before (a random step above it; when a ms
 * runs out of them, the clock part moves on a ms).  Unique within the process, ordered like
 * id_sortable; for the ids one process writes (jobs: the server).  0, or -1 when the RNG fails. */
int id_sequential(const char *prefix, char *out, size_t outlen);

#endif
