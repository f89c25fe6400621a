/* util.c — shared helpers (see rlrt/util.h). */
#include "rlrt/util.h"
#include "rlrt/error.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

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
