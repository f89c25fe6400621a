/* common/core/util.h — small helpers several modules share.
 * Ownership: rl_file_read_all() returns a malloc'd buffer (NUL-terminated,
 * *len excludes the NUL) the caller frees; NULL + message on error. */
#ifndef RLRT_UTIL_H
#define RLRT_UTIL_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>
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
/* glibc's allocator as it stands once a process has freed a 32 MiB block
 * (its dynamic thresholds' ceiling), from the start: blocks under 32 MiB
 * come from the heap, and a heap gives pages back only past 64 MiB free at
 * its top, so ZeroMQ messages of 64 KiB to 4 MiB (weight buckets, batches)
 * are not freed into a heap that is trimmed, grown and faulted in again
 * each time (docs/decisions/worker-allocator.md). rl-worker and rl-driver
 * call it first thing; a malloc setting in the environment
 * (GLIBC_TUNABLES glibc.malloc.*, MALLOC_TRIM_THRESHOLD_,
 * MALLOC_MMAP_THRESHOLD_) wins and leaves it a no-op. */
void rl_malloc_policy(void);
/* calloc(1, size), or NULL with RL_ENOMEM "<who>: out of memory" set
 * ("out of memory" when who is NULL). */
void *rl_zalloc(size_t size, const char *who);
/* "object", "array", "string", "integer", "real", "boolean", "null". */
const char *rl_json_type_name(const json_t *j);
/* One accepted spelling of an enum's value, for rl_name_lookup. */
typedef struct rl_name_value {
    const char *name;
    int value;
} rl_name_value;
/* *out = the value of `name` in t[0..n): RL_OK; RL_EINVAL "<fn>: NULL
 * argument" when name or out is NULL, "<fn>: unknown <what> '<name>'
 * (expected <expected>)" when no entry has that name. */
int rl_name_lookup(const rl_name_value *t, size_t n, const char *name, int *out, const char *fn,
                   const char *what, const char *expected);


/* ---- growing text ----------------------------------------------------------
 * The buffer every text (or byte) builder appends to: buf (malloc'd, NULL
 * while empty) holds len bytes of cap, kept NUL-terminated. On an
 * allocation failure the buffer keeps what it had and `failed` is set, and
 * later appends do nothing: the builder checks `failed` once at the end
 * (and frees buf either way). Start from rl_text t = {0}. */
typedef struct rl_text {
    char *buf;
    size_t len, cap;
    int failed;
} rl_text;

void rl_text_put(rl_text *t, const void *data, size_t n);
void rl_text_printf(rl_text *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* One Prometheus sample with its HELP/TYPE header when `help` is non-NULL:
 * name{labels} value. */
void rl_text_metric(rl_text *t, const char *name, const char *type, const char *help,
                    const char *labels, double value);

/* ---- atomic file writing ----------------------------------------------------
 * rl_file_write_atomic() writes len bytes to a temporary file beside `path`,
 * fsyncs it, renames it over `path` and fsyncs the directory; a streaming
 * writer does the same with rl_afile_open / _write (buffered) / _commit, or
 * _abort to remove the temporary file. rl_fsync_dir() fsyncs a directory (to
 * make a rename or a new entry durable). */
typedef struct rl_afile {
    int fd;
    char tmp[4096];
    const char *path;
    uint8_t *buf;
    size_t used, cap;
} rl_afile;

int rl_afile_open(rl_afile *f, const char *path);
int rl_afile_write(rl_afile *f, const void *data, size_t n);
int rl_afile_commit(rl_afile *f);
void rl_afile_abort(rl_afile *f);
int rl_file_write_atomic(const char *path, const void *data, size_t len);
int rl_fsync_dir(const char *dir);

#ifdef __cplusplus
}
#endif
#endif
