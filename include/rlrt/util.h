/* rlrt/util.h — small helpers several modules share.
 * Ownership: rl_file_read_all() returns a malloc'd buffer (NUL-terminated,
 * *len excludes the NUL) the caller frees; NULL + message on error. */
#ifndef RLRT_UTIL_H
#define RLRT_UTIL_H

#include <jansson.h>
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Whole file into memory. Errors (RL_EIO / RL_ENOMEM) read
 * "PATH: cannot open: <strerror>", "PATH: read error", "PATH: out of memory". */
char *rl_file_read_all(const char *path, size_t *len);
/* "object", "array", "string", "integer", "real", "boolean", "null". */
const char *rl_json_type_name(const json_t *j);

#ifdef __cplusplus
}
#endif
#endif
