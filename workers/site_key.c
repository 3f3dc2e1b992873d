/* site_key.c - the worker's federated identity key file (site_key.h). */
#include "workers/site_key.h"

#include <errno.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int site_key_load(const char *path, unsigned char priv[FED_SITEKEY_LEN], char *why, size_t wl)
{
    int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    struct stat sb;
    if (fd < 0 || fstat(fd, &sb) != 0) {
        snprintf(why, wl, "%s: %s", path, strerror(errno));
        if (fd >= 0) close(fd);
        return -1;
    }
    if (!S_ISREG(sb.st_mode) || (sb.st_mode & 077)) {
        snprintf(why, wl, "%s: must be a regular file only its owner can read (chmod 600 %s)", path, path);
        close(fd);
        return -1;
    }
    FILE *f = fdopen(fd, "rb");
    EVP_PKEY *k = f ? PEM_read_PrivateKey(f, NULL, NULL, NULL) : NULL;
    if (f)
        fclose(f);
    else
        close(fd);
    size_t len = FED_SITEKEY_LEN;
    int ok = k && EVP_PKEY_id(k) == EVP_PKEY_ED25519 && EVP_PKEY_get_raw_private_key(k, priv, &len) == 1 && len == FED_SITEKEY_LEN;
    EVP_PKEY_free(k);
    if (!ok)
        snprintf(why, wl, "%s: not an Ed25519 private key in PEM (make one with gantry-worker --make-site-key %s)", path, path);
    return ok ? 0 : -1;
}

int site_key_make(const char *path, unsigned char priv[FED_SITEKEY_LEN], char *why, size_t wl)
{
    EVP_PKEY *k = NULL;
    if (fed_sitekey_generate(priv) || !(k = EVP_PKEY_new_raw_private_key(EVP_PKEY_ED25519, NULL, priv, FED_SITEKEY_LEN))) {
        snprintf(why, wl, "cannot make an Ed25519 key");
        return -1;
    }
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    FILE *f = fd >= 0 ? fdopen(fd, "wb") : NULL;
    int ok = f && PEM_write_PrivateKey(f, k, NULL, NULL, 0, NULL, NULL) == 1 && fflush(f) == 0 && fsync(fileno(f)) == 0;
    int saved = errno;
    EVP_PKEY_free(k);
    if (f)
        ok = fclose(f) == 0 && ok;
    else if (fd >= 0)
        close(fd);
    if (!ok) {
        snprintf(why, wl, "%s: %s", path, fd < 0 ? strerror(saved) : "cannot write the key");
        if (fd >= 0) unlink(path);
    }
    return ok ? 0 : -1;
}
