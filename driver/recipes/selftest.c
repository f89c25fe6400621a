/* selftest.c — the cluster check recipe (like nccl-tests for rlrt): every
 * dispatch mode on every started role, uneven dp_compute, payload integrity,
 * handler errors, unknown methods, overlapped asynchronous calls, every
 * collective (verified exactly), a versioned weight-channel transfer
 * (selftest.weight_roles, default actor -> rollout) and a direct data
 * channel (selftest.channel_roles, default rollout <-> reward); prints a
 * table and fails if any check fails. A check whose roles the cluster does
 * not have is reported as SKIP with the reason, never as a pass.
 * `selftest.rounds=N` repeats it (the weight version grows per round).
 *
 * The workers serve the test methods for this recipe (.test_methods = 1,
 * workers/selftest/test_methods.h); the roles are whatever the cluster has. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "driver/recipes/phases.h"
#include "rlrt/error.h"
#include "rlrt/dtype.h"
#include "rlrt/tensor.h"
#include "rlrt/dataproto.h"
#include "rlrt/config.h"
#include "rlrt/runtime/cluster.h"
#include "common/schema/selftest.h"
#include "workers/contracts.h"

typedef enum { S_PASS, S_FAIL, S_SKIP } s_status;

typedef struct {
    int passed, failed, skipped;
} s_tally;

/* The selftest section (common/schema/selftest.h), read and checked before
 * any worker starts. */
typedef rl_selftest_config s_opts;

static double s_now_ms(void) { return rl_now_s() * 1e3; }

static void s_report(s_tally *t, const char *check, const char *role, int ranks, s_status st,
                     double ms, const char *detail)
{
    static const char *const names[] = {"pass", "FAIL", "SKIP"};
    printf("  %-30s %-16s %5d  %-4s %9.1f  %s\n", check, role, ranks, names[st], ms,
           st == S_PASS ? "" : detail);
    fflush(stdout);
    if (st == S_PASS)
        t->passed++;
    else if (st == S_FAIL)
        t->failed++;
    else
        t->skipped++;
}

static s_status s_ok(int ok) { return ok ? S_PASS : S_FAIL; }

/* ---- options ---------------------------------------------------------------------------- */

/* Before any worker starts: a bad selftest.* value is a located error. */
static int s_prepare(rl_config *job)
{
    return rl_config_section_get(job, &rl_selftest_section) ? RL_OK : rl_error_code();
}

/* ---- checks on one role -------------------------------------------------------------------- */

/* rows × cols f32 "x" with x[r][j] = r + j/10. NULL + message if out of memory. */
static rl_dataproto *s_batch(int64_t rows, int64_t cols)
{
    rl_dataproto *dp = rl_dataproto_new();
    int64_t shape[2] = {rows, cols};
    rl_tensor *t = dp ? rl_dataproto_new_tensor(dp, "x", RL_F32, 2, shape) : NULL;
    if (!t) {
        if (!dp)
            rl_error_set(RL_ENOMEM, "selftest: out of memory");
        rl_dataproto_free(dp);
        return NULL;
    }
    float *x = rl_tensor_data(t);
    for (int64_t i = 0; i < rows * cols; i++)
        x[i] = (float)(i / cols) + (float)(i % cols) / 10.0f;
    return dp;
}

/* A 0-row request whose meta is `meta` (taken). NULL + message on failure. */
static rl_dataproto *s_meta(json_t *meta)
{
    if (!meta) {
        rl_error_set(RL_ENOMEM, "selftest: out of memory");
        return NULL;
    }
    return rl_dataproto_new_meta(meta);
}

static int s_check_add(const rl_dataproto *in, const rl_dataproto *out, double value, char *why,
                       size_t len)
{
    if (!out)
        return snprintf(why, len, "no payload"), 0;
    const rl_tensor *a = rl_dataproto_tensor(in, "x"), *b = rl_dataproto_tensor(out, "x");
    if (!a || !b || b->numel != a->numel || b->dtype != RL_F32)
        return snprintf(why, len, "x missing or wrong size"), 0;
    const float *pa = rl_tensor_data(a), *pb = rl_tensor_data(b);
    for (int64_t i = 0; i < a->numel; i++)
        if (pb[i] != pa[i] + (float)value)
            return snprintf(why, len, "x[%lld] = %g, expected %g", (long long)i, pb[i],
                            pa[i] + value), 0;
    return 1;
}

/* Waits for f (NULL: the call could not be made) and frees nothing. */
static int s_wait(rl_future *f, int timeout_ms, char *why, size_t len)
{
    if (!f || rl_future_wait(f, timeout_ms)) {
        snprintf(why, len, "%s", rl_error_message());
        return 0;
    }
    return 1;
}

static void s_role_checks(rl_group *g, const s_opts *o, s_tally *t)
{
    const char *role = rl_group_role(g);
    int n = rl_group_size(g);
    char why[512] = "";

    /* one_to_all: every rank answers with its own rank */
    double t0 = s_now_ms();
    rl_future *f = rl_group_call(g, "whoami", RL_DISPATCH_ONE_TO_ALL, NULL);
    int ok = s_wait(f, 30000, why, sizeof why);
    for (int r = 0; ok && r < n; r++) {
        rl_dataproto *out = NULL;
        if (rl_future_take_rank(f, r, &out)) {
            snprintf(why, sizeof why, "%s", rl_error_message());
            ok = 0;
            break;
        }
        const rl_column *c = rl_dataproto_column(out, "rank");
        if (!c || rl_column_i64(c, 0) != r) {
            snprintf(why, sizeof why, "rank %d answered as %lld", r,
                     c ? (long long)rl_column_i64(c, 0) : -1LL);
            ok = 0;
        }
        rl_dataproto_free(out);
    }
    rl_future_free(f);
    s_report(t, "one_to_all whoami", role, n, s_ok(ok), s_now_ms() - t0, why);

    /* dp_compute with rows not divisible by the group size */
    t0 = s_now_ms();
    rl_dataproto *in = s_batch(o->rows, 4), *out = NULL;
    ok = in != NULL;
    if (ok)
        json_object_set_new(rl_dataproto_meta(in), "value", json_real(0.5));
    if (ok && rl_group_call_sync(g, "add", RL_DISPATCH_DP_COMPUTE, in, &out))
        ok = 0;
    if (!ok)
        snprintf(why, sizeof why, "%s", rl_error_message());
    if (ok && rl_dataproto_rows(out) != o->rows) {
        snprintf(why, sizeof why, "%lld rows back for %lld", (long long)rl_dataproto_rows(out),
                 (long long)o->rows);
        ok = 0;
    }
    ok = ok && s_check_add(in, out, 0.5, why, sizeof why);
    if (ok) { /* padded to a multiple of n, then equal chunks of ceil(rows/n) */
        const rl_column *rk = rl_dataproto_column(out, "rank");
        int64_t per = (o->rows + n - 1) / n, r0 = 0;
        for (int r = 0; ok && rk && r < n; r++) {
            int64_t cnt = r0 + per <= o->rows ? per : o->rows - r0;
            for (int64_t i = r0; i < r0 + cnt; i++)
                if (rl_column_i64(rk, i) != r) {
                    snprintf(why, sizeof why, "row %lld computed by rank %lld, expected %d",
                             (long long)i, (long long)rl_column_i64(rk, i), r);
                    ok = 0;
                    break;
                }
            r0 += cnt;
        }
        if (!rk) {
            snprintf(why, sizeof why, "column 'rank' missing");
            ok = 0;
        }
    }
    rl_dataproto_free(out);
    rl_dataproto_free(in);
    char label[64];
    snprintf(label, sizeof label, "dp_compute add (%lld rows)", (long long)o->rows);
    s_report(t, label, role, n, s_ok(ok), s_now_ms() - t0, why);

    /* rank_zero echo of a large payload: bytes come back intact */
    t0 = s_now_ms();
    int64_t cols = o->payload_mb * 1024 * 1024 / 4 / 64;
    in = s_batch(64, cols > 0 ? cols : 1);
    out = NULL;
    ok = in && rl_group_call_sync(g, "echo", RL_DISPATCH_RANK_ZERO, in, &out) == 0;
    if (!ok)
        snprintf(why, sizeof why, "%s", rl_error_message());
    if (ok && !rl_dataproto_equal(in, out)) {
        snprintf(why, sizeof why, "echoed payload differs");
        ok = 0;
    }
    rl_dataproto_free(out);
    rl_dataproto_free(in);
    snprintf(label, sizeof label, "rank_zero echo %lld MiB", (long long)o->payload_mb);
    s_report(t, label, role, 1, s_ok(ok), s_now_ms() - t0, why);

    /* all_to_all: each rank its own batch and value */
    t0 = s_now_ms();
    rl_dataproto **per = calloc((size_t)n, sizeof *per);
    ok = per != NULL;
    for (int r = 0; ok && r < n; r++) {
        per[r] = s_batch(3 + r, 2);
        ok = per[r] != NULL;
        if (ok)
            json_object_set_new(rl_dataproto_meta(per[r]), "value", json_integer(10 * r));
    }
    f = ok ? rl_group_call_each(g, "add", per) : NULL;
    ok = s_wait(f, 30000, why, sizeof why);
    for (int r = 0; ok && r < n; r++) {
        rl_dataproto *o2 = NULL;
        if (rl_future_take_rank(f, r, &o2)) {
            snprintf(why, sizeof why, "%s", rl_error_message());
            ok = 0;
        } else {
            ok = s_check_add(per[r], o2, 10.0 * r, why, sizeof why);
        }
        rl_dataproto_free(o2);
    }
    rl_future_free(f);
    for (int r = 0; per && r < n; r++)
        rl_dataproto_free(per[r]);
    free(per);
    s_report(t, "all_to_all add", role, n, s_ok(ok), s_now_ms() - t0, why);

    /* a handler error comes back as an error naming the worker and method */
    t0 = s_now_ms();
    int rc = rl_group_call_sync(g, "fail", RL_DISPATCH_RANK_ZERO, NULL, NULL);
    snprintf(why, sizeof why, "%s", rc ? rl_error_message() : "call succeeded");
    char want[160];
    snprintf(want, sizeof want, "%s/0: method 'fail' failed: fail requested on %s/0", role, role);
    s_report(t, "handler error -> ERROR", role, 1, s_ok(rc != 0 && strstr(why, want)),
             s_now_ms() - t0, why);

    t0 = s_now_ms();
    rc = rl_group_call_sync(g, "no_such_method", RL_DISPATCH_ONE_TO_ALL, NULL, NULL);
    snprintf(why, sizeof why, "%s", rc ? rl_error_message() : "call succeeded");
    s_report(t, "unknown method -> ERROR", role, n,
             s_ok(rc != 0 && strstr(why, "unknown method 'no_such_method'")), s_now_ms() - t0, why);
}

/* ---- checks across roles ---------------------------------------------------------------- */

/* Calls on every role at once: the total time must be less than the sum of
 * the calls' (futures overlap roles). */
static void s_overlap_check(rl_driver *d, const s_opts *o, s_tally *t)
{
    int n = rl_driver_group_count(d), ok = 1, ranks = 0;
    char why[512] = "";
    rl_future **fs = calloc((size_t)(n ? n : 1), sizeof *fs);
    rl_dataproto *in = s_meta(json_pack("{s:I}", "ms", (json_int_t)o->sleep_ms));
    if (!fs || !in) {
        snprintf(why, sizeof why, "%s", fs ? rl_error_message() : "out of memory");
        ok = 0;
    }
    double t0 = s_now_ms();
    for (int i = 0; ok && i < n; i++) {
        rl_group *g = rl_driver_group_at(d, i);
        ranks += rl_group_size(g);
        fs[i] = rl_group_call(g, "sleep", RL_DISPATCH_ONE_TO_ALL, in);
    }
    for (int i = 0; ok && i < n; i++) {
        if (!s_wait(fs[i], 30000, why, sizeof why))
            ok = 0;
    }
    for (int i = 0; fs && i < n; i++)
        rl_future_free(fs[i]);
    free(fs);
    double el = s_now_ms() - t0;
    /* one call after another cannot take less than n x sleep_ms, however
     * idle or loaded the machine is; overlapped calls take ~1 x sleep_ms
     * plus the scheduler's delays, which a loaded 2-core box makes long */
    if (ok && n > 1 && el >= (double)n * (double)o->sleep_ms) {
        snprintf(why, sizeof why, "%d roles x %lld ms took %.0f ms, as long as one after another: "
                 "not overlapped", n, (long long)o->sleep_ms, el);
        ok = 0;
    }
    rl_dataproto_free(in);
    char label[64];
    snprintf(label, sizeof label, "async overlap sleep %lld ms", (long long)o->sleep_ms);
    if (n < 2)
        s_report(t, label, "all", ranks, S_SKIP, el, "needs two roles; the cluster has one");
    else
        s_report(t, label, "all", ranks, s_ok(ok), el, why);
}

/* Every collective among the ranks of each group, for buffer sizes 0,
 * W - 1 (smaller than the world) and an odd size. */
static void s_collective_check(rl_driver *d, s_tally *t)
{
    for (int k = 0; k < rl_driver_group_count(d) && !rl_driver_interrupted(d); k++) {
        rl_group *g = rl_driver_group_at(d, k);
        int W = rl_group_size(g);
        int64_t counts[3] = {0, W - 1, 1000003};
        for (int c = 0; c < 3; c++) {
            char label[64], why[512] = "";
            snprintf(label, sizeof label, "collectives %lld floats", (long long)counts[c]);
            if (c == 1 && W == 1)
                continue; /* W - 1 = 0: the case above */
            double t0 = s_now_ms();
            /* rank 0 makes the id on its host; the driver hands it out */
            rl_dataproto *req = s_meta(json_pack("{s:s}", "host", rl_group_address(g, 0)));
            rl_dataproto *res = NULL;
            int ok = req && rl_group_call_sync(g, "comm_id_create", RL_DISPATCH_RANK_ZERO, req,
                                               &res) == 0;
            rl_dataproto_free(req);
            if (ok) {
                const char *id = rl_dataproto_meta_str(res, "comm_id", NULL);
                rl_dataproto *in = id ? s_meta(json_pack("{s:s, s:I}", "comm_id", id, "count",
                                                         (json_int_t)counts[c]))
                                      : NULL;
                ok = in && rl_group_call_sync(g, "coll_check", RL_DISPATCH_ONE_TO_ALL, in, NULL) == 0;
                rl_dataproto_free(in);
            }
            rl_dataproto_free(res);
            if (!ok)
                snprintf(why, sizeof why, "%s", rl_error_message());
            s_report(t, label, rl_group_role(g), W, s_ok(ok), s_now_ms() - t0, why);
        }
    }
}

/* The groups of a pair of roles; a role the job lacks is a SKIP reason. */
/* The groups of the roles names[0] and names[1] into g, and "a<sep>b"
 * into pair (2 * RL_CLUSTER_NAME_MAX + 4 bytes); 0 when one of them is
 * missing, the check `label` then reported skipped. */
static int s_pair_groups(rl_driver *d, s_tally *t, const char *label, const char *const names[2],
                         const char *sep, rl_group **g, char *pair)
{
    snprintf(pair, 2 * RL_CLUSTER_NAME_MAX + 4, "%.*s%s%.*s", RL_CLUSTER_NAME_MAX, names[0], sep,
             RL_CLUSTER_NAME_MAX, names[1]);
    for (int i = 0; i < 2; i++) {
        g[i] = rl_driver_group(d, names[i]);
        if (!g[i]) {
            s_report(t, label, pair, 0, S_SKIP, 0, rl_error_message());
            return 0;
        }
    }
    return 1;
}

/* weight_roles[0] rank 0 sends a versioned buffer over the weight channel
 * to every rank of weight_roles[1]; each checks every value and the version
 * it switched to. */
static void s_weight_check(rl_driver *d, const s_opts *o, rl_weight_sync *ws, s_tally *t)
{
    char label[96], pair[2 * RL_CLUSTER_NAME_MAX + 4], why[512] = "";
    int64_t version = ws->version + 1;
    snprintf(label, sizeof label, "weight channel %lld MiB v%lld", (long long)o->weight_mb,
             (long long)version);
    rl_group *g[2];
    if (!s_pair_groups(d, t, label, o->weight_pair, ">", g, pair))
        return;
    /* the recipes' own choreography, with the test methods' test buffer */
    ws->sender = g[0];
    ws->receivers = g[1];
    ws->open = "weights_open";
    ws->publish = "weights_send";
    ws->receive = "weights_recv";
    ws->timeout_ms = 60000;
    json_t *args = json_pack("{s:I}", "count", (json_int_t)(o->weight_mb * 1024 * 1024 / 4));
    rl_future *fr = NULL;
    double t0 = s_now_ms();
    int ok = args && rl_weight_sync_run(ws, args, &fr) == 0;
    if (!ok)
        snprintf(why, sizeof why, "%s", rl_error_message());
    for (int r = 0; ok && r < rl_group_size(g[1]); r++) {
        rl_dataproto *out = NULL;
        int64_t v = -1;
        if (rl_future_take_rank(fr, r, &out) || rl_dataproto_meta_int(out, "version", -1, &v)) {
            snprintf(why, sizeof why, "%s", rl_error_message());
            ok = 0;
        } else if (v != version) {
            snprintf(why, sizeof why, "%s/%d switched to version %lld, expected %lld",
                     rl_group_role(g[1]), r, (long long)v, (long long)version);
            ok = 0;
        }
        rl_dataproto_free(out);
    }
    json_decref(args);
    rl_future_free(fr);
    s_report(t, label, pair, rl_group_size(g[1]), s_ok(ok), s_now_ms() - t0, why);
}

/* Rank r of channel_roles[0] and rank r of channel_roles[1] exchange
 * batches over a direct channel, for r < the smaller rank count; the other
 * ranks are called with active = 0 and do nothing. The driver only sets the
 * channels up and reads the summaries. */
static void s_channel_check(rl_driver *d, const s_opts *o, s_tally *t)
{
    char label[96], pair[2 * RL_CLUSTER_NAME_MAX + 4], why[512] = "";
    snprintf(label, sizeof label, "data channel %lldx", (long long)o->channel_steps);
    rl_group *g[2];
    if (!s_pair_groups(d, t, label, o->channel_pair, "<>", g, pair))
        return;
    int n[2] = {rl_group_size(g[0]), rl_group_size(g[1])};
    int pairs = n[0] < n[1] ? n[0] : n[1];
    double t0 = s_now_ms();
    rl_dataproto **per[2] = {calloc((size_t)n[0], sizeof(rl_dataproto *)),
                             calloc((size_t)n[1], sizeof(rl_dataproto *))};
    int ok = per[0] && per[1];
    /* side 0 listens */
    for (int r = 0; ok && r < n[0]; r++)
        ok = (per[0][r] = s_meta(json_pack("{s:s, s:i}", "host", rl_group_address(g[0], r),
                                           "active", r < pairs))) != NULL;
    rl_future *f = ok ? rl_group_call_each(g[0], "channel_open", per[0]) : NULL;
    ok = s_wait(f, 30000, why, sizeof why);
    /* side 1 connects to its partner's endpoint */
    for (int r = 0; ok && r < n[1]; r++) {
        rl_dataproto *out = NULL;
        const char *ep = "";
        if (r < pairs) {
            if (rl_future_take_rank(f, r, &out) ||
                !(ep = rl_dataproto_meta_str(out, "endpoint", NULL))) {
                snprintf(why, sizeof why, "%s", rl_error_message());
                ok = 0;
            }
        }
        if (ok)
            ok = (per[1][r] = s_meta(json_pack("{s:s, s:i}", "endpoint", ep, "active",
                                               r < pairs))) != NULL;
        rl_dataproto_free(out);
    }
    rl_future_free(f);
    f = ok ? rl_group_call_each(g[1], "channel_connect", per[1]) : NULL;
    if (ok)
        ok = s_wait(f, 30000, why, sizeof why);
    rl_future_free(f);
    if (ok) { /* side 0 serves, side 1 pings; ranks without a partner idle */
        for (int s = 0; s < 2; s++)
            for (int r = 0; ok && r < n[s]; r++) {
                rl_dataproto_free(per[s][r]);
                ok = (per[s][r] = s_meta(json_pack("{s:I, s:i, s:i}", "steps",
                                                   (json_int_t)o->channel_steps, "serve", s == 0,
                                                   "active", r < pairs))) != NULL;
            }
        rl_future *fs = ok ? rl_group_call_each(g[0], "channel_pingpong", per[0]) : NULL;
        rl_future *fp = ok ? rl_group_call_each(g[1], "channel_pingpong", per[1]) : NULL;
        ok = s_wait(fp, 60000, why, sizeof why) && s_wait(fs, 60000, why, sizeof why);
        rl_future_free(fs);
        rl_future_free(fp);
    } else if (!why[0]) {
        snprintf(why, sizeof why, "%s", rl_error_message());
    }
    for (int s = 0; s < 2; s++) {
        for (int r = 0; per[s] && r < n[s]; r++)
            rl_dataproto_free(per[s][r]);
        free(per[s]);
    }
    s_report(t, label, pair, pairs, s_ok(ok), s_now_ms() - t0, why);
}

static int s_run(rl_driver *d, const rl_config *job)
{
    const s_opts *op = rl_config_section_get(job, &rl_selftest_section);
    if (!op)
        return rl_error_code();
    const s_opts o = *op;
    s_tally t = {0, 0, 0};
    rl_weight_sync ws = {0}; /* versions grow over the rounds */
    for (int64_t round = 1; round <= o.rounds && !rl_driver_interrupted(d); round++) {
        printf("selftest round %lld/%lld\n", (long long)round, (long long)o.rounds);
        printf("  %-30s %-16s %5s  %-4s %9s  %s\n", "check", "role", "ranks", "ok", "ms", "detail");
        for (int k = 0; k < rl_driver_group_count(d) && !rl_driver_interrupted(d); k++)
            s_role_checks(rl_driver_group_at(d, k), &o, &t);
        if (!rl_driver_interrupted(d))
            s_overlap_check(d, &o, &t);
        if (!rl_driver_interrupted(d))
            s_collective_check(d, &t);
        if (!rl_driver_interrupted(d))
            s_weight_check(d, &o, &ws, &t);
        if (!rl_driver_interrupted(d))
            s_channel_check(d, &o, &t);
    }
    printf("selftest: %d passed, %d failed, %d skipped\n", t.passed, t.failed, t.skipped);
    fflush(stdout);
    if (rl_driver_interrupted(d))
        return RL_OK;
    return t.failed ? rl_error_set(RL_EINVAL, "%d selftest checks failed", t.failed) : RL_OK;
}

const rl_recipe rl_recipe_selftest = {
    .name = "selftest",
    .summary = "check every dispatch mode, errors and overlap on every role",
    /* the config sections of every registered role: their init reads them */
    .sections = (const rl_config_section *const[]){RL_ROLES_SECTIONS, &rl_selftest_section, NULL},
    .roles = NULL, /* every role of the cluster */
    .test_methods = 1,
    .prepare = s_prepare,
    .run = s_run,
};
