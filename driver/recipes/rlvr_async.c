/* rlvr_async.c — the prefetch queue of one-step-off generation (see
 * rlvr_async.h). */
#include "rlvr_async.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rlrt/rlrt.h"

int rl_rlvr_async_push(rl_rlvr_async *a, int64_t step, int64_t round, rl_dataproto *dp,
                       rl_future *f)
{
    if (a->n >= RL_RLVR_ASYNC_QUEUE) {
        rl_dataproto_free(dp);
        rl_future_free(f);
        return rl_error_set(RL_ESTATE, "async: more than %d rounds in flight", RL_RLVR_ASYNC_QUEUE);
    }
    a->q[a->n++] = (rl_rlvr_prefetch){.step = step, .round = round, .dp = dp, .f = f};
    return RL_OK;
}

static int s_find(const rl_rlvr_async *a, int64_t step, int64_t round)
{
    for (int i = 0; i < a->n; i++)
        if (a->q[i].step == step && a->q[i].round == round)
            return i;
    return -1;
}

int rl_rlvr_async_has(const rl_rlvr_async *a, int64_t step, int64_t round)
{
    return s_find(a, step, round) >= 0;
}

static int s_finish(rl_rlvr_prefetch *p, rl_lm_job *j)
{
    if (!p->f)
        return RL_OK;
    rl_future *f = p->f;
    p->f = NULL;
    int rc = rl_lm_job_rollout_finish(j, &p->dp, f, &p->gen_s, &p->reward_s);
    return rc ? rl_error_wrap(rc, "round %lld prefetched for step %lld", (long long)p->round,
                              (long long)p->step)
              : RL_OK;
}

/* Takes entry i out of the queue (order kept). */
static rl_rlvr_prefetch s_remove(rl_rlvr_async *a, int i)
{
    rl_rlvr_prefetch p = a->q[i];
    memmove(&a->q[i], &a->q[i + 1], sizeof a->q[0] * (size_t)(a->n - i - 1));
    a->n--;
    return p;
}

int rl_rlvr_async_take(rl_rlvr_async *a, rl_lm_job *j, int64_t step, int64_t round,
                       rl_dataproto **out, double *gen_s, double *reward_s)
{
    *out = NULL;
    int i = s_find(a, step, round);
    if (i < 0)
        return rl_error_set(RL_ENOTFOUND, "async: no round %lld queued for step %lld",
                            (long long)round, (long long)step);
    rl_rlvr_prefetch p = s_remove(a, i);
    int rc = s_finish(&p, j);
    if (rc) {
        rl_dataproto_free(p.dp);
        return rc;
    }
    *out = p.dp;
    *gen_s = p.gen_s;
    *reward_s = p.reward_s;
    return RL_OK;
}

int rl_rlvr_async_drop_through(rl_rlvr_async *a, int64_t step)
{
    int dropped = 0;
    for (int i = 0; i < a->n;) {
        if (a->q[i].step > step) {
            i++;
            continue;
        }
        rl_rlvr_prefetch p = s_remove(a, i);
        rl_future_free(p.f); /* in flight: its reply is dropped when it comes */
        rl_dataproto_free(p.dp);
        dropped++;
    }
    return dropped;
}

/* ---- base64 (RFC 4648, with padding) ---------------------------------------------------- */

static const char s_b64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

static char *s_b64_encode(const unsigned char *in, size_t n)
{
    char *out = malloc(4 * ((n + 2) / 3) + 1), *o = out;
    if (!out)
        return NULL;
    for (size_t i = 0; i < n; i += 3) {
        unsigned v = (unsigned)in[i] << 16 | (i + 1 < n ? (unsigned)in[i + 1] << 8 : 0) |
                     (i + 2 < n ? in[i + 2] : 0);
        *o++ = s_b64[v >> 18 & 63];
        *o++ = s_b64[v >> 12 & 63];
        *o++ = i + 1 < n ? s_b64[v >> 6 & 63] : '=';
        *o++ = i + 2 < n ? s_b64[v & 63] : '=';
    }
    *o = '\0';
    return out;
}

static int s_b64_val(char c)
{
    const char *p = c ? strchr(s_b64, c) : NULL;
    return p ? (int)(p - s_b64) : -1;
}

/* Decodes `in` (length a multiple of 4) into a malloc'd buffer; RL_EPROTO on
 * anything else. */
static int s_b64_decode(const char *in, unsigned char **out, size_t *n)
{
    size_t len = strlen(in);
    if (len % 4)
        return rl_error_set(RL_EPROTO, "async state: base64 length %zu is not a multiple of 4", len);
    unsigned char *buf = malloc(len / 4 * 3 + 1);
    if (!buf)
        return rl_error_set(RL_ENOMEM, "async state: out of memory");
    size_t k = 0;
    for (size_t i = 0; i < len; i += 4) {
        int v[4], pad = 0;
        for (int t = 0; t < 4; t++) {
            int last = i + 4 == len;
            if (last && t >= 2 && in[i + t] == '=' && (t == 3 || in[i + 3] == '=')) {
                v[t] = 0;
                pad++;
            } else if ((v[t] = s_b64_val(in[i + t])) < 0) {
                free(buf);
                return rl_error_set(RL_EPROTO, "async state: bad base64 character at %zu", i + t);
            }
        }
        unsigned x = (unsigned)v[0] << 18 | (unsigned)v[1] << 12 | (unsigned)v[2] << 6 | (unsigned)v[3];
        buf[k++] = (unsigned char)(x >> 16);
        if (pad < 2)
            buf[k++] = (unsigned char)(x >> 8);
        if (pad < 1)
            buf[k++] = (unsigned char)x;
    }
    *out = buf;
    *n = k;
    return RL_OK;
}

int rl_rlvr_async_save(rl_rlvr_async *a, rl_lm_job *j, json_t **out)
{
    *out = json_object();
    if (!*out)
        return rl_error_set(RL_ENOMEM, "async state: out of memory");
    for (int i = 0; i < a->n; i++) {
        int rc = s_finish(&a->q[i], j);
        void *buf = NULL;
        size_t len = 0;
        if (!rc)
            rc = rl_wire_encode_packed(a->q[i].dp, &buf, &len);
        char *text = rc ? NULL : s_b64_encode(buf, len);
        free(buf);
        char key[48];
        snprintf(key, sizeof key, "%lld.%lld", (long long)a->q[i].step,
                 (long long)a->q[i].round);
        if (!rc && (!text || json_object_set_new(*out, key, json_string(text))))
            rc = rl_error_set(RL_ENOMEM, "async state: out of memory");
        free(text);
        if (rc) {
            json_decref(*out);
            *out = NULL;
            return rc;
        }
    }
    return RL_OK;
}

int rl_rlvr_async_restore(rl_rlvr_async *a, const json_t *saved)
{
    const char *key;
    json_t *v;
    json_object_foreach((json_t *)saved, key, v) {
        char *end = NULL;
        long long step = strtoll(key, &end, 10), round = 0;
        if (end && *end == '.') {
            const char *at = end + 1;
            round = strtoll(at, &end, 10);
            if (end == at)
                end = NULL;
        }
        if (!json_is_string(v) || !end || *end || step < 1 || round < 0 ||
            round >= RL_RLVR_MAX_ASYNC_ROUNDS)
            return rl_error_set(RL_EPROTO, "async state: entry '%s' is not \"step.round\" "
                                           "(round < %d) → base64 text", key,
                                RL_RLVR_MAX_ASYNC_ROUNDS);
        if (rl_rlvr_async_has(a, step, round))
            return rl_error_set(RL_EPROTO, "async state: round %lld of step %lld given twice",
                                round, step);
        unsigned char *buf = NULL;
        size_t len = 0;
        rl_dataproto *dp = NULL;
        int rc = s_b64_decode(json_string_value(v), &buf, &len);
        if (!rc)
            rc = rl_wire_decode_packed(buf, len, &dp);
        free(buf);
        if (!rc)
            rc = rl_rlvr_async_push(a, step, round, dp, NULL);
        if (rc)
            return rl_error_wrap(rc, "async state of %s", key);
    }
    return RL_OK;
}

void rl_rlvr_async_close(rl_rlvr_async *a)
{
    for (int i = 0; i < a->n; i++) {
        rl_future_free(a->q[i].f);
        rl_dataproto_free(a->q[i].dp);
    }
    a->n = 0;
}
