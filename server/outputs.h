/* outputs.h - the files a program job left in its output directory (issue 20): GET
 * /v1/jobs/{id}/outputs lists them, GET /v1/jobs/{id}/outputs/{path} sends one.  docs/programs.md
 * "Logs and outputs".
 *
 * The worker lists them in the job's result: result.outputs = {"dir": the output directory's
 * absolute path on the workers' state directory, "files": [{"path", "bytes", "sha256"}]}.  The dir
 * is never shown (models_public_job drops it).  A file is sent only when its path is exactly one
 * listed (nothing else can be named), opened below dir one component at a time without following a
 * symbolic link (outputs_open), and still a regular file of the listed size.  The server reads the
 * workers' state directory as it reads the model store: on one host, or a shared directory. */
#ifndef GANTRY_OUTPUTS_H
#define GANTRY_OUTPUTS_H

#include <stddef.h>
#include <stdint.h>

/* Opens dir/rel for reading: rel is relative, its components neither empty, "." nor ".."; every
 * component (dir's last one too) is opened with O_NOFOLLOW through openat, so a symbolic link
 * anywhere below dir is refused; the file must be a regular file of `bytes` bytes.  The descriptor,
 * or -1 with err: OUTPUTS_GONE (it no longer exists) or OUTPUTS_CHANGED (anything else), and why in
 * msg. */
enum { OUTPUTS_GONE = 1, OUTPUTS_CHANGED = 2 };
int outputs_open(const char *dir, const char *rel, int64_t bytes, int *err, char *msg, size_t mlen);

#endif
