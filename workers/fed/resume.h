/* resume.h - where a federated job restarts (docs/federated.md, "Restarts"): the global model's checkpoint
 * after a round, as bytes, and the rule by which the sites agree on the round they continue after.  Pure: no
 * file, no Redis (workers/fed_ckpt.h stores the bytes on a worker; workers/fed_site.c runs the agreement).
 *
 * The checkpoint is a tensorfile (workers/fed/tensorfile.h: safetensors, FP32) of the model's tensors with
 * __metadata__ {"gantry": "fed-checkpoint-1", "job", "round", "rounds", "sha256"}: the job it belongs to, the
 * last round it completed, the job's rounds and the SHA-256 of the values (FP32 little-endian, in file order).
 * Every site writes one after every round: the global model after a round is what every site holds already,
 * so a checkpoint tells nobody anything that site did not know.
 *
 * The agreement: each site announces "ROUND SHA" (0 and "-" without a usable checkpoint).  The round the
 * sites continue after is the newest any site holds (one site's copy serves all: the others get it by a
 * masked sum, as site 0's initial model), provided every site that holds that round holds the same values;
 * when two copies of the newest round differ, or an announcement does not parse, the sites start again from
 * round 1, with the reason.  Why the newest and not the oldest: a site that comes back on another worker
 * (another host) holds no checkpoint, and the oldest would then always be round 0.
 *
 * A model crosses the masked sum exactly as its FP32 bits: each value as two 16-bit halves (two sums), so the
 * receiving sites can check the SHA-256 the holder announced. */
#ifndef GANTRY_FED_RESUME_H
#define GANTRY_FED_RESUME_H

#include "workers/fed/tensorfile.h"

#include <stddef.h>

#define FED_RESUME_FORMAT "fed-checkpoint-1"
#define FED_RESUME_ANNOUNCE_MAX 96 /* bytes of an announcement, with its NUL */

typedef struct {
    int round;       /* 0: none */
    char sha256[65]; /* hex; "-" with round 0 */
} fed_resume_have;

typedef struct {
    int round;       /* the round to continue after: 0 starts from round 1 */
    int holder;      /* the site whose copy every site gets (the lowest index holding it); -1 with round 0 */
    char sha256[65]; /* its values' digest */
    char why[400];   /* with round 0: why the checkpoints are not used ("" when nobody had one) */
} fed_resume_plan;

/* the SHA-256 (hex) of n values as FP32 little-endian */
void fed_resume_sha256(const double *v, size_t n, char hex[65]);

/* "ROUND SHA" into out (FED_RESUME_ANNOUNCE_MAX bytes); and back: 0, or -1 when s is not one */
void fed_resume_announce(const fed_resume_have *h, char *out);
int fed_resume_parse(const char *s, fed_resume_have *h);

/* The round the n sites continue after, from what each announced (have[i]: site i's; rounds: the job's).
 * A round above rounds counts as none. */
void fed_resume_decide(const fed_resume_have *have, int n, int rounds, fed_resume_plan *plan);

/* The checkpoint's bytes: layout's tensors holding v (rounded to FP32), the metadata above; malloc'd, *len. */
unsigned char *fed_resume_encode(const tensorfile_header *layout, const double *v, const char *job, int round, int rounds,
                                 size_t *len);
/* Checks a checkpoint parsed into h and v (tensorfile_parse, tensorfile_values) against the job (its id, rounds,
 * the model's layout): 0 with *have, or -1 with err saying why it cannot be used ("its values do not match its
 * sha256 (damaged?)"). */
int fed_resume_check(const tensorfile_header *h, const double *v, const tensorfile_header *layout, const char *job, int rounds,
                     fed_resume_have *have, char *err, size_t errlen);

/* value i's FP32 bits as two halves (each an integer 0..65535, exact in the sums' fixed point); and back */
void fed_resume_split(const double *v, size_t n, double *hi, double *lo);
void fed_resume_join(const double *hi, const double *lo, size_t n, double *v);

#endif
