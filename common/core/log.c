/* log.c — single-line daemon logging (see rlrt/log.h). */
#include "rlrt/log.h"
#include "rlrt/error.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

static char s_identity[64] = "rlrt";
static rl_log_level s_level = RL_LOG_INFO;

void rl_log_set_identity(const char *role, int rank)
{
    if (rank < 0)
        snprintf(s_identity, sizeof s_identity, "%s", role);
    else
        snprintf(s_identity, sizeof s_identity, "%s/%d", role, rank);
}

void rl_log_set_level(rl_log_level level) { s_level = level; }

int rl_log_parse_level(const char *name, rl_log_level *out)
{
    static const char *names[] = {"debug", "info", "warn", "error"};
    for (int i = 0; i < 4; i++) {
        if (strcasecmp(name, names[i]) == 0) {
            *out = (rl_log_level)i;
            return RL_OK;
        }
    }
    return rl_error_set(RL_EINVAL,
                        "log level '%s' is not one of debug, info, warn, error",
                        name);
}

void rl_log(rl_log_level level, const char *fmt, ...)
{
    static const char *tags[] = {"DEBUG", "INFO", "WARN", "ERROR"};
    if (level < s_level)
        return;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    struct tm tm;
    gmtime_r(&ts.tv_sec, &tm);
    char line[2048];
    int n = snprintf(line, sizeof line,
                     "%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ %s %s ",
                     tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour,
                     tm.tm_min, tm.tm_sec, ts.tv_nsec / 1000000, s_identity,
                     tags[level]);
    va_list ap;
    va_start(ap, fmt);
    if (n > 0 && (size_t)n < sizeof line)
        n += vsnprintf(line + n, sizeof line - (size_t)n, fmt, ap);
    va_end(ap);
    if (n < 0)
        return;
    if ((size_t)n >= sizeof line - 1)
        n = (int)sizeof line - 2;
    line[n++] = '\n';
    ssize_t w = write(STDERR_FILENO, line, (size_t)n);
    (void)w;
}
