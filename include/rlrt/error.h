/* rlrt/error.h — error codes and the thread-local error message.
 *
 * Purpose: every library function in rlrt returns 0 (RL_OK) or a negative
 * rl_status code and leaves a human-readable message that names the problem
 * (the key, the expected and the actual value). Constructors return NULL and
 * leave a message the same way. Library code never prints or exits.
 *
 * Invariants: the message buffer is per thread; it is overwritten by the next
 * failing call on the same thread and is never cleared by a successful call
 * (call rl_error_clear() to reset it explicitly).
 *
 * Ownership: rl_error_message() returns a pointer into thread-local storage,
 * valid until the next rl_error_set*() call on the same thread.
 */
#ifndef RLRT_ERROR_H
#define RLRT_ERROR_H

#include <stdarg.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum rl_status {
    RL_OK = 0,
    RL_EINVAL = -1,      /* bad argument or bad input value */
    RL_ENOMEM = -2,      /* allocation failed */
    RL_EIO = -3,         /* file or socket I/O failed */
    RL_EPROTO = -4,      /* malformed message / wire data */
    RL_ESHAPE = -5,      /* shape or row-count mismatch */
    RL_EDTYPE = -6,      /* dtype mismatch or unknown dtype */
    RL_ERANGE = -7,      /* index or value out of range, overflow */
    RL_ENOTFOUND = -8,   /* key, file or method not found */
    RL_ETIMEOUT = -9,    /* deadline passed */
    RL_ESTATE = -10,     /* object in the wrong state for this call */
    RL_ENUMERIC = -11,   /* NaN/Inf or numerically invalid input */
    RL_EUNSUPPORTED = -12, /* feature not available in this build */
    RL_EEXIST = -13,     /* duplicate name */
    RL_ECONFIG = -14,    /* configuration error (message carries file:line) */
    RL_EPEER = -15       /* remote peer failed or disappeared */
} rl_status;

/* Sets the thread's error message (printf format) and returns `code`, so a
 * failing function can `return rl_error_set(RL_EINVAL, "...", ...);`. */
int rl_error_set(int code, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
int rl_error_setv(int code, const char *fmt, va_list ap);

/* Prepends "prefix: " to the current message (for adding context while an
 * error travels up) and returns `code`. */
int rl_error_wrap(int code, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* The last message set on this thread ("" if none). */
const char *rl_error_message(void);
/* The code passed to the last rl_error_set() on this thread. */
int rl_error_code(void);
/* A short constant name for a status code, e.g. "RL_ESHAPE". */
const char *rl_status_name(int code);
void rl_error_clear(void);

#ifdef __cplusplus
}
#endif
#endif
