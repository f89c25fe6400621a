/* selftest.c — the cluster check recipe (like nccl-tests for rlrt): every
 * dispatch mode on every role, uneven dp_compute, payload integrity, handler
 * errors, unknown methods, overlapped asynchronous calls, every collective
 * (verified exactly), a versioned weight-channel transfer actor -> rollout and
 * a direct env <-> rollout data channel; prints a table and fails if any check
 * fails. `selftest.rounds=N` repeats it (the weight version grows per round). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../recipe.h"
#include "rlrt/rlrt.h"

typedef struct {
    int passed, failed;
} s_tally;

static double s_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static void s_report(s_tally *t, const char *check, const char *role, int ranks, int ok,
                     double ms, const char *detail)
{
    printf("  %-30s %-8s %5d  %-4s %9.1f  %s\n", check, role, ranks, ok ? "pass" : "FAIL", ms,
           ok ? "" : detail);
    fflush(stdout);
    if (ok)
        t->passed++;
    else
        t->failed++;
}

/* rows × 4 f32 "x" with x[r][j] = r + j/10. */
static rl_dataproto *s_batch(int64_t rows, int64_t cols)
{
    rl_dataproto *dp = rl_dataproto_new();
    int64_t shape[2] = {rows, cols};
    float *x = rl_tensor_data(rl_dataproto_new_tensor(dp, "x", RL_F32, 2, shape));
    for (int64_t i = 0; i < rows * cols; i++)
        x[i] = (float)(i / cols) + (float)(i % cols) / 10.0f;
    return dp;
}

static int s_check_add(const rl_dataproto *in, const rl_dataproto *out, double value, char *why,
                       size_t len)
{
    if (!out)
        return snprintf(why, len, "no payload"), 0;
    const rl_tensor *a = rl_dataproto_tensor(in, "x"), *b = rl_dataproto_tensor(out, "x");
    if (!b || b->numel != a->numel)
        return snprintf(why, len, "x missing or wrong size"), 0;
    const float *pa = rl_tensor_data(a), *pb = rl_tensor_data(b);
    for (int64_t i = 0; i < a->numel; i++)
        if (pb[i] != pa[i] + (float)value)
            return snprintf(why, len, "x[%lld] = %g, expected %g", (long long)i, pb[i],
                            pa[i] + value), 0;
    return 1;
}

static void s_role_checks(rl_driver *d, rl_group *g, const rl_config *job, s_tally *t)
{
    const char *role = rl_group_role(g);
    int n = rl_group_size(g);
    char why[512];
    int64_t rows = 37, mb = 8;
    rl_config_get_int_or(job, "selftest.rows", 37, &rows);
    rl_config_get_int_or(job, "selftest.payload_mb", 8, &mb);

    /* one_to_all: every rank answers with its own rank */
    double t0 = s_now_ms();
    rl_future *f = rl_group_call(g, "whoami", RL_DISPATCH_ONE_TO_ALL, NULL);
    int ok = f && rl_future_wait(f, 30000) == 0;
    snprintf(why, sizeof why, "%s", rl_error_message());
    for (int r = 0; ok && r < n; r++) {
        rl_dataproto *o = NULL;
        rl_future_take_rank(f, r, &o);
        const rl_column *c = o ? rl_dataproto_column(o, "rank") : NULL;
        if (!c || rl_column_i64(c, 0) != r) {
            snprintf(why, sizeof why, "rank %d answered as %lld", r, c ? (long long)rl_column_i64(c, 0) : -1LL);
            ok = 0;
        }
        rl_dataproto_free(o);
    }
    rl_future_free(f);
    s_report(t, "one_to_all whoami", role, n, ok, s_now_ms() - t0, why);

    /* dp_compute with rows not divisible by the group size */
    t0 = s_now_ms();
    rl_dataproto *in = s_batch(rows, 4);
    json_object_set_new(rl_dataproto_meta(in), "value", json_real(0.5));
    rl_dataproto *out = NULL;
    ok = rl_group_call_sync(g, "add", RL_DISPATCH_DP_COMPUTE, in, &out) == 0;
    snprintf(why, sizeof why, "%s", rl_error_message());
    if (ok && rl_dataproto_rows(out) != rows) {
        snprintf(why, sizeof why, "%lld rows back for %lld", (long long)rl_dataproto_rows(out), (long long)rows);
        ok = 0;
    }
    ok = ok && s_check_add(in, out, 0.5, why, sizeof why);
    if (ok) { /* padded to a multiple of n, then equal chunks of ceil(rows/n) */
        const rl_column *rk = rl_dataproto_column(out, "rank");
        int64_t per = (rows + n - 1) / n, r0 = 0;
        for (int r = 0; ok && r < n; r++) {
            int64_t cnt = r0 + per <= rows ? per : rows - r0;
            for (int64_t i = r0; i < r0 + cnt; i++)
                if (rl_column_i64(rk, i) != r) {
                    snprintf(why, sizeof why, "row %lld computed by rank %lld, expected %d",
                             (long long)i, (long long)rl_column_i64(rk, i), r);
                    ok = 0;
                    break;
                }
            r0 += cnt;
        }
    }
    rl_dataproto_free(out);
    rl_dataproto_free(in);
    snprintf(why + strlen(why), sizeof why - strlen(why), "%s", "");
    char label[64];
    snprintf(label, sizeof label, "dp_compute add (%lld rows)", (long long)rows);
    s_report(t, label, role, n, ok, s_now_ms() - t0, why);

    /* rank_zero echo of a large payload: bytes come back intact */
    t0 = s_now_ms();
    int64_t cols = mb * 1024 * 1024 / 4 / 64;
    in = s_batch(64, cols > 0 ? cols : 1);
    ok = rl_group_call_sync(g, "echo", RL_DISPATCH_RANK_ZERO, in, &out) == 0;
    snprintf(why, sizeof why, "%s", rl_error_message());
    if (ok && !rl_dataproto_equal(in, out)) {
        snprintf(why, sizeof why, "echoed payload differs");
        ok = 0;
    }
    rl_dataproto_free(out);
    rl_dataproto_free(in);
    snprintf(label, sizeof label, "rank_zero echo %lld MiB", (long long)mb);
    s_report(t, label, role, 1, ok, s_now_ms() - t0, why);

    /* all_to_all: each rank its own batch and value */
    t0 = s_now_ms();
    rl_dataproto **per = calloc((size_t)n, sizeof *per);
    for (int r = 0; r < n; r++) {
        per[r] = s_batch(3 + r, 2);
        json_object_set_new(rl_dataproto_meta(per[r]), "value", json_integer(10 * r));
    }
    f = rl_group_call_each(g, "add", per);
    ok = rl_future_wait(f, 30000) == 0;
    snprintf(why, sizeof why, "%s", rl_error_message());
    for (int r = 0; ok && r < n; r++) {
        rl_dataproto *o = NULL;
        rl_future_take_rank(f, r, &o);
        ok = s_check_add(per[r], o, 10.0 * r, why, sizeof why);
        rl_dataproto_free(o);
    }
    rl_future_free(f);
    for (int r = 0; r < n; r++)
        rl_dataproto_free(per[r]);
    free(per);
    s_report(t, "all_to_all add", role, n, ok, s_now_ms() - t0, why);

    /* a handler error comes back as an error naming the worker and method */
    t0 = s_now_ms();
    int rc = rl_group_call_sync(g, "fail", RL_DISPATCH_RANK_ZERO, NULL, NULL);
    snprintf(why, sizeof why, "%s", rc ? rl_error_message() : "call succeeded");
    char want[128];
    snprintf(want, sizeof want, "%s/0: method 'fail' failed: fail requested on %s/0", role, role);
    s_report(t, "handler error -> ERROR", role, 1, rc != 0 && strstr(why, want), s_now_ms() - t0, why);

    t0 = s_now_ms();
    rc = rl_group_call_sync(g, "no_such_method", RL_DISPATCH_ONE_TO_ALL, NULL, NULL);
    snprintf(why, sizeof why, "%s", rc ? rl_error_message() : "call succeeded");
    s_report(t, "unknown method -> ERROR", role, n, rc != 0 && strstr(why, "unknown method 'no_such_method'"),
             s_now_ms() - t0, why);
}

/* Calls on every role at once: the total time must be close to one call's,
 * not the sum (futures overlap roles). */
static void s_overlap_check(rl_driver *d, const rl_config *job, s_tally *t)
{
    int64_t ms = 300;
    rl_config_get_int_or(job, "selftest.sleep_ms", 300, &ms);
    rl_future *fs[4] = {0};
    int n = 0;
    rl_dataproto *in = rl_dataproto_new();
    rl_dataproto_set_rows(in, 0);
    json_object_set_new(rl_dataproto_meta(in), "ms", json_integer(ms));
    double t0 = s_now_ms();
    const char *roles[] = {"rollout", "actor", "env", "reward"};
    for (int r = 0; r < 4; r++) {
        rl_error_clear();
        rl_group *g = rl_driver_group(d, roles[r]);
        if (g)
            fs[n++] = rl_group_call(g, "sleep", RL_DISPATCH_ONE_TO_ALL, in);
    }
    int ok = 1;
    char why[512] = "";
    for (int i = 0; i < n; i++) {
        if (rl_future_wait(fs[i], 30000)) {
            ok = 0;
            snprintf(why, sizeof why, "%s", rl_error_message());
        }
        rl_future_free(fs[i]);
    }
    double el = s_now_ms() - t0;
    if (ok && n > 1 && el > 1.8 * (double)ms) {
        snprintf(why, sizeof why, "%d roles × %lld ms took %.0f ms: not overlapped", n, (long long)ms, el);
        ok = 0;
    }
    rl_dataproto_free(in);
    char label[64];
    snprintf(label, sizeof label, "async overlap sleep %lld ms", (long long)ms);
    s_report(t, label, "all", n, ok, el, why);
}

/* Every collective among the ranks of each multi-rank group, for buffer
 * sizes 0, W - 1 (smaller than the world) and an odd size. */
static void s_collective_check(rl_driver *d, s_tally *t)
{
    const char *roles[] = {"actor", "reward", "rollout", "env"};
    for (int k = 0; k < 4; k++) {
        rl_error_clear();
        rl_group *g = rl_driver_group(d, roles[k]);
        if (!g)
            continue;
        int W = rl_group_size(g);
        int64_t counts[3] = {0, W - 1, 1000003};
        for (int c = 0; c < 3; c++) {
            if (c == 1 && W == 1)
                continue;
            double t0 = s_now_ms();
            char why[512] = "";
            /* rank 0 makes the id on its host; the driver hands it out */
            rl_dataproto *req = rl_dataproto_new_meta(json_pack("{s:s}", "host", rl_group_address(g, 0))), *res = NULL;
            int ok = rl_group_call_sync(g, "comm_id_create", RL_DISPATCH_RANK_ZERO, req, &res) == 0;
            rl_dataproto_free(req);
            if (ok) {
                const char *id = json_string_value(json_object_get(rl_dataproto_meta(res), "comm_id"));
                rl_dataproto *in = rl_dataproto_new_meta(json_pack("{s:s, s:I}", "comm_id", id ? id : "",
                                                    "count", (json_int_t)counts[c]));
                ok = rl_group_call_sync(g, "coll_check", RL_DISPATCH_ONE_TO_ALL, in, NULL) == 0;
                rl_dataproto_free(in);
            }
            rl_dataproto_free(res);
            if (!ok)
                snprintf(why, sizeof why, "%s", rl_error_message());
            char label[64];
            snprintf(label, sizeof label, "collectives %lld floats", (long long)counts[c]);
            s_report(t, label, roles[k], W, ok, s_now_ms() - t0, why);
        }
    }
}

/* actor/0 sends a versioned buffer over the weight channel to every rollout
 * rank; each checks every value and the version it switched to. */
static void s_weight_check(rl_driver *d, const rl_config *job, int64_t version, s_tally *t)
{
    rl_error_clear();
    rl_group *actor = rl_driver_group(d, "actor"), *rollout = rl_driver_group(d, "rollout");
    if (!actor || !rollout)
        return;
    int64_t mb = 16;
    rl_config_get_int_or(job, "selftest.weight_mb", 16, &mb);
    int64_t count = mb * 1024 * 1024 / 4;
    double t0 = s_now_ms();
    char why[512] = "";
    rl_dataproto *open = rl_dataproto_new_meta(json_pack("{s:s}", "host", rl_group_address(actor, 0))), *res = NULL;
    int ok = rl_group_call_sync(actor, "weights_open", RL_DISPATCH_RANK_ZERO, open, &res) == 0;
    rl_dataproto_free(open);
    if (ok) {
        const char *ep = json_string_value(json_object_get(rl_dataproto_meta(res), "endpoint"));
        rl_dataproto *send = rl_dataproto_new_meta(json_pack("{s:I, s:I, s:i}", "version", (json_int_t)version,
                                              "count", (json_int_t)count, "receivers",
                                              rl_group_size(rollout)));
        rl_dataproto *recv = rl_dataproto_new_meta(json_pack("{s:s, s:I}", "endpoint", ep, "count", (json_int_t)count));
        rl_future *fs = rl_group_call(actor, "weights_send", RL_DISPATCH_RANK_ZERO, send);
        rl_future *fr = rl_group_call(rollout, "weights_recv", RL_DISPATCH_ONE_TO_ALL, recv);
        ok = rl_future_wait(fr, 60000) == 0 && rl_future_wait(fs, 60000) == 0;
        if (!ok)
            snprintf(why, sizeof why, "%s", rl_error_message());
        for (int r = 0; ok && r < rl_group_size(rollout); r++) {
            rl_dataproto *o = NULL;
            rl_future_take_rank(fr, r, &o);
            json_int_t v = json_integer_value(json_object_get(rl_dataproto_meta(o), "version"));
            if (v != version) {
                snprintf(why, sizeof why, "rollout/%d switched to version %lld, expected %lld", r,
                         (long long)v, (long long)version);
                ok = 0;
            }
            rl_dataproto_free(o);
        }
        rl_future_free(fs);
        rl_future_free(fr);
        rl_dataproto_free(send);
        rl_dataproto_free(recv);
    } else {
        snprintf(why, sizeof why, "%s", rl_error_message());
    }
    rl_dataproto_free(res);
    char label[64];
    snprintf(label, sizeof label, "weight channel %lld MiB v%lld", (long long)mb, (long long)version);
    s_report(t, label, "actor>rollout", rl_group_size(rollout), ok, s_now_ms() - t0, why);
}

/* env rank r and rollout rank r exchange batches over a direct channel; the
 * driver only sets it up and reads the summary. */
static void s_channel_check(rl_driver *d, s_tally *t)
{
    rl_error_clear();
    rl_group *env = rl_driver_group(d, "env"), *rollout = rl_driver_group(d, "rollout");
    if (!env || !rollout)
        return;
    int n = rl_group_size(env);
    char why[512] = "";
    double t0 = s_now_ms();
    if (n != rl_group_size(rollout)) {
        s_report(t, "data channel env<>rollout", "env", n, 1, 0, "");
        printf("    (skipped: env and rollout have different rank counts)\n");
        return;
    }
    rl_dataproto **per = calloc((size_t)n, sizeof *per);
    for (int r = 0; r < n; r++)
        per[r] = rl_dataproto_new_meta(json_pack("{s:s}", "host", rl_group_address(env, r)));
    rl_future *f = rl_group_call_each(env, "channel_open", per);
    int ok = rl_future_wait(f, 30000) == 0;
    for (int r = 0; r < n; r++) {
        rl_dataproto *o = NULL;
        if (ok)
            rl_future_take_rank(f, r, &o);
        const char *ep = o ? json_string_value(json_object_get(rl_dataproto_meta(o), "endpoint")) : "";
        rl_dataproto_free(per[r]);
        per[r] = rl_dataproto_new_meta(json_pack("{s:s}", "endpoint", ep ? ep : ""));
        rl_dataproto_free(o);
    }
    rl_future_free(f);
    if (ok) {
        f = rl_group_call_each(rollout, "channel_connect", per);
        ok = rl_future_wait(f, 30000) == 0;
        rl_future_free(f);
    }
    if (ok) {
        rl_dataproto *serve = rl_dataproto_new_meta(json_pack("{s:i, s:i}", "steps", 50, "serve", 1));
        rl_dataproto *ping = rl_dataproto_new_meta(json_pack("{s:i, s:i}", "steps", 50, "serve", 0));
        rl_future *fs = rl_group_call(env, "channel_pingpong", RL_DISPATCH_ONE_TO_ALL, serve);
        rl_future *fp = rl_group_call(rollout, "channel_pingpong", RL_DISPATCH_ONE_TO_ALL, ping);
        ok = rl_future_wait(fp, 60000) == 0 && rl_future_wait(fs, 60000) == 0;
        rl_future_free(fs);
        rl_future_free(fp);
        rl_dataproto_free(serve);
        rl_dataproto_free(ping);
    }
    if (!ok)
        snprintf(why, sizeof why, "%s", rl_error_message());
    for (int r = 0; r < n; r++)
        rl_dataproto_free(per[r]);
    free(per);
    s_report(t, "data channel env<>rollout 50x", "env", n, ok, s_now_ms() - t0, why);
}

static int s_run(rl_driver *d, const rl_config *job)
{
    int64_t rounds = 1;
    rl_config_get_int_or(job, "selftest.rounds", 1, &rounds);
    s_tally t = {0, 0};
    const char *roles[] = {"rollout", "actor", "env", "reward"};
    for (int64_t round = 1; round <= rounds && !rl_driver_interrupted(d); round++) {
        printf("selftest round %lld/%lld\n", (long long)round, (long long)rounds);
        printf("  %-30s %-8s %5s  %-4s %9s  %s\n", "check", "role", "ranks", "ok", "ms", "detail");
        for (int r = 0; r < 4 && !rl_driver_interrupted(d); r++) {
            rl_group *g = rl_driver_group(d, roles[r]);
            if (g)
                s_role_checks(d, g, job, &t);
        }
        if (!rl_driver_interrupted(d))
            s_overlap_check(d, job, &t);
        if (!rl_driver_interrupted(d))
            s_collective_check(d, &t);
        if (!rl_driver_interrupted(d))
            s_weight_check(d, job, round, &t);
        if (!rl_driver_interrupted(d))
            s_channel_check(d, &t);
    }
    printf("selftest: %d passed, %d failed\n", t.passed, t.failed);
    fflush(stdout);
    if (rl_driver_interrupted(d))
        return RL_OK;
    return t.failed ? rl_error_set(RL_EINVAL, "%d selftest checks failed", t.failed) : RL_OK;
}

const rl_recipe rl_recipe_selftest = {
    .name = "selftest",
    .summary = "check every dispatch mode, errors and overlap on every role",
    .test_methods = 1,
    .defaults = (const char *const[]){"rollout: {}\n"
                     "actor: {}\n"
                     "env: {}\n"
                     "reward: {}\n"
                     "selftest:\n"
                     "  rounds: 1\n"
                     "  rows: 37\n"
                     "  payload_mb: 8\n"
                     "  sleep_ms: 300\n"
                     "  weight_mb: 16\n", NULL},
    .run = s_run,
};
