/* rlrt/util.h — small helpers several modules share.
 * Ownership: rl_file_read_all() returns a malloc'd buffer (NUL-terminated,
 * *len excludes the NUL) the caller frees; NULL + message on error. */
#ifndef RLRT_UTIL_H
#define RLRT_UTIL_H

#include <jansson.h>
#include <stddef.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Whole file into memory. Errors (RL_EIO / RL_ENOMEM) read
 * "PATH: cannot open: <strerror>", "PATH: read error", "PATH: out of memory". */
char *rl_file_read_all(const char *path, size_t *len);
/* mkdir -p: creates `path` and its missing parents (mode 0755); RL_EIO
 * naming the component that failed, or a component that is not a directory. */
int rl_mkdir_p(const char *path);
/* Rewrites `path` through a filter, crash-safely: `copy` reads the old file
 * and writes what stays to a temporary file beside it, which is flushed,
 * fsynced and renamed over `path` only if copy returned 0 (else removed).
 * A missing `path` is 0 when missing_ok, RL_EIO otherwise. */
typedef int (*rl_rewrite_fn)(FILE *in, FILE *out, const char *tmp, void *ctx);
int rl_file_rewrite(const char *path, int missing_ok, rl_rewrite_fn copy, void *ctx);
/* "object", "array", "string", "integer", "real", "boolean", "null". */
const char *rl_json_type_name(const json_t *j);

#ifdef __cplusplus
}
#endif
#endif
