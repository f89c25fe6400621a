/* rlrt/log.h — the one log line format of the rlrt daemons.
 *
 * Purpose: rl-driver and rl-worker log every line as
 *   2026-11-22T01:24:43.123Z rollout/0 INFO message
 * (UTC time with milliseconds, role/rank, level, message) to stderr.
 * Library code does not log (it returns errors); only binaries call this.
 *
 * Invariants: rl_log is thread-safe (one write(2) per line); the identity and
 * level are process-global and set once at start-up.
 */
#ifndef RLRT_LOG_H
#define RLRT_LOG_H

#ifdef __cplusplus
extern "C" {
#endif

typedef enum rl_log_level {
    RL_LOG_DEBUG = 0,
    RL_LOG_INFO = 1,
    RL_LOG_WARN = 2,
    RL_LOG_ERROR = 3
} rl_log_level;

/* role: "driver", "rollout", ...; rank < 0 prints the role alone. */
void rl_log_set_identity(const char *role, int rank);
void rl_log_set_level(rl_log_level level);
/* Parses "debug|info|warn|error"; returns RL_EINVAL with a message otherwise. */
int rl_log_parse_level(const char *name, rl_log_level *out);
void rl_log(rl_log_level level, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

#define rl_log_debug(...) rl_log(RL_LOG_DEBUG, __VA_ARGS__)
#define rl_log_info(...) rl_log(RL_LOG_INFO, __VA_ARGS__)
#define rl_log_warn(...) rl_log(RL_LOG_WARN, __VA_ARGS__)
#define rl_log_error(...) rl_log(RL_LOG_ERROR, __VA_ARGS__)

#ifdef __cplusplus
}
#endif
#endif
