/* error.c — thread-local error messages (see rlrt/error.h). */
#include "rlrt/error.h"

#include <stdio.h>
#include <string.h>

#define RL_ERROR_MAX 1024

static _Thread_local char s_message[RL_ERROR_MAX];
static _Thread_local int s_code;

int rl_error_setv(int code, const char *fmt, va_list ap)
{
    /* through a copy: an argument may be the current message itself */
    char msg[sizeof s_message];
    int n = vsnprintf(msg, sizeof msg, fmt, ap);
    /* the text and its NUL, not the whole buffer (an error is set at the
     * end of every socket drain) */
    size_t len = n < 0 ? 0 : (size_t)n < sizeof msg ? (size_t)n : sizeof msg - 1;
    msg[len] = '\0';
    memcpy(s_message, msg, len + 1);
    s_code = code;
    return code;
}

int rl_error_set(int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    rl_error_setv(code, fmt, ap);
    va_end(ap);
    return code;
}

int rl_error_wrap(int code, const char *fmt, ...)
{
    char prefix[RL_ERROR_MAX];
    char old[RL_ERROR_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(prefix, sizeof prefix, fmt, ap);
    va_end(ap);
    memcpy(old, s_message, sizeof old);
    size_t n = strlen(prefix);
    if (n > RL_ERROR_MAX - 3)
        n = RL_ERROR_MAX - 3;
    memcpy(s_message, prefix, n);
    memcpy(s_message + n, ": ", 2);
    size_t rest = RL_ERROR_MAX - 1 - (n + 2);
    size_t m = strnlen(old, rest);
    memcpy(s_message + n + 2, old, m);
    s_message[n + 2 + m] = '\0';
    s_code = code;
    return code;
}

const char *rl_error_message(void) { return s_message; }
int rl_error_code(void) { return s_code; }

void rl_error_clear(void)
{
    s_message[0] = '\0';
    s_code = RL_OK;
}

const char *rl_status_name(int code)
{
    switch (code) {
    case RL_OK: return "RL_OK";
    case RL_EINVAL: return "RL_EINVAL";
    case RL_ENOMEM: return "RL_ENOMEM";
    case RL_EIO: return "RL_EIO";
    case RL_EPROTO: return "RL_EPROTO";
    case RL_ESHAPE: return "RL_ESHAPE";
    case RL_EDTYPE: return "RL_EDTYPE";
    case RL_ERANGE: return "RL_ERANGE";
    case RL_ENOTFOUND: return "RL_ENOTFOUND";
    case RL_ETIMEOUT: return "RL_ETIMEOUT";
    case RL_ESTATE: return "RL_ESTATE";
    case RL_ENUMERIC: return "RL_ENUMERIC";
    case RL_EUNSUPPORTED: return "RL_EUNSUPPORTED";
    case RL_EEXIST: return "RL_EEXIST";
    case RL_ECONFIG: return "RL_ECONFIG";
    case RL_EPEER: return "RL_EPEER";
    default: return "RL_E?";
    }
}
