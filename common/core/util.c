/* util.c — shared helpers (see common/core/util.h). */
#include "common/core/util.h"
#include "rlrt/error.h"

#include <errno.h>
#include <malloc.h>
#include <stdarg.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

void *rl_zalloc(size_t size, const char *who)
{
    void *p = calloc(1, size);
    if (!p) {
        if (who)
            rl_error_set(RL_ENOMEM, "%s: out of memory", who);
        else
            rl_error_set(RL_ENOMEM, "out of memory");
    }
    return p;
}

char *rl_file_read_all(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return rl_error_set(RL_EIO, "%s: cannot open: %s", path, strerror(errno)), NULL;
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap + 1);
    while (buf) {
        n += fread(buf + n, 1, cap - n, f);
        if (n < cap)
            break;
        char *nb = realloc(buf, cap * 2 + 1);
        if (!nb) {
            free(buf);
            buf = NULL;
            break;
        }
        buf = nb;
        cap *= 2;
    }
    int err = ferror(f);
    fclose(f);
    if (!buf)
        return rl_error_set(RL_ENOMEM, "%s: out of memory", path), NULL;
    if (err) {
        free(buf);
        return rl_error_set(RL_EIO, "%s: read error", path), NULL;
    }
    buf[n] = '\0';
    if (len)
        *len = n;
    return buf;
}

const char *rl_json_type_name(const json_t *j)
{
    switch (json_typeof(j)) {
    case JSON_OBJECT: return "object";
    case JSON_ARRAY: return "array";
    case JSON_STRING: return "string";
    case JSON_INTEGER: return "integer";
    case JSON_REAL: return "real";
    case JSON_TRUE:
    case JSON_FALSE: return "boolean";
    case JSON_NULL: return "null";
    }
    return "?";
}

int rl_name_lookup(const rl_name_value *t, size_t n, const char *name, int *out, const char *fn,
                   const char *what, const char *expected)
{
    if (!name || !out)
        return rl_error_set(RL_EINVAL, "%s: NULL argument", fn);
    for (size_t i = 0; i < n; i++)
        if (strcmp(name, t[i].name) == 0) {
            *out = t[i].value;
            return RL_OK;
        }
    return rl_error_set(RL_EINVAL, "%s: unknown %s '%s' (expected %s)", fn, what, name, expected);
}

int rl_file_rewrite(const char *path, int missing_ok, rl_rewrite_fn copy, void *ctx)
{
    FILE *in = fopen(path, "rb");
    if (!in)
        return errno == ENOENT && missing_ok
                   ? RL_OK
                   : rl_error_set(RL_EIO, "%s: cannot open: %s", path, strerror(errno));
    size_t pl = strlen(path);
    char *tmp = malloc(pl + 16);
    if (!tmp) {
        fclose(in);
        return rl_error_set(RL_ENOMEM, "%s: out of memory", path);
    }
    snprintf(tmp, pl + 16, "%s.rewrite", path);
    FILE *out = fopen(tmp, "wb");
    int rc = out ? copy(in, out, tmp, ctx)
                 : rl_error_set(RL_EIO, "%s: cannot create: %s", tmp, strerror(errno));
    if (out) {
        if (rc == RL_OK && (fflush(out) != 0 || fsync(fileno(out)) != 0))
            rc = rl_error_set(RL_EIO, "%s: flush/fsync failed: %s", tmp, strerror(errno));
        if (fclose(out) != 0 && rc == RL_OK)
            rc = rl_error_set(RL_EIO, "%s: close failed: %s", tmp, strerror(errno));
        if (rc == RL_OK && rename(tmp, path) != 0)
            rc = rl_error_set(RL_EIO, "rename %s -> %s: %s", tmp, path, strerror(errno));
        if (rc)
            unlink(tmp);
    }
    fclose(in);
    free(tmp);
    return rc;
}

int rl_mkdir_p(const char *path)
{
    if (!path || !*path)
        return rl_error_set(RL_EINVAL, "mkdir: empty path");
    char *buf = strdup(path);
    if (!buf)
        return rl_error_set(RL_ENOMEM, "mkdir: out of memory");
    int rc = RL_OK;
    for (char *p = buf + 1;; p++) {
        if (*p != '/' && *p != '\0')
            continue;
        char c = *p;
        *p = '\0';
        struct stat sb;
        if (mkdir(buf, 0755) < 0 && errno != EEXIST)
            rc = rl_error_set(RL_EIO, "%s: mkdir failed: %s", buf, strerror(errno));
        else if (stat(buf, &sb) < 0 || !S_ISDIR(sb.st_mode))
            rc = rl_error_set(RL_EIO, "%s: not a directory", buf);
        *p = c;
        if (rc || !c)
            break;
    }
    free(buf);
    return rc;
}

/* ---- atomic file writing ---------------------------------------------------- */

static void s_dirname(const char *path, char *out, size_t cap)
{
    const char *slash = strrchr(path, '/');
    if (!slash) {
        snprintf(out, cap, ".");
    } else if (slash == path) {
        snprintf(out, cap, "/");
    } else {
        size_t n = (size_t)(slash - path);
        if (n >= cap)
            n = cap - 1;
        memcpy(out, path, n);
        out[n] = '\0';
    }
}

int rl_fsync_dir(const char *dir)
{
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return rl_error_set(RL_EIO, "%s: cannot open directory: %s", dir, strerror(errno));
    int rc = fsync(fd);
    int err = errno;
    close(fd);
    if (rc < 0 && err != EINVAL) /* some filesystems cannot fsync a directory */
        return rl_error_set(RL_EIO, "%s: fsync of directory failed: %s", dir, strerror(err));
    return RL_OK;
}


int rl_afile_open(rl_afile *f, const char *path)
{
    memset(f, 0, sizeof *f);
    f->fd = -1;
    f->path = path;
    if (snprintf(f->tmp, sizeof f->tmp, "%s.tmp.XXXXXX", path) >= (int)sizeof f->tmp)
        return rl_error_set(RL_EINVAL, "%s: path too long", path);
    f->fd = mkstemp(f->tmp);
    if (f->fd < 0)
        return rl_error_set(RL_EIO, "%s: cannot create temporary file: %s", path,
                            strerror(errno));
    (void)fchmod(f->fd, 0644);
    f->cap = (size_t)1 << 20;
    f->buf = malloc(f->cap);
    if (!f->buf) {
        close(f->fd);
        unlink(f->tmp);
        f->fd = -1;
        return rl_error_set(RL_ENOMEM, "%s: out of memory", path);
    }
    return RL_OK;
}

static int s_write_all(int fd, const uint8_t *p, size_t n, const char *path)
{
    while (n > 0) {
        ssize_t w = write(fd, p, n);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            return rl_error_set(RL_EIO, "%s: write failed: %s", path, strerror(errno));
        }
        p += w;
        n -= (size_t)w;
    }
    return RL_OK;
}

int rl_afile_flush(rl_afile *f)
{
    int rc = s_write_all(f->fd, f->buf, f->used, f->path);
    f->used = 0;
    return rc;
}

int rl_afile_write(rl_afile *f, const void *data, size_t n)
{
    const uint8_t *p = data;
    while (n > 0) {
        if (f->used == f->cap) {
            int rc = rl_afile_flush(f);
            if (rc < 0)
                return rc;
        }
        size_t k = f->cap - f->used < n ? f->cap - f->used : n;
        memcpy(f->buf + f->used, p, k);
        f->used += k;
        p += k;
        n -= k;
    }
    return RL_OK;
}

void rl_afile_abort(rl_afile *f)
{
    if (f->fd >= 0) {
        close(f->fd);
        unlink(f->tmp);
    }
    f->fd = -1;
    free(f->buf);
    f->buf = NULL;
}

int rl_afile_commit(rl_afile *f)
{
    int rc = rl_afile_flush(f);
    if (rc == RL_OK && fsync(f->fd) < 0)
        rc = rl_error_set(RL_EIO, "%s: fsync failed: %s", f->path, strerror(errno));
    if (rc < 0) {
        rl_afile_abort(f);
        return rc;
    }
    int fd = f->fd;
    f->fd = -1;
    free(f->buf);
    f->buf = NULL;
    if (close(fd) < 0) {
        unlink(f->tmp);
        return rl_error_set(RL_EIO, "%s: close failed: %s", f->path, strerror(errno));
    }
    if (rename(f->tmp, f->path) < 0) {
        int err = errno;
        unlink(f->tmp);
        return rl_error_set(RL_EIO, "%s: rename from %s failed: %s", f->path, f->tmp,
                            strerror(err));
    }
    char dir[4096];
    s_dirname(f->path, dir, sizeof dir);
    return rl_fsync_dir(dir);
}

int rl_file_write_atomic(const char *path, const void *data, size_t len)
{
    rl_afile f;
    int rc = rl_afile_open(&f, path);
    if (rc < 0)
        return rc;
    if ((rc = rl_afile_write(&f, data, len)) < 0) {
        rl_afile_abort(&f);
        return rc;
    }
    return rl_afile_commit(&f);
}

/* Room for `need` bytes: doubles cap (from 256) until it fits. */
static int s_text_reserve(rl_text *t, size_t need)
{
    if (t->buf && need <= t->cap)
        return RL_OK;
    size_t c = t->cap ? t->cap : 256;
    while (c < need)
        c *= 2;
    char *p = realloc(t->buf, c);
    if (!p)
        return RL_ENOMEM;
    t->buf = p;
    t->cap = c;
    return RL_OK;
}

void rl_text_put(rl_text *t, const void *data, size_t n)
{
    if (t->failed || (t->failed = s_text_reserve(t, t->len + n + 1) != RL_OK))
        return;
    memcpy(t->buf + t->len, data, n);
    t->len += n;
    t->buf[t->len] = '\0';
}

void rl_text_printf(rl_text *t, const char *fmt, ...)
{
    if (t->failed)
        return;
    size_t room = t->buf ? t->cap - t->len : 0;
    va_list ap;
    va_start(ap, fmt);
    int k = vsnprintf(room ? t->buf + t->len : NULL, room, fmt, ap);
    va_end(ap);
    if (k >= 0 && (size_t)k >= room) { /* did not fit: grow and write it again */
        if (s_text_reserve(t, t->len + (size_t)k + 1) == RL_OK) {
            va_start(ap, fmt);
            vsnprintf(t->buf + t->len, (size_t)k + 1, fmt, ap);
            va_end(ap);
        } else {
            k = -1;
        }
    }
    if (k < 0) {
        if (t->buf)
            t->buf[t->len] = '\0'; /* a cut-off attempt leaves nothing behind */
        t->failed = 1;
        return;
    }
    t->len += (size_t)k;
}

void rl_text_metric(rl_text *t, const char *name, const char *type, const char *help,
                    const char *labels, double value)
{
    if (help)
        rl_text_printf(t, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
    rl_text_printf(t, "%s{%s} %.17g\n", name, labels, value);
}

void rl_malloc_policy(void)
{
    const char *t = getenv("GLIBC_TUNABLES");
    if ((t && strstr(t, "glibc.malloc.")) || getenv("MALLOC_TRIM_THRESHOLD_") ||
        getenv("MALLOC_MMAP_THRESHOLD_"))
        return;
    mallopt(M_MMAP_THRESHOLD, 32 << 20);
    mallopt(M_TRIM_THRESHOLD, 64 << 20);
}
