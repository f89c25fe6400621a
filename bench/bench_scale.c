/* bench_scale.c — how each cost of the single controller grows with the
 * number of workers: one job of N rl-worker processes (role `reward`
 * serving the selftest's test methods: fixed small work) plus one actor
 * rank (the weight sender), on this machine, for each N of
 * RL_BENCH_SCALE_NS (default "1 8 32 128 256"). For each N it prints
 * `bench: <measure>_<N> = value`:
 *   start_s            rl_driver_start until every rank is READY
 *   dispatch_p50_ms, dispatch_p99_ms   a dp_compute echo_queued of 4 rows per
 *                      worker (16 floats a row) across all N, RL_BENCH_SCALE_CALLS
 *                      calls (default 200)
 *   driver_cpu_ms_per_step, driver_cpu_us_per_step_per_worker   this
 *                      process's CPU (driver and its I/O thread) over those calls
 *   heartbeat_msgs_per_s, driver_idle_cpu_pct   driver CPU while the job idles
 *                      RL_BENCH_SCALE_IDLE_S (default 3) s: heartbeats only; the
 *                      message rate is 2 N / interval (each side sends one per interval)
 *   driver_rss_kib_per_worker   this process's RSS growth from before the
 *                      driver starts to after the calls, over N
 *   detect_s, recover_s a worker killed with SIGKILL: until the driver counts
 *                      a restart, and until a one_to_all call on all N succeeds again
 *   mass_kill_workers, mass_recover_s, mass_result_equal   10% of the workers
 *                      killed at once during a dp_compute: until the call,
 *                      replayed, returns exactly its batch (s_mass_kill)
 *   fanout_<star|chain>_ms   the actor's weight send of RL_BENCH_SCALE_FANOUT_MIB
 *                      (default 4) MiB in 256 KiB buckets to all N receivers,
 *                      until every one acknowledged (sender's clock); and for N
 *                      <= 8 the same of 64 MiB (64 MiB x 2 buffers x 256
 *                      receivers does not fit this machine's memory)
 * RL_BENCH_SCALE_RELAY=K puts the workers on nodes of K (all this machine),
 * each behind a relay (cluster.yaml relay: true; rlrt/runtime/relay.h).
 * Before each N it checks the descriptor and process limits and stops with
 * a message naming the limit when it would not fit.
 * Run: make bench-scale (bench/bench_scale.sh writes docs/RESULTS.md's
 * bench-scale section and the plots). */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "rlrt/error.h"
#include "rlrt/log.h"
#include "rlrt/dtype.h"
#include "rlrt/tensor.h"
#include "rlrt/dataproto.h"
#include "rlrt/config.h"
#include "workers/contracts.h"
#include "rlrt/runtime/cluster.h"
#include "rlrt/runtime/driver.h"

static double s_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

static double s_cpu_self(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 + ru.ru_stime.tv_sec +
           ru.ru_stime.tv_usec / 1e6;
}

static long s_rss_kib(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long kib = -1;
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "VmRSS: %ld", &kib) == 1)
            break;
    if (f)
        fclose(f);
    return kib;
}

/* CPU seconds (user + system, all threads) of process pid, from
 * /proc/pid/stat; 0 when it cannot be read. */
static double s_cpu_pid(pid_t pid)
{
    char path[64], buf[1024];
    snprintf(path, sizeof path, "/proc/%ld/stat", (long)pid);
    FILE *f = fopen(path, "r");
    if (!f)
        return 0;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    char *p = strrchr(buf, ')'); /* the command name may hold spaces */
    unsigned long ut = 0, st = 0;
    if (!p || sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu", &ut, &st) != 2)
        return 0;
    return (double)(ut + st) / (double)sysconf(_SC_CLK_TCK);
}

/* The summed CPU seconds of g's worker processes. */
static double s_cpu_group(rl_group *g)
{
    double t = 0;
    for (int r = 0; r < rl_group_size(g); r++)
        t += s_cpu_pid(rl_group_pid(g, r));
    return t;
}

static int s_cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double s_pct(double *v, int n, double p)
{
    qsort(v, (size_t)n, sizeof *v, s_cmp);
    int i = (int)(p * (n - 1) + 0.5);
    return v[i < n ? i : n - 1];
}

static int s_env_int(const char *name, int def)
{
    const char *v = getenv(name);
    return v && atoi(v) > 0 ? atoi(v) : def;
}

/* Descriptors and processes a job of n workers needs here: the driver's
 * ROUTER holds a connection per worker, and every worker is a process with
 * a few threads (main, compute, ZeroMQ I/O). */
static int s_check_limits(int n)
{
    struct rlimit fd, pr;
    getrlimit(RLIMIT_NOFILE, &fd);
    getrlimit(RLIMIT_NPROC, &pr);
    long need_fd = 4L * n + 256, need_pr = 8L * n + 64;
    if (fd.rlim_cur != RLIM_INFINITY && (long)fd.rlim_cur < need_fd) {
        printf("bench_scale: N = %d needs about %ld descriptors in the driver; ulimit -n is %ld "
               "(raise it with ulimit -n %ld)\n", n, need_fd, (long)fd.rlim_cur, need_fd);
        return -1;
    }
    if (pr.rlim_cur != RLIM_INFINITY && (long)pr.rlim_cur < need_pr) {
        printf("bench_scale: N = %d needs about %ld processes/threads; ulimit -u is %ld "
               "(raise it with ulimit -u %ld)\n", n, need_pr, (long)pr.rlim_cur, need_pr);
        return -1;
    }
    FILE *f = fopen("/proc/sys/kernel/pid_max", "r");
    long pid_max = 0;
    if (f && fscanf(f, "%ld", &pid_max) == 1 && pid_max < need_pr) {
        printf("bench_scale: N = %d needs about %ld pids; /proc/sys/kernel/pid_max is %ld\n", n,
               need_pr, pid_max);
        fclose(f);
        return -1;
    }
    if (f)
        fclose(f);
    return 0;
}

static rl_dataproto *s_batch(int64_t rows, int64_t cols)
{
    rl_dataproto *dp = rl_dataproto_new();
    int64_t shape[2] = {rows, cols};
    float *x = rl_tensor_data(rl_dataproto_new_tensor(dp, "x", RL_F32, 2, shape));
    for (int64_t i = 0; i < rows * cols; i++)
        x[i] = (float)(i & 1023);
    return dp;
}

static void s_die(const char *what)
{
    fprintf(stderr, "bench_scale: %s: %s\n", what, rl_error_message());
    exit(1);
}

typedef struct s_killer {
    pid_t *pids;
    int n;
} s_killer;

static void *s_killer_main(void *p)
{
    s_killer *k = p;
    usleep(2000); /* the call is on its way */
    for (int i = 0; i < k->n; i++)
        kill(k->pids[i], SIGKILL);
    return NULL;
}

/* 10% of the workers (at least 1, spread over the ranks) killed at once
 * while a dp_compute over all N is in flight; then, as a recipe replays
 * its step, the call again until it succeeds: it must return exactly the
 * batch it was given (the echo). Prints mass_kill_workers_N,
 * mass_recover_s_N (kill → a correct call over all N) and
 * mass_result_equal_N (1: the replayed step's result is the fault-free
 * one). */
static void s_mass_kill(rl_driver *d, rl_group *g, int n)
{
    int nk = n / 10 > 0 ? n / 10 : 1, restarts = rl_driver_restarts(d);
    s_killer k = {calloc((size_t)nk, sizeof(pid_t)), nk};
    if (!k.pids)
        s_die("memory");
    for (int i = 0; i < nk; i++)
        k.pids[i] = rl_group_pid(g, (int)((int64_t)i * n / nk + n / (2 * nk)));
    rl_dataproto *b = s_batch(4 * n, 16), *out = NULL;
    pthread_t th;
    double k0 = s_now();
    if (pthread_create(&th, NULL, s_killer_main, &k))
        s_die("thread");
    int first = rl_group_call_sync(g, "echo_queued", RL_DISPATCH_DP_COMPUTE, b, &out);
    pthread_join(th, NULL);
    int equal = 0, tries = 1;
    for (;;) {
        if (!first && out) {
            const rl_tensor *a = rl_dataproto_tensor(b, "x"), *o = rl_dataproto_tensor(out, "x");
            equal = o && o->numel == a->numel &&
                    memcmp(rl_tensor_data((rl_tensor *)o), rl_tensor_data((rl_tensor *)a),
                           sizeof(float) * (size_t)a->numel) == 0;
            /* a call that finished before the kill landed proves nothing: go on
             * until every killed rank was restarted and answered */
            if (rl_driver_restarts(d) >= restarts + nk)
                break;
        }
        rl_dataproto_free(out);
        out = NULL;
        if (s_now() - k0 > 300) {
            printf("bench_scale: N = %d: no correct call within 300 s of killing %d workers: %s\n",
                   n, nk, rl_error_message());
            break;
        }
        usleep(10000);
        first = rl_group_call_sync(g, "echo_queued", RL_DISPATCH_DP_COMPUTE, b, &out);
        tries++;
    }
    printf("bench: mass_kill_workers_%d = %d\n", n, nk);
    printf("bench: mass_recover_s_%d = %.3f (%d calls)\n", n, s_now() - k0, tries);
    printf("bench: mass_result_equal_%d = %d\n", n, equal);
    fflush(stdout);
    rl_dataproto_free(out);
    rl_dataproto_free(b);
    free(k.pids);
}

/* One broadcast of count floats as `version` from actor rank 0 to all of
 * g's ranks; the sender's milliseconds. */
/* Remote nodes (bench/bench_scale_netns.sh, below): the namespaces'
 * prefix, and the external workers this program started (the actor first). */
static const char *s_netns;
static int s_per_node = 8;
static pid_t *s_ext_pids;
static int s_n_ext;

/* The summed CPU seconds of the receivers: g's processes, or across
 * namespaces the external workers this program started (the actor first). */
static double s_heads_cpu; /* of the last s_cpu_receivers: the nodes' heads' part */

static double s_cpu_receivers(rl_group *g)
{
    if (!s_netns)
        return s_cpu_group(g);
    double t = 0;
    s_heads_cpu = 0;
    for (int i = 1; i < s_n_ext; i++) {
        double c = s_ext_pids[i] > 0 ? s_cpu_pid(s_ext_pids[i]) : 0;
        t += c;
        if ((i - 1) % s_per_node == 0) /* rank i - 1 is its node's lowest: its head */
            s_heads_cpu += c;
    }
    return t;
}

static double s_fanout(rl_group *actor, rl_group *g, const char *endpoint, int64_t count,
                       int64_t version, const char *fanout, double *cpu)
{
    int n = rl_group_size(g);
    rl_dataproto *pub = rl_dataproto_new_meta(json_pack("{s:I, s:I, s:i, s:s, s:i}", "version",
                                                        (json_int_t)version, "count",
                                                        (json_int_t)count, "receivers", n,
                                                        "fanout", fanout, "timeout_ms", 280000));
    rl_dataproto **sub = calloc((size_t)n, sizeof *sub);
    for (int r = 0; r < n; r++)
        sub[r] = rl_dataproto_new_meta(json_pack("{s:s, s:I, s:s, s:i, s:i}", "endpoint", endpoint,
                                                 "count", (json_int_t)count, "host",
                                                 rl_group_address(g, r), "timeout_ms", 280000,
                                                 "check", 0));
    double cpu0 = s_cpu_receivers(g), heads0 = s_heads_cpu;
    rl_future *fp = rl_group_call(actor, "weights_send", RL_DISPATCH_RANK_ZERO, pub);
    rl_future *fs = rl_group_call_each(g, "weights_recv", sub);
    rl_future *both[2] = {fs, fp};
    if (!fp || !fs || rl_future_wait_all(both, 2, 300000))
        s_die("weight fan-out");
    rl_dataproto *out = NULL;
    double ms = -1;
    if (rl_future_take_rank(fp, 0, &out) == 0)
        ms = json_real_value(json_object_get(rl_dataproto_meta(out), "ms"));
    rl_dataproto_free(out);
    if (cpu) {
        *cpu = s_cpu_receivers(g) - cpu0;
        s_heads_cpu -= heads0;
    }
    rl_future_free(fp);
    rl_future_free(fs);
    /* every receiver checks every value of the version it got, after the
     * broadcast the sender timed: an early receiver's check would take the
     * cores from the ones still receiving */
    if (rl_group_call_sync(g, "weights_check", RL_DISPATCH_ONE_TO_ALL, NULL, NULL))
        s_die("weights_check");
    rl_dataproto_free(pub);
    for (int r = 0; r < n; r++)
        rl_dataproto_free(sub[r]);
    free(sub);
    return ms;
}

/* ---- remote nodes: network namespaces (bench/bench_scale_netns.sh) ----------------------
 * With RL_BENCH_SCALE_NETNS=PREFIX the script has made namespaces PREFIX-0
 * .. PREFIX-K, node k at 10.88.1.(k+1) behind a rate-limited veth on a
 * bridge at 10.88.0.1 (the namespace this program runs in). The actor is
 * alone on node 0 (its link is the sender's NIC); receiver rank r is on
 * node 1 + r / RL_BENCH_SCALE_PER_NODE. The workers are external: this
 * program starts them with `ip netns exec` and reaps them. */

static int s_node_of(int rank) { return 1 + rank / s_per_node; }

static pid_t s_spawn_ext(const char *worker, const char *role, int rank, int node)
{
    char ns[96], r[16], nd[32], drv[64];
    snprintf(ns, sizeof ns, "%s-%d", s_netns, node);
    snprintf(r, sizeof r, "%d", rank);
    snprintf(nd, sizeof nd, "node%d", node);
    snprintf(drv, sizeof drv, "tcp://10.88.0.1:5590");
    pid_t pid = fork();
    if (pid == 0) {
        execlp("ip", "ip", "netns", "exec", ns, worker, "--role", role, "--rank", r, "--node", nd,
               "--driver", drv, "--log-level", "error", "--give-up-s", "120", (char *)NULL);
        _exit(127);
    }
    return pid;
}

/* Waits up to timeout_s for the external workers, then kills what is left. */
static void s_reap_ext(double timeout_s)
{
    double t0 = s_now();
    int left = s_n_ext;
    while (left && s_now() - t0 < timeout_s) {
        left = 0;
        for (int i = 0; i < s_n_ext; i++) {
            if (s_ext_pids[i] > 0 && waitpid(s_ext_pids[i], NULL, WNOHANG) == 0)
                left++;
            else
                s_ext_pids[i] = 0;
        }
        if (left)
            usleep(20000);
    }
    for (int i = 0; i < s_n_ext; i++)
        if (s_ext_pids[i] > 0) {
            kill(s_ext_pids[i], SIGKILL);
            waitpid(s_ext_pids[i], NULL, 0);
        }
    free(s_ext_pids);
    s_ext_pids = NULL;
    s_n_ext = 0;
}

/* The cluster of a job of n receivers: local processes, or nodes behind
 * namespaces. A malloc'ed string. */
static int s_relay; /* RL_BENCH_SCALE_RELAY: workers per relay node (0: none) */

static char *s_cluster_yaml(int n, double hb)
{
    size_t cap = 4096 + (size_t)n * 96;
    char *y = malloc(cap);
    if (!y)
        return NULL;
    if (!s_netns && s_relay > 0) { /* nodes of s_relay workers, each behind a relay */
        int nodes = (n + 1 + s_relay - 1) / s_relay;
        size_t len = (size_t)snprintf(y, cap,
                                      "driver: {bind: 127.0.0.1, port: 5555}\n"
                                      "heartbeat: {interval_s: %.1f, liveness: 3}\n"
                                      "restart: {max_restarts: 3, backoff_s: 0.1, "
                                      "backoff_max_s: 1.0}\nnodes:\n", hb);
        for (int k = 0; k < nodes && len < cap; k++)
            len += (size_t)snprintf(y + len, cap - len, "  - {name: n%d, address: 127.0.0.1, "
                                    "launch: local, relay: true}\n", k);
        len += (size_t)snprintf(y + len, cap - len, "roles:\n  actor: {count: 1, node: n0}\n"
                                "  reward:\n    count: %d\n    placement:\n", n);
        for (int r = 0; r < n && len < cap; r++)
            len += (size_t)snprintf(y + len, cap - len, "      - {rank: %d, node: n%d}\n", r,
                                    (r + 1) / s_relay);
        return y;
    }
    if (!s_netns) {
        snprintf(y, cap,
                 "driver: {bind: 127.0.0.1, port: 5555}\n"
                 "nodes: [{name: local, address: 127.0.0.1, launch: local}]\n"
                 "heartbeat: {interval_s: %.1f, liveness: 3}\n"
                 "restart: {max_restarts: 3, backoff_s: 0.1, backoff_max_s: 1.0}\n"
                 "roles: {reward: {count: %d, node: local}, actor: {count: 1, node: local}}\n",
                 hb, n);
        return y;
    }
    int nodes = 1 + s_node_of(n - 1);
    size_t len = (size_t)snprintf(y, cap,
                                  "driver: {bind: 10.88.0.1, address: 10.88.0.1, port: 5590}\n"
                                  "heartbeat: {interval_s: %.1f, liveness: 3}\n"
                                  "external_wait_timeout_s: 300\n"
                                  "nodes:\n", hb);
    for (int k = 0; k < nodes && len < cap; k++)
        len += (size_t)snprintf(y + len, cap - len,
                                "  - {name: node%d, address: 10.88.1.%d, launch: external}\n", k,
                                k + 1);
    len += (size_t)snprintf(y + len, cap - len, "roles:\n  actor: {count: 1, node: node0}\n"
                                                "  reward:\n    count: %d\n    placement:\n", n);
    for (int r = 0; r < n && len < cap; r++)
        len += (size_t)snprintf(y + len, cap - len, "      - {rank: %d, node: node%d}\n", r,
                                s_node_of(r));
    return y;
}

static int s_job(int n, const char *worker)
{
    if (s_check_limits(n))
        return -1;
    double hb = 1.0;
    if (s_netns) {
        if (1 + s_node_of(n - 1) > 250) {
            printf("bench_scale: N = %d needs more than 250 namespaces\n", n);
            return -1;
        }
        s_ext_pids = calloc((size_t)n + 1, sizeof *s_ext_pids);
        if (!s_ext_pids)
            s_die("memory");
        s_ext_pids[s_n_ext++] = s_spawn_ext(worker, "actor", 0, 0);
        for (int r = 0; r < n; r++)
            s_ext_pids[s_n_ext++] = s_spawn_ext(worker, "reward", r, s_node_of(r));
    }
    char *yaml = s_cluster_yaml(n, hb);
    if (!yaml)
        s_die("memory");
    rl_config *cfg = rl_config_parse_string(yaml, strlen(yaml), "bench-scale-cluster.yaml");
    free(yaml);
    rl_cluster *cl = cfg ? rl_cluster_from_config(cfg) : NULL;
    rl_config *job = rl_roles_job(NULL, 0, NULL);
    if (!cl || !job)
        s_die("cluster");
    long rss0 = s_rss_kib();
    rl_driver_options opt = {.cluster = cl, .job = job, .worker_binary = worker,
                             .bind_override = s_netns ? NULL : "tcp://127.0.0.1:*", .worker_log_level = "warn",
                             .test_methods = 1, .ready_timeout_ms = 300000};
    double t0 = s_now();
    rl_driver *d = rl_driver_new(&opt);
    if (!d || rl_driver_start(d)) { /* the largest N that fits is the one before */
        printf("bench_scale: N = %d did not start within 300 s on this machine: %.300s\n", n,
               rl_error_message());
        for (int i = 0; i < s_n_ext; i++) { /* which external workers are gone, and how */
            int st = 0;
            if (s_ext_pids[i] > 0 && waitpid(s_ext_pids[i], &st, WNOHANG) == s_ext_pids[i]) {
                printf("bench_scale: external worker %d (pid %ld) %s %d\n", i - 1,
                       (long)s_ext_pids[i], WIFEXITED(st) ? "exited" : "was killed by signal",
                       WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st));
                s_ext_pids[i] = 0;
            }
        }
        if (d)
            rl_driver_shutdown(d, 30000);
        rl_driver_free(d);
        s_reap_ext(5);
        return -1;
    }
    rl_group *g = rl_driver_group(d, "reward"), *actor = rl_driver_group(d, "actor");
    if (rl_group_wait_ready(g, 600000) || rl_group_wait_ready(actor, 600000))
        s_die("ready");
    double start_s = s_now() - t0;
    printf("bench: start_s_%d = %.2f\n", n, start_s);
    fflush(stdout);

    /* dispatch: dp_compute of 4 rows per worker */
    /* 200: the workers' CPU per call is read off /proc in 10 ms ticks, which
     * 40 calls of 8 workers (320 worker-calls) resolved to only ~30 µs */
    int calls = s_env_int("RL_BENCH_SCALE_CALLS", 200);
    printf("bench: calls = %d\n", calls);
    rl_dataproto *b = s_batch(4 * n, 16);
    for (int i = 0; i < 3; i++)
        if (rl_group_call_sync(g, "echo_queued", RL_DISPATCH_DP_COMPUTE, b, NULL))
            s_die("dp_compute");
    double *lat = calloc((size_t)calls, sizeof *lat);
    double c0 = s_cpu_self(), w0cpu = s_cpu_group(g);
    for (int i = 0; i < calls; i++) {
        rl_dataproto *out = NULL;
        double a = s_now();
        if (rl_group_call_sync(g, "echo_queued", RL_DISPATCH_DP_COMPUTE, b, &out))
            s_die("dp_compute");
        lat[i] = s_now() - a;
        rl_dataproto_free(out);
    }
    double cpu_call = (s_cpu_self() - c0) / calls;
    double wcpu_call = (s_cpu_group(g) - w0cpu) / calls;
    printf("bench: dispatch_p50_ms_%d = %.3f\n", n, s_pct(lat, calls, 0.5) * 1e3);
    printf("bench: dispatch_p99_ms_%d = %.3f\n", n, s_pct(lat, calls, 0.99) * 1e3);
    printf("bench: driver_cpu_ms_per_step_%d = %.3f\n", n, cpu_call * 1e3);
    printf("bench: driver_cpu_us_per_step_per_worker_%d = %.2f\n", n, cpu_call * 1e6 / n);
    if (!s_netns) /* external workers: not this program's children to measure */
        printf("bench: worker_cpu_us_per_call_%d = %.1f\n", n, wcpu_call * 1e6 / n);
    if (getenv("RL_BENCH_SCALE_ONLY_DISPATCH")) {
        rl_driver_shutdown(d, 30000);
        rl_driver_free(d);
        s_reap_ext(30);
        rl_cluster_free(cl);
        rl_config_free(cfg);
        rl_config_free(job);
        return 0;
    }
    free(lat);
    rl_dataproto_free(b);
    long rss1 = s_rss_kib();
    printf("bench: driver_rss_kib_%d = %ld\n", n, rss1);
    printf("bench: driver_rss_kib_per_worker_%d = %.1f\n", n, (double)(rss1 - rss0) / (n + 1));
    fflush(stdout);

    /* idle: heartbeats only */
    int idle = s_env_int("RL_BENCH_SCALE_IDLE_S", 3);
    c0 = s_cpu_self();
    double w0 = s_now();
    sleep((unsigned)idle);
    double idle_cpu = (s_cpu_self() - c0) / (s_now() - w0);
    printf("bench: heartbeat_msgs_per_s_%d = %.0f\n", n, 2.0 * (n + 1) / hb);
    printf("bench: driver_idle_cpu_pct_%d = %.2f\n", n, idle_cpu * 100);
    fflush(stdout);

    /* fan-out: star vs chain, the same buffer */
    int bucket_kib = s_env_int("RL_BENCH_SCALE_BUCKET_KIB", 256);
    rl_dataproto *o = rl_dataproto_new_meta(json_pack("{s:s, s:i}", "host",
                                                      rl_group_address(actor, 0), "bucket_kib",
                                                      bucket_kib)),
                 *eo = NULL;
    if (rl_group_call_sync(actor, "weights_open", RL_DISPATCH_RANK_ZERO, o, &eo))
        s_die("weights_open");
    char ep[400];
    snprintf(ep, sizeof ep, "%s", rl_dataproto_meta_str(eo, "endpoint", ""));
    rl_dataproto_free(o);
    rl_dataproto_free(eo);
    int64_t version = 0;
    int mib = s_env_int("RL_BENCH_SCALE_FANOUT_MIB", 4);
    int64_t count = (int64_t)mib << 18;
    double star = 0, chain = 0, chain_cpu = 0, heads_cpu = 0;
    s_fanout(actor, g, ep, count, ++version, "chain", NULL); /* connects every receiver */
    /* across rate-limited links a star is N transfers long: not past 32
     * (the report extrapolates it, linear in N by the link's arithmetic) */
    int star_reps = s_netns && n > 32 ? 0 : 2;
    for (int rep = 0; rep < 2; rep++) { /* interleaved; best of 2 each */
        double s1 = rep < star_reps ? s_fanout(actor, g, ep, count, ++version, "star", NULL) : -1;
        double ccpu = 0, c1 = s_fanout(actor, g, ep, count, ++version, "chain", &ccpu);
        star = rep == 0 || s1 < star ? s1 : star;
        chain_cpu += ccpu / 2;
        heads_cpu += s_heads_cpu / 2;
        chain = rep == 0 || c1 < chain ? c1 : chain;
    }
    printf("bench: fanout_mib = %d\n", mib);
    printf("bench: fanout_bucket_kib = %d\n", bucket_kib);
    if (star_reps)
        printf("bench: fanout_star_ms_%d = %.1f\n", n, star);
    printf("bench: fanout_chain_ms_%d = %.1f\n", n, chain);
    /* the receivers' summed CPU during a chain broadcast (mean of the two;
     * /proc, 10 ms ticks): what the cores must give, whatever else runs */
    printf("bench: fanout_chain_workers_cpu_ms_%d = %.0f\n", n, chain_cpu * 1e3);
    if (s_netns) /* of which the nodes' heads (they receive and forward over the links) */
        printf("bench: fanout_chain_heads_cpu_ms_%d = %.0f\n", n, heads_cpu * 1e3);
    if (s_netns) { /* external workers: nobody restarts a killed one */
        rl_driver_shutdown(d, 30000);
        rl_driver_free(d);
        s_reap_ext(30);
        rl_cluster_free(cl);
        rl_config_free(cfg);
        rl_config_free(job);
        return 0;
    }
    if (n <= 8) {
        double s64 = s_fanout(actor, g, ep, (int64_t)64 << 18, ++version, "star", NULL);
        double c64 = s_fanout(actor, g, ep, (int64_t)64 << 18, ++version, "chain", NULL);
        printf("bench: fanout64_star_ms_%d = %.1f\n", n, s64);
        printf("bench: fanout64_chain_ms_%d = %.1f\n", n, c64);
    }
    fflush(stdout);

    /* a worker killed: detection (the driver counts a restart) and recovery
     * (a call on every rank succeeds again) */
    int restarts = rl_driver_restarts(d);
    int victim = n / 2;
    pid_t pid = rl_group_pid(g, victim);
    double k0 = s_now();
    kill(pid, SIGKILL);
    while (rl_driver_restarts(d) == restarts && s_now() - k0 < 60)
        usleep(2000);
    double detect = s_now() - k0;
    while (rl_group_call_sync(g, "echo", RL_DISPATCH_ONE_TO_ALL, NULL, NULL) && s_now() - k0 < 120)
        usleep(10000);
    double recover = s_now() - k0;
    printf("bench: detect_s_%d = %.3f\n", n, detect);
    printf("bench: recover_s_%d = %.3f\n", n, recover);
    fflush(stdout);
    s_mass_kill(d, g, n);

    rl_driver_shutdown(d, 30000);
    rl_driver_free(d);
    rl_cluster_free(cl);
    rl_config_free(cfg);
    rl_config_free(job);
    return 0;
}

int main(void)
{
    signal(SIGPIPE, SIG_IGN);
    const char *build = getenv("BUILD");
    char worker[512];
    snprintf(worker, sizeof worker, "%s/bin/rl-worker", build ? build : "build");
    rl_log_set_level(RL_LOG_ERROR);
    s_netns = getenv("RL_BENCH_SCALE_NETNS");
    s_per_node = s_env_int("RL_BENCH_SCALE_PER_NODE", 8);
    s_relay = s_env_int("RL_BENCH_SCALE_RELAY", 0);
    const char *ns = getenv("RL_BENCH_SCALE_NS") ? getenv("RL_BENCH_SCALE_NS") : "1 8 32 128 256";
    char buf[256];
    snprintf(buf, sizeof buf, "%s", ns);
    int largest = 0;
    for (char *tok = strtok(buf, " ,"); tok; tok = strtok(NULL, " ,")) {
        int n = atoi(tok);
        if (n < 1 || n > 1000) {
            fprintf(stderr, "bench_scale: N = %s outside [1, 1000]\n", tok);
            return 2;
        }
        if (s_job(n, worker))
            break;
        largest = n;
    }
    printf("bench: largest_n = %d\n", largest);
    return largest ? 0 : 1;
}
