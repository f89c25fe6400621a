/* test_methods.c — the test methods of rl-worker (see test_methods.h): the
 * runtime self-test (echo, add, sleep, fail, whoami) and the plumbing checks
 * of the selftest recipe (collectives, weight channel, data channels).
 * Per-process channel state lives here: a worker process serves one role
 * and rank. */
#include "workers/selftest/test_methods.h"

#include "rlrt/error.h"
#include "rlrt/runtime/channel.h"
#include "rlrt/runtime/collective.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static double s_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* *out = a 0-row DataProto whose meta is `meta` (taken); RL_ENOMEM if
 * either could not be built. */
static int s_meta_out(json_t *meta, rl_dataproto **out)
{
    if (!meta)
        return rl_error_set(RL_ENOMEM, "test method: out of memory");
    *out = rl_dataproto_new_meta(meta);
    return *out ? RL_OK : rl_error_code();
}

/* A count from meta: an integer in [0, max]. */
static int s_meta_count(const rl_dataproto *in, const char *key, int64_t def, int64_t max,
                        int64_t *out)
{
    int rc = rl_dataproto_meta_int(in, key, def, out);
    if (rc)
        return rc;
    if (*out < 0 || *out > max)
        return rl_error_set(RL_ERANGE, "meta '%s' = %lld outside [0, %lld]", key,
                            (long long)*out, (long long)max);
    return RL_OK;
}

/* ---- basic methods -------------------------------------------------------------------- */

static int s_echo(rl_worker_ctx *ctx, const rl_dataproto *in, rl_dataproto **out)
{
    (void)ctx;
    *out = rl_dataproto_select(in, NULL, 0, NULL, 0);
    return *out ? RL_OK : rl_error_code();
}

/* out.x = in.x + meta.value for the f32 tensor "x"; also adds column "rank". */
static int s_add(rl_worker_ctx *ctx, const rl_dataproto *in, rl_dataproto **out)
{
    const rl_tensor *x = rl_dataproto_tensor_typed(in, "x", RL_F32);
    if (!x)
        return rl_error_code();
    const json_t *v = json_object_get(rl_dataproto_meta_const(in), "value");
    if (!json_is_number(v))
        return rl_error_set(RL_EINVAL, "add: meta 'value' must be a number");
    double add = json_number_value(v);
    rl_dataproto *o = rl_dataproto_new();
    rl_tensor *y = o ? rl_dataproto_new_tensor(o, "x", RL_F32, x->ndim, x->shape) : NULL;
    rl_column *rank = y ? rl_dataproto_new_column(o, "rank", RL_COL_INT64) : NULL;
    if (!rank) {
        int rc = o ? rl_error_code() : rl_error_set(RL_ENOMEM, "add: out of memory");
        rl_dataproto_free(o);
        return rc;
    }
    const float *src = rl_tensor_data(x);
    float *dst = rl_tensor_data(y);
    for (int64_t i = 0; i < x->numel; i++)
        dst[i] = src[i] + (float)add;
    for (int64_t r = 0; r < rl_dataproto_rows(o); r++)
        rl_column_set_i64(rank, r, ctx->rank);
    *out = o;
    return RL_OK;
}

/* meta: ms (default 100). Returns no payload. */
static int s_sleep(rl_worker_ctx *ctx, const rl_dataproto *in, rl_dataproto **out)
{
    (void)out;
    int64_t ms;
    if (s_meta_count(in, "ms", 100, 3600 * 1000, &ms))
        return rl_error_code();
    for (int64_t t = 0; t < ms && !rl_worker_should_stop(ctx); t += 10)
        usleep(10000);
    return RL_OK;
}

static int s_fail(rl_worker_ctx *ctx, const rl_dataproto *in, rl_dataproto **out)
{
    (void)in;
    (void)out;
    return rl_error_set(RL_EINVAL, "fail requested on %s/%d", ctx->role, ctx->rank);
}

/* One row: role, rank, pid, node. */
static int s_whoami(rl_worker_ctx *ctx, const rl_dataproto *in, rl_dataproto **out)
{
    (void)in;
    rl_dataproto *o = rl_dataproto_new();
    if (!o)
        return rl_error_set(RL_ENOMEM, "whoami: out of memory");
    rl_dataproto_set_rows(o, 1);
    rl_column *role = rl_dataproto_new_column(o, "role", RL_COL_STRING);
    rl_column *rank = role ? rl_dataproto_new_column(o, "rank", RL_COL_INT64) : NULL;
    rl_column *pid = rank ? rl_dataproto_new_column(o, "pid", RL_COL_INT64) : NULL;
    rl_column *node = pid ? rl_dataproto_new_column(o, "node", RL_COL_STRING) : NULL;
    int rc = node ? RL_OK : rl_error_code();
    if (!rc)
        rc = rl_column_set_str(role, 0, ctx->role);
    if (!rc)
        rc = rl_column_set_str(node, 0, ctx->node);
    if (rc) {
        rl_dataproto_free(o);
        return rc;
    }
    rl_column_set_i64(rank, 0, ctx->rank);
    rl_column_set_i64(pid, 0, getpid());
    *out = o;
    return RL_OK;
}

/* ---- collectives ------------------------------------------------------------------------ */

/* Rank r's test data: x_r[i] = (r + 1) + (i % 251) / 8 (exact in float). */
static float s_coll_x(int r, int64_t i) { return (float)(r + 1) + (float)(i % 251) / 8.0f; }

/* The ring's documented reduction order for element i of chunk c:
 * ((x[c+1] + x[c+2]) + ... + x[c+W-1]) + x[c]. */
static float s_coll_sum(int world, int64_t count, int64_t i)
{
    int64_t per = (count + world - 1) / world;
    int c = (int)(i / per);
    if (world == 1)
        return s_coll_x(0, i);
    float acc = s_coll_x((c + 1) % world, i);
    for (int k = 2; k < world; k++)
        acc += s_coll_x((c + k) % world, i);
    return acc + s_coll_x(c, i);
}

/* "tcp://<meta host><port>" into ep; RL_EINVAL (message set, naming the
 * method) when meta has no host or the endpoint does not fit. */
static int s_host_endpoint(const rl_dataproto *in, const char *port, const char *method, char *ep,
                           size_t size)
{
    const char *host = rl_dataproto_meta_str(in, "host", NULL);
    if (!host)
        return rl_error_code();
    if ((size_t)snprintf(ep, size, "tcp://%s%s", host, port) >= size)
        return rl_error_set(RL_EINVAL, "%s: host '%.40s...' is too long", method, host);
    return RL_OK;
}

/* On rank 0 (like ncclGetUniqueId): a communicator id whose rendezvous
 * endpoint is on this host. meta: host. Returns meta {comm_id}. The driver
 * hands the text to every rank. */
static int s_comm_id_create(rl_worker_ctx *ctx, const rl_dataproto *in, rl_dataproto **out)
{
    (void)ctx;
    char ep[300];
    if (s_host_endpoint(in, "", "comm_id_create", ep, sizeof ep))
        return rl_error_code();
    rl_comm_id id;
    if (rl_comm_id_create(&id, ep))
        return rl_error_code();
    return s_meta_out(json_pack("{s:s}", "comm_id", rl_comm_id_string(&id)), out);
}

/* Runs every collective on `count` floats and checks each result exactly.
 * meta: comm_id (text), count. Returns meta {ms: {op: ms}}. */
static int s_coll_check(rl_worker_ctx *ctx, const rl_dataproto *in, rl_dataproto **out)
{
    const char *idtext = rl_dataproto_meta_str(in, "comm_id", NULL);
    int64_t count;
    if (!idtext || s_meta_count(in, "count", 1000, (int64_t)1 << 30, &count))
        return rl_error_code();
    rl_comm_id id;
    if (rl_comm_id_parse(&id, idtext))
        return rl_error_code();
    float *x = malloc(sizeof(float) * (size_t)(count ? count : 1));
    float *y = malloc(sizeof(float) * (size_t)(count ? count : 1));
    json_t *ms = json_object();
    if (!x || !y || !ms) {
        free(x);
        free(y);
        json_decref(ms);
        return rl_error_set(RL_ENOMEM, "coll_check: %lld floats: out of memory", (long long)count);
    }
    rl_comm_options opt;
    rl_comm_options_default(&opt);
    opt.timeout_s = 30;
    rl_comm *c = rl_comm_init_rank(&id, ctx->world_size, ctx->rank, &opt);
    if (!c) {
        free(x);
        free(y);
        json_decref(ms);
        return rl_error_wrap(rl_error_code(), "%s/%d joining the communicator", ctx->role, ctx->rank);
    }
    int W = ctx->world_size, r = ctx->rank, rc = RL_OK;
    int64_t begin, end;
    rl_shard_range(count, W, r, &begin, &end);
    for (int64_t i = 0; i < count; i++)
        x[i] = s_coll_x(r, i);
    double t0 = s_ms();
    if ((rc = rl_comm_all_reduce(c, x, y, count, RL_REDUCE_SUM)))
        goto done;
    json_object_set_new(ms, "all_reduce", json_real(s_ms() - t0));
    for (int64_t i = 0; i < count; i++)
        if (y[i] != s_coll_sum(W, count, i)) {
            rc = rl_error_set(RL_ENUMERIC, "all_reduce: [%lld] = %g, expected %g", (long long)i, y[i],
                              s_coll_sum(W, count, i));
            goto done;
        }
    t0 = s_ms();
    if ((rc = rl_comm_reduce_scatter(c, x, y, count, RL_REDUCE_SUM)))
        goto done;
    json_object_set_new(ms, "reduce_scatter", json_real(s_ms() - t0));
    for (int64_t i = begin; i < end; i++)
        if (y[i - begin] != s_coll_sum(W, count, i)) {
            rc = rl_error_set(RL_ENUMERIC, "reduce_scatter: [%lld] wrong", (long long)i);
            goto done;
        }
    /* all_gather of each rank's shard of x_r gives the shard owners' data */
    t0 = s_ms();
    if ((rc = rl_comm_all_gather(c, x + begin, y, count)))
        goto done;
    json_object_set_new(ms, "all_gather", json_real(s_ms() - t0));
    for (int64_t i = 0; i < count; i++) {
        int64_t per = (count + W - 1) / W;
        if (y[i] != s_coll_x((int)(i / per), i)) {
            rc = rl_error_set(RL_ENUMERIC, "all_gather: [%lld] wrong", (long long)i);
            goto done;
        }
    }
    t0 = s_ms();
    if ((rc = rl_comm_broadcast(c, x, y, count, W - 1)))
        goto done;
    json_object_set_new(ms, "broadcast", json_real(s_ms() - t0));
    for (int64_t i = 0; i < count; i++)
        if (y[i] != s_coll_x(W - 1, i)) {
            rc = rl_error_set(RL_ENUMERIC, "broadcast: [%lld] wrong", (long long)i);
            goto done;
        }
    t0 = s_ms();
    if ((rc = rl_comm_barrier(c)))
        goto done;
    json_object_set_new(ms, "barrier", json_real(s_ms() - t0));
done:
    free(x);
    free(y);
    rl_comm_destroy(c);
    if (rc) {
        json_decref(ms);
        return rl_error_wrap(rc, "%s/%d", ctx->role, ctx->rank);
    }
    return s_meta_out(json_pack("{s:o}", "ms", ms), out);
}

/* ---- weight channel -------------------------------------------------------------------- */

static rl_weight_sender *s_wsend;
static rl_weight_receiver *s_wrecv;
static char s_wrecv_endpoint[256];
static int64_t s_wrecv_count;

static float s_weight_value(int64_t i, uint64_t version)
{
    return (float)(i % 1009) * 0.25f + (float)version;
}

/* meta: host, bucket_kib (optional: the transfer unit, 0 = the channel's
 * default). Binds the sender; returns meta {endpoint}. */
static int s_weights_open(rl_worker_ctx *ctx, const rl_dataproto *in, rl_dataproto **out)
{
    (void)ctx;
    const char *host = rl_dataproto_meta_str(in, "host", NULL);
    int64_t bucket_kib;
    if (!host || s_meta_count(in, "bucket_kib", 0, 1 << 20, &bucket_kib))
        return rl_error_code();
    if (!s_wsend) {
        char bind[300];
        if ((size_t)snprintf(bind, sizeof bind, "tcp://%s:*", host) >= sizeof bind)
            return rl_error_set(RL_EINVAL, "weights_open: host '%.40s...' is too long", host);
        s_wsend = rl_weight_sender_new(bind, (size_t)bucket_kib << 10);
        if (!s_wsend)
            return rl_error_code();
    }
    return s_meta_out(json_pack("{s:s}", "endpoint", rl_weight_sender_endpoint(s_wsend)), out);
}

/* meta: version, count, receivers, timeout_ms (default 30000). Sends the
 * test buffer of that version. */
static int s_weights_send(rl_worker_ctx *ctx, const rl_dataproto *in, rl_dataproto **out)
{
    (void)ctx;
    int64_t version, count, receivers, timeout_ms;
    if (!s_wsend)
        return rl_error_set(RL_ESTATE, "weights_send before weights_open");
    if (s_meta_count(in, "version", 1, INT64_MAX, &version) ||
        s_meta_count(in, "count", 1 << 20, (int64_t)1 << 30, &count) ||
        s_meta_count(in, "receivers", 1, 1024, &receivers) ||
        s_meta_count(in, "timeout_ms", 30000, 600000, &timeout_ms))
        return rl_error_code();
    /* meta fanout: "chain" (default) or "star" */
    const char *fanout = rl_dataproto_meta_str(in, "fanout", "chain");
    if (strcmp(fanout, "chain") != 0 && strcmp(fanout, "star") != 0)
        return rl_error_set(RL_EINVAL, "weights_send: fanout '%.20s' is neither chain nor star", fanout);
    rl_weight_sender_set_fanout(s_wsend, fanout[0] == 'c' ? RL_WEIGHT_FANOUT_CHAIN : RL_WEIGHT_FANOUT_STAR);
    float *buf = malloc(sizeof(float) * (size_t)(count ? count : 1));
    if (!buf)
        return rl_error_set(RL_ENOMEM, "weights_send: %lld floats: out of memory", (long long)count);
    for (int64_t i = 0; i < count; i++)
        buf[i] = s_weight_value(i, (uint64_t)version);
    double t0 = s_ms();
    int rc = rl_weight_send(s_wsend, (uint64_t)version, buf, count, (int)receivers,
                            (int)timeout_ms);
    double el = s_ms() - t0;
    free(buf);
    if (rc)
        return rc;
    return s_meta_out(json_pack("{s:f}", "ms", el), out);
}

/* Every value of the active version against the sender's pattern. */
static int s_weights_verify(const rl_worker_ctx *ctx)
{
    uint64_t version;
    const float *w = rl_weight_recv_active(s_wrecv, &version);
    for (int64_t i = 0; i < s_wrecv_count; i++)
        if (w[i] != s_weight_value(i, version))
            return rl_error_set(RL_ENUMERIC, "%s/%d: weight [%lld] of version %llu is %g, expected %g",
                                ctx->role, ctx->rank, (long long)i, (unsigned long long)version,
                                w[i], s_weight_value(i, version));
    return RL_OK;
}

/* meta: endpoint, count, check (default 1). Receives until a newer version
 * is active, checks every value unless check is 0; returns meta {version}. */
static int s_weights_recv(rl_worker_ctx *ctx, const rl_dataproto *in, rl_dataproto **out)
{
    const char *endpoint = rl_dataproto_meta_str(in, "endpoint", NULL);
    int64_t count, timeout_ms;
    if (!endpoint || s_meta_count(in, "count", 1 << 20, (int64_t)1 << 30, &count) ||
        s_meta_count(in, "timeout_ms", 30000, 600000, &timeout_ms))
        return rl_error_code();
    if (s_wrecv && (strcmp(s_wrecv_endpoint, endpoint) != 0 || s_wrecv_count != count)) {
        rl_weight_receiver_free(s_wrecv);
        s_wrecv = NULL;
    }
    if (!s_wrecv) {
        if (strlen(endpoint) >= sizeof s_wrecv_endpoint)
            return rl_error_set(RL_EINVAL, "weights_recv: endpoint too long");
        /* meta host (optional): this rank's node address, its chain input */
        const char *host = rl_dataproto_meta_str(in, "host", NULL);
        char bind[300];
        if (host && (size_t)snprintf(bind, sizeof bind, "tcp://%s:*", host) >= sizeof bind)
            return rl_error_set(RL_EINVAL, "weights_recv: host too long");
        s_wrecv = rl_weight_receiver_new_ranked(endpoint, count, ctx->rank, host ? bind : NULL);
        if (!s_wrecv)
            return rl_error_code();
        snprintf(s_wrecv_endpoint, sizeof s_wrecv_endpoint, "%s", endpoint);
        s_wrecv_count = count;
    }
    int64_t check;
    if (rl_dataproto_meta_int(in, "check", 1, &check))
        return rl_error_code();
    int rc = rl_weight_recv_poll(s_wrecv, (int)timeout_ms);
    if (rc)
        return rl_error_wrap(rc, "%s/%d", ctx->role, ctx->rank);
    uint64_t version;
    rl_weight_recv_active(s_wrecv, &version);
    if (check && (rc = s_weights_verify(ctx)))
        return rc;
    return s_meta_out(json_pack("{s:I}", "version", (json_int_t)version), out);
}

/* Checks every value of the active version (what weights_recv does unless
 * meta check is 0: bench_scale checks after the broadcast it times, so
 * that early receivers' checks do not take the cores from the later ones
 * still receiving). Returns meta {version}. */
static int s_weights_check(rl_worker_ctx *ctx, const rl_dataproto *in, rl_dataproto **out)
{
    (void)in;
    if (!s_wrecv)
        return rl_error_set(RL_ESTATE, "weights_check before weights_recv");
    uint64_t version;
    rl_weight_recv_active(s_wrecv, &version);
    int rc = s_weights_verify(ctx);
    if (rc)
        return rc;
    return s_meta_out(json_pack("{s:I}", "version", (json_int_t)version), out);
}

/* ---- data channels ------------------------------------------------------------------------
 * Every channel method takes meta "active" (default 1): a rank without a
 * partner (its role has more ranks than the other) is called with
 * active = 0 and does nothing. */

static rl_channel *s_chan;

static int s_inactive(const rl_dataproto *in, int *inactive)
{
    int64_t active;
    int rc = rl_dataproto_meta_int(in, "active", 1, &active);
    *inactive = !active;
    return rc;
}

/* meta: host. Listens; returns meta {endpoint} ("" when inactive). */
static int s_channel_open(rl_worker_ctx *ctx, const rl_dataproto *in, rl_dataproto **out)
{
    (void)ctx;
    int inactive;
    if (s_inactive(in, &inactive))
        return rl_error_code();
    if (inactive)
        return s_meta_out(json_pack("{s:s}", "endpoint", ""), out);
    char bind[300];
    if (s_host_endpoint(in, ":*", "channel_open", bind, sizeof bind))
        return rl_error_code();
    rl_channel_free(s_chan);
    s_chan = rl_channel_listen(bind);
    if (!s_chan)
        return rl_error_code();
    return s_meta_out(json_pack("{s:s}", "endpoint", rl_channel_endpoint(s_chan)), out);
}

/* meta: endpoint. Connects to the listening side. */
static int s_channel_connect(rl_worker_ctx *ctx, const rl_dataproto *in, rl_dataproto **out)
{
    (void)ctx;
    (void)out;
    int inactive;
    if (s_inactive(in, &inactive))
        return rl_error_code();
    if (inactive)
        return RL_OK;
    const char *endpoint = rl_dataproto_meta_str(in, "endpoint", NULL);
    if (!endpoint)
        return rl_error_code();
    rl_channel_free(s_chan);
    s_chan = rl_channel_connect(endpoint);
    return s_chan ? RL_OK : rl_error_code();
}

/* meta: steps, rows, serve (0/1). The client sends `steps` batches of x and
 * expects x + 1 back; the server answers each with x + 1. The driver only
 * sees the summary. Returns meta {steps, ms}. */
static int s_channel_pingpong(rl_worker_ctx *ctx, const rl_dataproto *in, rl_dataproto **out)
{
    int64_t steps, rows, serve;
    int inactive;
    if (s_inactive(in, &inactive))
        return rl_error_code();
    if (inactive)
        return s_meta_out(json_pack("{s:i, s:f}", "steps", 0, "ms", 0.0), out);
    if (!s_chan)
        return rl_error_set(RL_ESTATE, "no data channel open on %s/%d", ctx->role, ctx->rank);
    if (s_meta_count(in, "steps", 10, 1000000, &steps) ||
        s_meta_count(in, "rows", 16, 1 << 16, &rows) || s_meta_count(in, "serve", 0, 1, &serve))
        return rl_error_code();
    double t0 = s_ms();
    for (int64_t k = 0; k < steps; k++) {
        rl_dataproto *msg = NULL, *reply = NULL;
        int rc;
        if (serve) {
            if ((rc = rl_channel_recv(s_chan, &msg, 30000)))
                return rc;
            json_object_set_new(rl_dataproto_meta(msg), "value", json_real(1.0));
            rc = s_add(ctx, msg, &reply);
            if (!rc)
                rc = rl_channel_send(s_chan, reply, 30000);
            rl_dataproto_free(msg);
            rl_dataproto_free(reply);
            if (rc)
                return rc;
            continue;
        }
        msg = rl_dataproto_new();
        int64_t shape[2] = {rows, 8};
        rl_tensor *xt = msg ? rl_dataproto_new_tensor(msg, "x", RL_F32, 2, shape) : NULL;
        if (!xt) {
            rc = msg ? rl_error_code() : rl_error_set(RL_ENOMEM, "pingpong: out of memory");
            rl_dataproto_free(msg);
            return rc;
        }
        float *x = rl_tensor_data(xt);
        for (int64_t i = 0; i < rows * 8; i++)
            x[i] = (float)(k * 1000 + i);
        rc = rl_channel_send(s_chan, msg, 30000);
        if (!rc)
            rc = rl_channel_recv(s_chan, &reply, 30000);
        if (!rc) {
            const rl_tensor *y = rl_dataproto_tensor_typed(reply, "x", RL_F32);
            if (!y || y->numel != rows * 8)
                rc = rl_error_set(RL_ESHAPE, "pingpong: bad reply at step %lld", (long long)k);
            for (int64_t i = 0; !rc && i < rows * 8; i++)
                if (((const float *)rl_tensor_data(y))[i] != x[i] + 1.0f)
                    rc = rl_error_set(RL_ENUMERIC, "pingpong: step %lld value %lld wrong",
                                      (long long)k, (long long)i);
        }
        rl_dataproto_free(msg);
        rl_dataproto_free(reply);
        if (rc)
            return rc;
    }
    return s_meta_out(json_pack("{s:I, s:f}", "steps", (json_int_t)steps, "ms", s_ms() - t0), out);
}

const char *const rl_test_retry_safe[] = {"echo", "echo_queued", "add", "sleep_safe", "whoami",
                                          "fail", NULL};

const char *const rl_test_inline[] = {"echo", "fail", NULL};

const rl_method rl_test_methods[] = {
    {"echo", s_echo},
    {"echo_queued", s_echo}, /* the same, not inline: always the compute thread */
    {"add", s_add},
    {"sleep", s_sleep},
    {"sleep_safe", s_sleep}, /* the same, declared retry-safe (rl_test_retry_safe) */
    {"fail", s_fail},
    {"whoami", s_whoami},
    {"comm_id_create", s_comm_id_create},
    {"coll_check", s_coll_check},
    {"weights_open", s_weights_open},
    {"weights_send", s_weights_send},
    {"weights_recv", s_weights_recv},
    {"weights_check", s_weights_check},
    {"channel_open", s_channel_open},
    {"channel_connect", s_channel_connect},
    {"channel_pingpong", s_channel_pingpong},
    {NULL, NULL},
};
