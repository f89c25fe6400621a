/* cpus.c — CPU list parsing, formatting and binding (see rlrt/runtime/cpus.h). */
#include "rlrt/runtime/cpus.h"

#include "rlrt/error.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

/* One decimal index at *p (advanced past it), < RL_CPUS_MAX. */
static int s_index(const char **p, long *out)
{
    const char *s = *p;
    if (*s < '0' || *s > '9')
        return -1;
    long v = 0;
    while (*s >= '0' && *s <= '9') {
        v = v * 10 + (*s - '0');
        if (v >= RL_CPUS_MAX)
            return -2;
        s++;
    }
    *p = s;
    *out = v;
    return 0;
}

int rl_cpus_parse(const char *text, cpu_set_t *set, int *count)
{
    CPU_ZERO(set);
    if (!text || !*text)
        return rl_error_set(RL_EINVAL, "cpus: empty list (expected e.g. \"0-3,8\")");
    if (strlen(text) >= RL_CPUS_TEXT_MAX)
        return rl_error_set(RL_EINVAL, "cpus: list longer than %d characters",
                            RL_CPUS_TEXT_MAX - 1);
    const char *p = text;
    for (;;) {
        long lo, hi;
        const char *at = p;
        int rc = s_index(&p, &lo);
        if (rc == 0 && *p == '-') {
            p++;
            rc = s_index(&p, &hi);
        } else {
            hi = lo;
        }
        if (rc == -2)
            return rl_error_set(RL_EINVAL, "cpus '%s': index at '%s' is not below %d", text, at,
                                RL_CPUS_MAX);
        if (rc)
            return rl_error_set(RL_EINVAL,
                                "cpus '%s': expected an index or a range LOW-HIGH at '%s'", text,
                                p);
        if (hi < lo)
            return rl_error_set(RL_EINVAL, "cpus '%s': range %ld-%ld runs backwards", text, lo,
                                hi);
        for (long c = lo; c <= hi; c++) {
            if (CPU_ISSET((int)c, set))
                return rl_error_set(RL_EINVAL, "cpus '%s': cpu %ld listed twice", text, c);
            CPU_SET((int)c, set);
        }
        if (*p == '\0')
            break;
        if (*p != ',')
            return rl_error_set(RL_EINVAL, "cpus '%s': unexpected '%c' (expected ',' or the end)",
                                text, *p);
        p++;
    }
    if (count)
        *count = CPU_COUNT(set);
    return RL_OK;
}

int rl_cpus_format(const cpu_set_t *set, char *out, size_t size)
{
    size_t len = 0;
    if (size)
        out[0] = '\0';
    for (int c = 0; c < RL_CPUS_MAX; c++) {
        if (!CPU_ISSET(c, set))
            continue;
        int end = c;
        while (end + 1 < RL_CPUS_MAX && CPU_ISSET(end + 1, set))
            end++;
        char piece[32];
        int n = end > c ? snprintf(piece, sizeof piece, "%s%d-%d", len ? "," : "", c, end)
                        : snprintf(piece, sizeof piece, "%s%d", len ? "," : "", c);
        if (len + (size_t)n < size)
            memcpy(out + len, piece, (size_t)n + 1);
        len += (size_t)n;
        c = end;
    }
    return (int)len; /* out holds the pieces that fit, always terminated */
}

/* *have = the cores this process may run on; errors name `text` when given. */
static int s_allowed(cpu_set_t *have, const char *text)
{
    if (sched_getaffinity(0, sizeof *have, have) == 0)
        return RL_OK;
    if (text)
        return rl_error_set(RL_EIO, "cpus '%s': cannot read this process's cores: %s", text,
                            strerror(errno));
    return rl_error_set(RL_EIO, "cannot read this process's cores: %s", strerror(errno));
}

int rl_cpus_bind(const char *text, int *count)
{
    cpu_set_t want, have, missing;
    int n;
    int rc = rl_cpus_parse(text, &want, &n);
    if (rc)
        return rc;
    if ((rc = s_allowed(&have, text)))
        return rc;
    CPU_ZERO(&missing);
    for (int c = 0; c < RL_CPUS_MAX; c++)
        if (CPU_ISSET(c, &want) && !CPU_ISSET(c, &have))
            CPU_SET(c, &missing);
    if (CPU_COUNT(&missing)) {
        char miss[RL_CPUS_TEXT_MAX], may[RL_CPUS_TEXT_MAX];
        rl_cpus_format(&missing, miss, sizeof miss);
        rl_cpus_format(&have, may, sizeof may);
        return rl_error_set(RL_EINVAL,
                            "cpus '%s': this process may not run on cpu %s (it may use %s)",
                            text, miss, may);
    }
    if (sched_setaffinity(0, sizeof want, &want) != 0)
        return rl_error_set(RL_EIO, "cpus '%s': sched_setaffinity: %s", text, strerror(errno));
    if (count)
        *count = n;
    return RL_OK;
}

int rl_cpus_allowed(int *count)
{
    cpu_set_t have;
    int rc = s_allowed(&have, NULL);
    if (!rc)
        *count = CPU_COUNT(&have);
    return rc;
}
