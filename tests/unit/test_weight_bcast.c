/* test_weight_bcast.c — rlrt/runtime/weight_bcast.h over the CPU ring (the
 * same code runs over NCCL on device buffers: tests/unit/test_collective_nccl.c
 * is where two GPU ranks are tried):
 *
 * 1. Three versions from rank 0 to two receivers, cut into 16 buckets (and
 *    a count that leaves the last bucket short): each receiver's active
 *    buffer equals the sender's after every version.
 * 2. A sender that stops after the header and 2 of 16 buckets of version
 *    2: the receivers' call fails and version 1 stays active and whole.
 * 3. A receiver whose count differs from the sender's refuses the header
 *    (RL_EPROTO, naming both counts) and keeps no version.
 * 4. Buckets in flight: three versions of 6 MiB in 1 MiB buckets from a
 *    sender process with depth 1, 2 and 4, the receivers' process held
 *    stopped for 200 ms while it starts them (so no bucket can leave the
 *    socket buffer before the next starts): exactly `depth` buckets were
 *    in flight at once (1: one after another), and every version arrives
 *    bit for bit.
 * 5. A sender process SIGKILLed right after starting 4 of the 6 buckets of
 *    version 2 without waiting, all 4 in flight (the receivers held
 *    stopped meanwhile): both receivers fail (the timeout) and version 1
 *    stays active and whole.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "rlrt/error.h"
#include "rlrt/runtime/collective.h"
#include "rlrt/runtime/weight_bcast.h"

#include <dirent.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <stdlib.h>
#include <string.h>

enum { N = 1000, BUCKET = 256 /* bytes: 64 floats, 16 buckets */ };

static float s_val(int64_t i, uint64_t v)
{
    return (float)(i % 101) * 0.5f + (float)v * 1000.0f;
}

typedef struct s_rank {
    const rl_comm_id *id;
    int W, rank, scenario; /* 1, 2, 3 as above */
    int64_t count;
    int rc[3];             /* receivers: each recv's status */
    uint64_t version[3];   /* the active version after each */
    int64_t bad[3];        /* elements unequal to that version's values */
    char msg[3][512];
} s_rank;

static void *s_main(void *arg)
{
    s_rank *a = arg;
    rl_comm_options o;
    rl_comm_options_default(&o);
    o.timeout_s = 2;
    rl_comm *c = rl_comm_init_rank(a->id, a->W, a->rank, &o);
    if (!c) {
        a->rc[0] = rl_error_code();
        snprintf(a->msg[0], sizeof a->msg[0], "init: %s", rl_error_message());
        return NULL;
    }
    rl_weight_bcast *b = rl_weight_bcast_new(c, a->count, BUCKET);
    if (!b) {
        a->rc[0] = rl_error_code();
        snprintf(a->msg[0], sizeof a->msg[0], "new: %s", rl_error_message());
        rl_comm_destroy(c);
        return NULL;
    }
    static const uint64_t V[3] = {1, 2, 5};
    int rounds = a->scenario == 1 ? 3 : a->scenario == 2 ? 2 : 1;
    float *buf = malloc(sizeof(float) * (size_t)a->count);
    for (int k = 0; k < rounds; k++) {
        if (a->rank == 0) {
            for (int64_t i = 0; i < a->count; i++)
                buf[i] = s_val(i, V[k]);
            if (a->scenario == 2 && k == 1) { /* the header and 2 buckets of version 2, then gone */
                float h[8] = {7340033.0f, 2, 0, (float)a->count, 0, BUCKET / 4, 0, 0};
                a->rc[k] = rl_comm_broadcast(c, h, h, 8, 0);
                for (int j = 0; j < 2 && !a->rc[k]; j++)
                    a->rc[k] = rl_comm_broadcast(c, buf + j * (BUCKET / 4), buf + j * (BUCKET / 4), BUCKET / 4, 0);
                break;
            }
            a->rc[k] = rl_weight_bcast_send(b, V[k], buf);
        } else {
            a->rc[k] = rl_weight_bcast_recv(b);
            const float *act = rl_weight_bcast_active(b, &a->version[k]);
            for (int64_t i = 0; act && i < a->count; i++)
                a->bad[k] += act[i] != s_val(i, a->version[k]);
        }
        if (a->rc[k])
            snprintf(a->msg[k], sizeof a->msg[k], "%s", rl_error_message());
    }
    free(buf);
    rl_weight_bcast_free(b);
    rl_comm_destroy(c);
    return NULL;
}

static void s_run(int scenario, int W, const int64_t *counts, s_rank *r)
{
    rl_comm_id id;
    assert_int_equal(rl_comm_id_create(&id, NULL), 0);
    pthread_t th[4];
    for (int k = 0; k < W; k++) {
        memset(&r[k], 0, sizeof r[k]);
        r[k] = (s_rank){.id = &id, .W = W, .rank = k, .scenario = scenario, .count = counts[k]};
        assert_int_equal(pthread_create(&th[k], NULL, s_main, &r[k]), 0);
    }
    for (int k = 0; k < W; k++)
        pthread_join(th[k], NULL);
}

static void test_versions_whole(void **state)
{
    (void)state;
    s_rank r[3];
    const int64_t counts[3] = {N, N, N};
    s_run(1, 3, counts, r);
    static const uint64_t V[3] = {1, 2, 5};
    for (int k = 0; k < 3; k++) {
        if (r[0].rc[k])
            fail_msg("send %d: %s", k, r[0].msg[k]);
        for (int q = 1; q < 3; q++) {
            if (r[q].rc[k])
                fail_msg("rank %d recv %d: %s", q, k, r[q].msg[k]);
            assert_int_equal(r[q].version[k], V[k]);
            assert_int_equal(r[q].bad[k], 0);
        }
    }
}

static void test_sender_gone_mid_version(void **state)
{
    (void)state;
    s_rank r[3];
    const int64_t counts[3] = {N, N, N};
    s_run(2, 3, counts, r);
    for (int q = 1; q < 3; q++) {
        assert_int_equal(r[q].rc[0], 0);
        assert_int_not_equal(r[q].rc[1], 0); /* the version never completed */
        assert_int_equal(r[q].version[1], 1);
        assert_int_equal(r[q].bad[1], 0); /* version 1 whole */
        assert_non_null(strstr(r[q].msg[1], "version 1 stays active"));
        print_message("rank %d: %s\n", q, r[q].msg[1]);
    }
}

static void test_count_refused(void **state)
{
    (void)state;
    s_rank r[2];
    const int64_t counts[2] = {N, N - 1};
    s_run(3, 2, counts, r);
    assert_int_equal(r[1].rc[0], RL_EPROTO);
    assert_non_null(strstr(r[1].msg[0], "1000 floats for its 999"));
    assert_int_equal(r[1].version[0], 0);
}

static void test_refused_arguments(void **state)
{
    (void)state;
    assert_null(rl_weight_bcast_new(NULL, 10, 0));
    rl_comm_id id;
    assert_int_equal(rl_comm_id_create(&id, NULL), 0);
    rl_comm *c = rl_comm_init_rank(&id, 1, 0, NULL);
    assert_non_null(c);
    assert_null(rl_weight_bcast_new(c, 0, 0));
    rl_weight_bcast *b = rl_weight_bcast_new(c, 10, 0);
    assert_non_null(b);
    float x[10] = {0};
    assert_int_equal(rl_weight_bcast_send(b, 1, x), 0);
    assert_int_equal(rl_weight_bcast_send(b, 1, x), RL_EINVAL); /* must grow */
    assert_int_equal(rl_weight_bcast_recv(b), RL_ESTATE);      /* rank 0 sends */
    rl_weight_bcast_free(b);
    rl_comm_destroy(c);
}

enum { PN = 1536 * 1024, PBUCKET = 1 << 20 }; /* 6 MiB in 6 buckets of 1 MiB */

static const int s_depth[3] = {1, 2, 4};

static void s_nap_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* A receiver thread (ranks 1 and 2) of tests 4 and 5. */
typedef struct s_prank {
    const rl_comm_id *id;
    int rank, rounds;
    int rc[3];
    int64_t bad[3];
    uint64_t version[3];
    char msg[3][512];
} s_prank;

static void *s_receiver(void *arg)
{
    s_prank *a = arg;
    rl_comm_options o;
    rl_comm_options_default(&o);
    o.timeout_s = 3;
    rl_comm *c = rl_comm_init_rank(a->id, 3, a->rank, &o);
    rl_weight_bcast *b = c ? rl_weight_bcast_new(c, PN, PBUCKET) : NULL;
    if (!b) {
        a->rc[0] = rl_error_code();
        snprintf(a->msg[0], sizeof a->msg[0], "setup: %s", rl_error_message());
        rl_comm_destroy(c);
        return NULL;
    }
    for (int k = 0; k < a->rounds; k++) {
        a->rc[k] = rl_weight_bcast_recv(b);
        const float *act = rl_weight_bcast_active(b, &a->version[k]);
        for (int64_t i = 0; act && i < PN; i++)
            a->bad[k] += act[i] != s_val(i, a->version[k]);
        if (a->rc[k])
            snprintf(a->msg[k], sizeof a->msg[k], "%s", rl_error_message());
    }
    rl_weight_bcast_free(b);
    rl_comm_destroy(c);
    return NULL;
}

static pid_t s_parent;

/* SIGSTOP is delivered asynchronously: returns once every thread of pid is
 * stopped (/proc/PID/task/TID/stat state 'T'), or after 5 s. */
static void s_wait_stopped(pid_t pid)
{
    char dir[64];
    snprintf(dir, sizeof dir, "/proc/%d/task", (int)pid);
    for (int tries = 0; tries < 5000; tries++) {
        DIR *d = opendir(dir);
        int all = d != NULL;
        struct dirent *e;
        while (d && all && (e = readdir(d))) {
            if (e->d_name[0] == '.')
                continue;
            char path[64 + 256 + 8], line[512];
            snprintf(path, sizeof path, "%s/%s/stat", dir, e->d_name);
            FILE *f = fopen(path, "r");
            size_t n = f ? fread(line, 1, sizeof line - 1, f) : 0;
            if (f)
                fclose(f);
            line[n] = 0;
            const char *p = strrchr(line, ')');
            if (p && p[1] == ' ' && p[2] != 'T' && p[2] != 't')
                all = 0;
        }
        if (d)
            closedir(d);
        if (all)
            return;
        s_nap_ms(1);
    }
}

static void s_stop(pid_t pid)
{
    kill(pid, SIGSTOP);
    s_wait_stopped(pid);
}

static void *s_cont_later(void *arg)
{
    (void)arg;
    s_nap_ms(200);
    kill(s_parent, SIGCONT);
    return NULL;
}

/* The sender (rank 0) in a child process; the receivers are the parent's
 * threads. While it starts a version's buckets it holds the parent stopped
 * (SIGSTOP, SIGCONT 200 ms later): nothing drains the socket (it holds less
 * than a bucket), so what it counts in flight is the pipeline's depth,
 * whatever the scheduling. Writes {rc, buckets, most in flight} a version
 * to fd. kill_mid (test 5): version 1 whole, then the header and 4 of the 6
 * buckets of version 2 started without waiting, the count in flight
 * written, the parent continued and this process SIGKILLed. */
static void s_sender_child(const rl_comm_id *id, int fd, int kill_mid)
{
    s_parent = getppid();
    rl_comm_options o;
    rl_comm_options_default(&o);
    o.timeout_s = 3;
    rl_comm *c = rl_comm_init_rank(id, 3, 0, &o);
    rl_weight_bcast *b = c ? rl_weight_bcast_new(c, PN, PBUCKET) : NULL;
    float *buf = malloc(sizeof(float) * PN);
    if (!b || !buf)
        _exit(2);
    for (int k = 0; k < 3; k++) {
        for (int64_t i = 0; i < PN; i++)
            buf[i] = s_val(i, (uint64_t)k + 1);
        int out[3] = {0, 0, 0};
        if (kill_mid && k == 1) {
            float h[8] = {7340033.0f, 2, 0, (float)PN, 0, PBUCKET / 4, 0, 0};
            int rc = rl_comm_broadcast(c, h, h, 8, 0);
            s_stop(s_parent);
            for (int j = 0; j < 4 && !rc; j++)
                rc = rl_comm_broadcast_start(c, buf + j * (PBUCKET / 4), buf + j * (PBUCKET / 4), PBUCKET / 4, 0);
            out[0] = rc;
            out[2] = rc ? -1 : rl_comm_inflight(c);
            ssize_t w = write(fd, out, sizeof out);
            kill(s_parent, SIGCONT);
            (void)w;
            raise(SIGKILL); /* mid-version, buckets in flight: no goodbye */
        }
        pthread_t th;
        out[0] = rl_weight_bcast_set_depth(b, kill_mid ? 2 : s_depth[k]);
        s_stop(s_parent);
        if (pthread_create(&th, NULL, s_cont_later, NULL) != 0) {
            kill(s_parent, SIGCONT);
            _exit(3);
        }
        if (!out[0])
            out[0] = rl_weight_bcast_send(b, (uint64_t)k + 1, buf);
        pthread_join(th, NULL);
        int64_t nb = 0;
        rl_weight_bcast_last(b, &nb, &out[2]);
        out[1] = (int)nb;
        if (write(fd, out, sizeof out) != (ssize_t)sizeof out)
            _exit(4);
    }
    free(buf);
    rl_weight_bcast_free(b);
    rl_comm_destroy(c);
    _exit(0);
}

/* Tests 4 and 5: the sender child, the receivers here; out[k] its reports. */
static void s_run_pipelined(int kill_mid, s_prank r[3], int out[3][3], int *reports, int *status)
{
    rl_comm_id id;
    assert_int_equal(rl_comm_id_create(&id, NULL), 0);
    int fd[2];
    assert_int_equal(pipe(fd), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        close(fd[0]);
        s_sender_child(&id, fd[1], kill_mid);
    }
    close(fd[1]);
    pthread_t th[3];
    for (int k = 1; k < 3; k++) {
        memset(&r[k], 0, sizeof r[k]);
        r[k] = (s_prank){.id = &id, .rank = k, .rounds = kill_mid ? 2 : 3};
        assert_int_equal(pthread_create(&th[k], NULL, s_receiver, &r[k]), 0);
    }
    for (int k = 1; k < 3; k++)
        pthread_join(th[k], NULL);
    *reports = 0;
    while (*reports < 3 && read(fd[0], out[*reports], sizeof out[0]) == (ssize_t)sizeof out[0])
        (*reports)++;
    close(fd[0]);
    assert_int_equal(waitpid(pid, status, 0), pid);
}

static void test_buckets_in_flight(void **state)
{
    (void)state;
    s_prank r[3];
    int out[3][3], n = 0, st = 0;
    s_run_pipelined(0, r, out, &n, &st);
    assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    assert_int_equal(n, 3);
    for (int k = 0; k < 3; k++) {
        assert_int_equal(out[k][0], 0);
        assert_int_equal(out[k][1], 6);
        print_message("version %d: depth %d, %d buckets in flight at most\n", k + 1, s_depth[k], out[k][2]);
        assert_int_equal(out[k][2], s_depth[k]);
        for (int q = 1; q < 3; q++) {
            if (r[q].rc[k])
                fail_msg("rank %d recv %d: %s", q, k, r[q].msg[k]);
            assert_int_equal(r[q].version[k], (uint64_t)k + 1);
            assert_int_equal(r[q].bad[k], 0);
        }
    }
}

static void test_killed_with_buckets_in_flight(void **state)
{
    (void)state;
    s_prank r[3];
    int out[3][3], n = 0, st = 0;
    s_run_pipelined(1, r, out, &n, &st);
    assert_true(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
    assert_int_equal(n, 2);
    assert_int_equal(out[0][0], 0);
    assert_int_equal(out[1][0], 0);
    print_message("the sender was killed with %d buckets of version 2 in flight\n", out[1][2]);
    assert_int_equal(out[1][2], 4);
    for (int q = 1; q < 3; q++) {
        if (r[q].rc[0])
            fail_msg("rank %d, version 1: %s", q, r[q].msg[0]);
        assert_int_equal(r[q].version[0], 1);
        assert_int_not_equal(r[q].rc[1], 0);
        assert_int_equal(r[q].version[1], 1); /* version 2 never became active */
        assert_int_equal(r[q].bad[1], 0);     /* version 1 whole */
        assert_non_null(strstr(r[q].msg[1], "version 1 stays active"));
        print_message("rank %d: %s\n", q, r[q].msg[1]);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_versions_whole),
        cmocka_unit_test(test_sender_gone_mid_version),
        cmocka_unit_test(test_count_refused),
        cmocka_unit_test(test_refused_arguments),
        cmocka_unit_test(test_buckets_in_flight),
        cmocka_unit_test(test_killed_with_buckets_in_flight),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
