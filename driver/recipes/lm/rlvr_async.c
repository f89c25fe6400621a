/* rlvr_async.c — the prefetch queue of one-step-off generation (see
 * rlvr_async.h). */
#include "driver/recipes/lm/rlvr_async.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rlrt/error.h"
#include "common/nn/models/lm/lm_model.h"
#include "rlrt/tensor.h"
#include "rlrt/dataproto.h"
#include "rlrt/wire.h"

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

/* A decimal number of 1 to 18 digits at *p (no sign, no space); advances *p. */
static int s_digits(const char **p, long long *out)
{
    const char *s = *p;
    long long v = 0;
    int n = 0;
    for (; *s >= '0' && *s <= '9' && n < 18; s++, n++)
        v = v * 10 + (*s - '0');
    if (n == 0 || (*s >= '0' && *s <= '9')) /* none, or more than 18 */
        return 0;
    *p = s;
    *out = v;
    return 1;
}

/* Partial rollouts: each sampled token's version (RL_LM_TOKEN_VERSION (B,
 * R) i64, R the responses' width) in [its row's version (the oldest),
 * `version`]; RL_EPROTO naming the entry otherwise. */
static int s_token_versions_sound(const rl_dataproto *dp, const rl_column *rows, int64_t version,
                                  const char *key)
{
    int64_t B = rl_dataproto_rows(dp);
    const rl_tensor *r = rl_dataproto_tensor(dp, RL_LM_RESPONSES);
    const rl_tensor *l = rl_dataproto_tensor_shaped(dp, RL_LM_RESPONSE_LENS, RL_I32, 1, (int64_t[]){B});
    const rl_tensor *tv = r && r->ndim == 2 && l
                              ? rl_dataproto_tensor_shaped(dp, RL_LM_TOKEN_VERSION, RL_I64, 2,
                                                           (int64_t[]){B, r->shape[1]})
                              : NULL;
    if (!tv)
        return rl_error_set(RL_EPROTO, "async state %s: %s needs %s (B, R) and %s (B) beside it",
                            key, RL_LM_TOKEN_VERSION, RL_LM_RESPONSES, RL_LM_RESPONSE_LENS);
    int64_t R = r->shape[1];
    const int64_t *v = rl_tensor_data((rl_tensor *)tv);
    const int32_t *len = rl_tensor_data((rl_tensor *)l);
    for (int64_t b = 0; b < B; b++) {
        int64_t row = rl_column_i64(rows, b);
        if (len[b] < 0 || len[b] > R)
            return rl_error_set(RL_EPROTO, "async state %s: row %lld: %s %d outside [0, %lld]", key,
                                (long long)b, RL_LM_RESPONSE_LENS, len[b], (long long)R);
        for (int64_t j = 0; j < len[b]; j++)
            if (v[b * R + j] < row || v[b * R + j] > version)
                return rl_error_set(RL_EPROTO, "async state %s: row %lld, token %lld: %s expected "
                                               "%lld .. %lld (the row's oldest .. the checkpoint's "
                                               "weights), got %lld", key, (long long)b,
                                    (long long)j, RL_LM_TOKEN_VERSION, (long long)row,
                                    (long long)version, (long long)v[b * R + j]);
    }
    return RL_OK;
}

/* 1 when round `dp` of step `step` fits the job (kept), 0 when it is to be
 * dropped; RL_EPROTO (< 0, with its message) when it is malformed. */
static int s_round_fits(const rl_dataproto *dp, int64_t step, int64_t staleness,
                        const rl_rlvr_async_expect *e, const char *key)
{
    const rl_column *c = rl_dataproto_column(dp, RL_ROLLOUT_ROW_VERSION);
    if (!c || rl_column_get_type(c) != RL_COL_INT64)
        return rl_error_set(RL_EPROTO, "async state %s: no int64 column '%s' (the weight version "
                                        "of each sample)", key, RL_ROLLOUT_ROW_VERSION);
    int64_t rows = rl_dataproto_rows(dp), oldest = e->version;
    for (int64_t b = 0; b < rows; b++) {
        int64_t v = rl_column_i64(c, b);
        if (v < 1 || v > e->version)
            return rl_error_set(RL_EPROTO, "async state %s: row %lld: %s expected 1 .. %lld (the "
                                            "checkpoint's weights), got %lld", key, (long long)b,
                                 RL_ROLLOUT_ROW_VERSION, (long long)e->version, (long long)v);
        oldest = v < oldest ? v : oldest;
    }
    const rl_tensor *t = rl_dataproto_tensor(dp, RL_LM_RESPONSES);
    if (rl_dataproto_tensor(dp, RL_LM_TOKEN_VERSION)) { /* partial rollouts */
        int rc = s_token_versions_sound(dp, c, e->version, key);
        if (rc)
            return rc;
    }
    int64_t now = e->version + (step - e->start - 1); /* the actor's version at that step */
    return step <= e->start + staleness && rows == e->rows && t && t->ndim == 2 &&
           t->shape[1] == e->response_length && oldest >= now - staleness;
}

int rl_rlvr_async_restore(rl_rlvr_async *a, const json_t *saved, const rl_rlvr_async_expect *expect,
                          int *dropped)
{
    *dropped = 0;
    if (!json_is_object(saved))
        return rl_error_set(RL_EPROTO, "async state: expected an object of rounds");
    const char *key;
    json_t *v;
    unsigned char seen[RL_RLVR_MAX_STALENESS][RL_RLVR_MAX_ASYNC_ROUNDS] = {{0}};
    json_object_foreach((json_t *)saved, key, v) {
        const char *p = key;
        long long step = 0, round = 0;
        int ok = s_digits(&p, &step);
        if (ok && *p == '.') {
            p++;
            ok = s_digits(&p, &round);
        }
        if (!ok || *p || !json_is_string(v) || step <= expect->start ||
            step > expect->start + RL_RLVR_MAX_STALENESS || round >= RL_RLVR_MAX_ASYNC_ROUNDS)
            return rl_error_set(RL_EPROTO, "async state: entry '%s' is not \"step.round\" → "
                                           "base64 text with step in %lld .. %lld and round < %d",
                                key, (long long)expect->start + 1,
                                (long long)expect->start + RL_RLVR_MAX_STALENESS,
                                RL_RLVR_MAX_ASYNC_ROUNDS);
        if (seen[step - expect->start - 1][round]++ || rl_rlvr_async_has(a, step, round))
            return rl_error_set(RL_EPROTO, "async state: round %lld of step %lld given twice",
                                round, step);
        unsigned char *buf = NULL;
        size_t len = 0;
        rl_dataproto *dp = NULL;
        int rc = s_b64_decode(json_string_value(v), &buf, &len);
        if (!rc)
            rc = rl_wire_decode_packed(buf, len, &dp);
        free(buf);
        int fits = rc ? 0 : s_round_fits(dp, step, a->staleness, expect, key);
        if (fits < 0)
            rc = fits;
        if (!rc && fits)
            rc = rl_rlvr_async_push(a, step, round, dp, NULL);
        else if (!rc) {
            rl_dataproto_free(dp);
            ++*dropped;
        } else
            rl_dataproto_free(dp);
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
