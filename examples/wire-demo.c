/* wire-demo.c — a driver and a forked worker exchanging DataProto batches.
 *
 * The driver builds rollout-like batches (4 prompts × 4 sampled responses):
 * token-level scores (rows, T) with a 0/1 correctness reward on the last
 * response token, a response mask (rows, T), a "uid" column naming each
 * response's prompt and meta {step, epsilon}. It sends them over
 * tcp://127.0.0.1 to a worker process, which computes GRPO group-normalised
 * advantages:
 *     score_i = Σ_t scores[i, t] · mask[i, t]
 *     adv_i   = (score_i − mean_g) / (std_g + ε)   over the rows g sharing uid
 * (std unbiased; a group of one gets mean 0, std 1) and replies with an
 * "advantages" (rows) tensor and group statistics in meta. The driver prints
 * a table and checks each group's advantages sum to zero.
 *
 * Usage: rl-wire-demo [steps]   (default 3)
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "rlrt/error.h"
#include "common/core/rng.h"
#include "rlrt/dtype.h"
#include "rlrt/tensor.h"
#include "rlrt/dataproto.h"
#include "rlrt/wire.h"

#define PROMPTS 4
#define SAMPLES 4
#define ROWS (PROMPTS * SAMPLES)
#define T 12

static void s_fail(const char *who, const char *what)
{
    fprintf(stderr, "rl-wire-demo %s: %s: %s\n", who, what, rl_error_message());
    exit(1);
}

/* ---- worker --------------------------------------------------------------------- */

static rl_dataproto *s_grpo(const rl_dataproto *in)
{
    int64_t rows = rl_dataproto_rows(in);
    const rl_tensor *sc = rl_dataproto_tensor_typed(in, "token_level_scores", RL_F32);
    const rl_tensor *mk = rl_dataproto_tensor_typed(in, "response_mask", RL_U8);
    const rl_column *uid = rl_dataproto_column(in, "uid");
    if (!sc || !mk || !uid || sc->ndim != 2 || mk->ndim != 2 || sc->shape[1] != mk->shape[1]) {
        rl_error_set(RL_EINVAL, "expected token_level_scores f32 (B, T), response_mask u8 "
                     "(B, T) and a uid column");
        return NULL;
    }
    json_t *eps_j = json_object_get(rl_dataproto_meta_const(in), "epsilon");
    double eps = eps_j ? json_number_value(eps_j) : 1e-6;
    int64_t tl = sc->shape[1];
    const float *s = rl_tensor_data(sc);
    const uint8_t *m = rl_tensor_data(mk);
    double *score = calloc((size_t)rows + 1, sizeof *score);
    for (int64_t i = 0; i < rows; i++)
        for (int64_t t = 0; t < tl; t++)
            score[i] += m[i * tl + t] ? s[i * tl + t] : 0.0;

    rl_dataproto *out = rl_dataproto_new();
    int64_t shape[1] = {rows};
    rl_tensor *adv = rl_dataproto_new_tensor(out, "advantages", RL_F32, 1, shape);
    rl_tensor *sct = rl_dataproto_new_tensor(out, "scores", RL_F32, 1, shape);
    float *a = rl_tensor_data(adv), *so = rl_tensor_data(sct);
    json_t *groups = json_object();
    for (int64_t i = 0; i < rows; i++) {
        const char *u = rl_column_str(uid, i);
        if (json_object_get(groups, u))
            continue;
        double sum = 0, sq = 0;
        int n = 0;
        for (int64_t j = 0; j < rows; j++)
            if (!strcmp(rl_column_str(uid, j), u)) {
                sum += score[j];
                n++;
            }
        double mean = n > 1 ? sum / n : 0.0;
        for (int64_t j = 0; j < rows; j++)
            if (!strcmp(rl_column_str(uid, j), u))
                sq += (score[j] - mean) * (score[j] - mean);
        double std = n > 1 ? sqrt(sq / (n - 1)) : 1.0;
        for (int64_t j = 0; j < rows; j++)
            if (!strcmp(rl_column_str(uid, j), u)) {
                a[j] = (float)((score[j] - mean) / (std + eps));
                so[j] = (float)score[j];
            }
        json_object_set_new(groups, u, json_pack("{s:i, s:f, s:f}", "n", n, "mean", mean,
                                                 "std", std));
    }
    json_object_set_new(rl_dataproto_meta(out), "groups", groups);
    json_object_set_new(rl_dataproto_meta(out), "worker_pid", json_integer(getpid()));
    rl_column *uo = rl_dataproto_new_column(out, "uid", RL_COL_STRING);
    for (int64_t i = 0; i < rows; i++)
        rl_column_set_str(uo, i, rl_column_str(uid, i));
    free(score);
    return out;
}

static void s_worker(int pipe_w)
{
    void *ctx = zmq_ctx_new();
    void *sock = zmq_socket(ctx, ZMQ_REP);
    if (zmq_bind(sock, "tcp://127.0.0.1:*"))
        s_fail("worker", "bind");
    char ep[256] = {0};
    size_t len = sizeof ep;
    zmq_getsockopt(sock, ZMQ_LAST_ENDPOINT, ep, &len);
    if (write(pipe_w, ep, sizeof ep) != (ssize_t)sizeof ep)
        s_fail("worker", "pipe");
    close(pipe_w);
    for (;;) {
        rl_dataproto *in;
        if (rl_wire_recv_dataproto(sock, &in))
            s_fail("worker", "recv");
        int stop = json_is_true(json_object_get(rl_dataproto_meta(in), "shutdown"));
        rl_dataproto *out = stop ? rl_dataproto_new() : s_grpo(in);
        rl_dataproto_free(in);
        if (!out)
            s_fail("worker", "grpo");
        if (rl_wire_send_dataproto(sock, out, 0))
            s_fail("worker", "send");
        rl_dataproto_free(out);
        if (stop)
            break;
    }
    zmq_close(sock);
    zmq_ctx_term(ctx);
    _exit(0);
}

/* ---- driver ------------------------------------------------------------------------- */

static rl_dataproto *s_make_batch(int step, rl_rng *g)
{
    rl_dataproto *dp = rl_dataproto_new();
    int64_t shape[2] = {ROWS, T};
    rl_tensor *sc = rl_dataproto_new_tensor(dp, "token_level_scores", RL_F32, 2, shape);
    rl_tensor *mk = rl_dataproto_new_tensor(dp, "response_mask", RL_U8, 2, shape);
    rl_column *uid = rl_dataproto_new_column(dp, "uid", RL_COL_STRING);
    if (!sc || !mk || !uid)
        s_fail("driver", "batch");
    float *s = rl_tensor_data(sc);
    uint8_t *m = rl_tensor_data(mk);
    for (int p = 0; p < PROMPTS; p++) {
        /* prompts differ in difficulty: p solves with probability (p+1)/5 */
        double solve = (p + 1) / 5.0;
        for (int k = 0; k < SAMPLES; k++) {
            int i = p * SAMPLES + k;
            int len = 3 + (int)rl_rng_below(g, T - 3);
            for (int t = 0; t < len; t++)
                m[i * T + t] = 1;
            s[i * T + len - 1] = rl_rng_uniform(g) < solve ? 1.0f : 0.0f;
            char u[32];
            snprintf(u, sizeof u, "step%d-prompt%d", step, p);
            rl_column_set_str(uid, i, u);
        }
    }
    json_object_set_new(rl_dataproto_meta(dp), "step", json_integer(step));
    json_object_set_new(rl_dataproto_meta(dp), "epsilon", json_real(1e-6));
    return dp;
}

int main(int argc, char **argv)
{
    int steps = argc > 1 ? atoi(argv[1]) : 3;
    if (steps < 1)
        steps = 1;
    int pfd[2];
    if (pipe(pfd))
        return 1;
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        close(pfd[0]);
        s_worker(pfd[1]);
    }
    close(pfd[1]);
    char ep[256];
    if (read(pfd[0], ep, sizeof ep) != (ssize_t)sizeof ep) {
        fprintf(stderr, "rl-wire-demo: worker did not start\n");
        return 1;
    }
    close(pfd[0]);
    void *ctx = zmq_ctx_new();
    void *sock = zmq_socket(ctx, ZMQ_REQ);
    int tmo = 10000;
    zmq_setsockopt(sock, ZMQ_RCVTIMEO, &tmo, sizeof tmo);
    if (zmq_connect(sock, ep))
        s_fail("driver", "connect");
    printf("rl-wire-demo: driver pid %d, worker pid %d at %s\n", (int)getpid(), (int)pid, ep);
    printf("GRPO advantages: adv = (score - mean_uid) / (std_uid + eps), %d prompts x %d samples\n\n",
           PROMPTS, SAMPLES);
    rl_rng g;
    rl_rng_init(&g, 2024, 0);
    int bad = 0;
    for (int step = 0; step < steps; step++) {
        rl_dataproto *b = s_make_batch(step, &g);
        struct timespec t0, t1;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        if (rl_wire_send_dataproto(sock, b, 0))
            s_fail("driver", "send");
        rl_dataproto *r;
        if (rl_wire_recv_dataproto(sock, &r))
            s_fail("driver", "recv");
        clock_gettime(CLOCK_MONOTONIC, &t1);
        double us = (t1.tv_sec - t0.tv_sec) * 1e6 + (t1.tv_nsec - t0.tv_nsec) / 1e3;
        const rl_tensor *adv = rl_dataproto_tensor_typed(r, "advantages", RL_F32);
        const rl_tensor *sc = rl_dataproto_tensor_typed(r, "scores", RL_F32);
        const rl_column *uid = rl_dataproto_column(r, "uid");
        if (!adv || !sc || !uid || rl_dataproto_rows(r) != ROWS)
            s_fail("driver", "reply");
        const float *a = rl_tensor_data(adv), *s = rl_tensor_data(sc);
        json_t *groups = json_object_get(rl_dataproto_meta(r), "groups");
        printf("step %d  (round trip %.0f us, worker %lld)\n", step, us,
               (long long)json_integer_value(json_object_get(rl_dataproto_meta(r), "worker_pid")));
        printf("  %-4s %-18s %6s %8s %8s %10s\n", "row", "uid", "score", "mean", "std", "advantage");
        for (int i = 0; i < ROWS; i++) {
            const char *u = rl_column_str(uid, i);
            json_t *gs = json_object_get(groups, u);
            printf("  %-4d %-18s %6.1f %8.3f %8.3f %10.4f\n", i, u, s[i],
                   json_real_value(json_object_get(gs, "mean")),
                   json_real_value(json_object_get(gs, "std")), a[i]);
        }
        /* each group's advantages must sum to 0 */
        for (int p = 0; p < PROMPTS; p++) {
            double sum = 0;
            for (int k = 0; k < SAMPLES; k++)
                sum += a[p * SAMPLES + k];
            if (fabs(sum) > 1e-4) {
                printf("  group %d: advantages sum to %g, expected 0\n", p, sum);
                bad = 1;
            }
        }
        printf("\n");
        rl_dataproto_free(r);
        rl_dataproto_free(b);
    }
    rl_dataproto *stop = rl_dataproto_new();
    json_object_set_new(rl_dataproto_meta(stop), "shutdown", json_true());
    rl_dataproto *ack = NULL;
    if (rl_wire_send_dataproto(sock, stop, 0) || rl_wire_recv_dataproto(sock, &ack))
        s_fail("driver", "shutdown");
    rl_dataproto_free(ack);
    rl_dataproto_free(stop);
    int st = 0;
    waitpid(pid, &st, 0);
    zmq_close(sock);
    zmq_ctx_term(ctx);
    if (bad || !WIFEXITED(st) || WEXITSTATUS(st)) {
        printf("rl-wire-demo: FAILED\n");
        return 1;
    }
    printf("rl-wire-demo: %d steps ok, worker exited cleanly\n", steps);
    return 0;
}
