/* rl-worker — one binary for every role; --role picks the method table from
 * the registry (workers/registry.h). */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/prctl.h>
#include <unistd.h>

#include "rlrt/rlrt.h"
#include "common/core/util.h"
#include "workers/registry.h"
#include "rlrt/error.h"
#include "rlrt/log.h"
#include "common/nn/engine/ops.h"
#include "rlrt/runtime/cpus.h"
#include "rlrt/runtime/relay.h"
#include "common/runtime/net.h"
#include "rlrt/runtime/worker.h"
#include "workers/selftest/test_methods.h"

static void s_usage(FILE *f)
{
    char roles[512];
    fprintf(f,
            "usage: rl-worker --role ROLE --driver tcp://HOST:PORT [--rank N | --rank-from-hostname]\n"
            "                 [--node NAME] [--log-level debug|info|warn|error]\n"
            "                 [--heartbeat-ms MS] [--give-up-s S] [--start-window-s S]\n"
            "                 [--max-message-mb MB]\n"
            "                 [--cert FILE --driver-key KEY|FILE] [--http-port P [--http-bind ADDR]]\n"
            "                 [--cpus LIST | --share-cores K] [--job ID] [--token-stdin]\n"
            "       rl-worker --relay --driver tcp://HOST:PORT --bind ENDPOINT --node NAME\n"
            "                 [--relay-hold-ms MS] [--give-up-s S] [--log-level L]\n"
            "                 [--max-message-mb MB]\n"
            "\n"
            "Serves the methods of ROLE (%s) for an rl-driver.\n"
            "Started by the driver (local/ssh launch) or by systemd/Kubernetes (external).\n"
            "  --rank-from-hostname  the rank is the host name's trailing -N (a StatefulSet pod)\n"
            "  --instance ROLE-RANK  role and rank in one (systemd's rl-worker@actor-1)\n"
            "  --cert FILE           CurveZMQ: this worker's certificate (FILE and FILE_secret)\n"
            "  --driver-key KEY      the driver's public key (Z85) or its public certificate file\n"
            "  --http-port P         serve /healthz, /healthz/ready and /metrics on P\n"
            "  --cpus LIST           run on these cores only (\"0-7,16\"), with one compute\n"
            "                        thread per core unless OMP_NUM_THREADS is set\n"
            "  --share-cores K       K ranks of this role share this machine's cores: one\n"
            "                        compute thread per K cores (at least one) unless\n"
            "                        OMP_NUM_THREADS is set (the driver passes it)\n"
            "  --job ID, --token-stdin  set by the driver when it starts the worker\n"
            "  --relay               run as the relay of node NAME instead: its workers connect\n"
            "                        to ENDPOINT, the relay to the driver (cluster.yaml relay:)\n"
            "Environment: RL_DRIVER, RL_ROLE, RL_RANK, RL_WORKER_CERT, RL_DRIVER_KEY,\n"
            "RL_HTTP_PORT, RL_CPUS and RL_SHARE_CORES stand for the options; RL_WORKER_TOKEN\n"
            "holds a spawned worker's slot token. Under systemd (NOTIFY_SOCKET) it sends\n"
            "READY, STOPPING, WATCHDOG.\n"
            "Exits 0 on SHUTDOWN or SIGTERM, 1 on a start-up error or when the driver refuses\n"
            "it, 2 when the driver stays unreachable, 64 on a usage error.\n",
            rl_worker_role_names(roles, sizeof roles));
}

/* A whole decimal number in [lo, hi]. */
static int s_parse_long(const char *text, long lo, long hi, long *out)
{
    char *end;
    errno = 0;
    long v = strtol(text, &end, 10);
    if (errno || end == text || *end || v < lo || v > hi)
        return -1;
    *out = v;
    return 0;
}

static int s_bad(const char *opt, const char *value, const char *want)
{
    fprintf(stderr, "rl-worker: --%s '%s': expected %s\n", opt, value, want);
    return RL_WORKER_EXIT_USAGE;
}

/* *out = the option's value as an integer in [lo, hi]: 0, or s_bad's exit
 * code naming the option and what it wants. */
static int s_opt_int(const char *opt, const char *value, long lo, long hi, const char *want, int *out)
{
    long v;
    if (s_parse_long(value, lo, hi, &v))
        return s_bad(opt, value, want);
    *out = (int)v;
    return 0;
}

/* The rank of a StatefulSet pod: the host name's trailing "-N". */
static int s_rank_from_hostname(int *rank)
{
    char host[256];
    if (gethostname(host, sizeof host - 1) != 0)
        return -1;
    host[sizeof host - 1] = '\0';
    const char *dash = strrchr(host, '-');
    long r;
    if (!dash || s_parse_long(dash + 1, 0, INT_MAX, &r))
        return -1;
    *rank = (int)r;
    return 0;
}

static volatile sig_atomic_t s_relay_stop;

static void s_on_stop_signal(int signo)
{
    (void)signo;
    s_relay_stop = 1;
}

/* rl-worker --relay: a node relay (rlrt/runtime/relay.h) until SIGTERM or
 * SIGINT, or the death of the driver that started it (RL_DRIVER_PID). */
static int s_run_relay(const char *driver, const char *bind, const char *node, int hold_ms,
                       int give_up_ms, int64_t max_message_bytes, const char *cert,
                       const char *driver_key)
{
    if (!!cert != !!driver_key) {
        fprintf(stderr, "rl-worker: --relay: --cert and --driver-key go together (CurveZMQ)\n");
        return RL_WORKER_EXIT_USAGE;
    }
    if (cert) { /* its key pair towards the driver: a worker certificate */
        rl_net_keypair own;
        int rc = rl_net_load_cert(cert, 1, &own);
        if (!rc)
            rc = rl_net_set_security(&own, NULL, 0);
        memset(&own, 0, sizeof own);
        if (rc) {
            fprintf(stderr, "rl-worker: --relay: %s\n", rl_error_message());
            return RL_WORKER_EXIT_USAGE;
        }
    }
    if (!driver || !bind || !node) {
        fprintf(stderr, "rl-worker: --relay needs --driver, --bind and --node\n");
        return RL_WORKER_EXIT_USAGE;
    }
    rl_log_set_identity("relay", -1);
    if (max_message_bytes && rl_net_set_max_message(max_message_bytes)) {
        fprintf(stderr, "rl-worker: --max-message-mb: %s\n", rl_error_message());
        return RL_WORKER_EXIT_USAGE;
    }
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = s_on_stop_signal; /* no SA_RESTART: the poll returns */
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);
    long ppid = 0;
    const char *pp = getenv("RL_DRIVER_PID");
    if (pp && s_parse_long(pp, 2, INT_MAX, &ppid) == 0) {
        prctl(PR_SET_PDEATHSIG, SIGHUP); /* the driver's death stops us */
        if (getppid() != (pid_t)ppid)
            return RL_WORKER_EXIT_OK;
    }
    rl_relay_options ro = {driver, bind, node, hold_ms, &s_relay_stop, give_up_ms, driver_key};
    if (rl_relay_run(&ro, NULL)) {
        rl_log_error("%s", rl_error_message());
        return rl_error_code() == RL_EINVAL     ? RL_WORKER_EXIT_USAGE
               : rl_error_code() == RL_ETIMEOUT ? 2 /* like a worker whose driver is gone */
                                                : 1;
    }
    return RL_WORKER_EXIT_OK;
}

int main(int argc, char **argv)
{
    /* before anything reads the environment or stdin: the re-exec keeps
     * both (common/nn/engine/ops.h) */
    (void)rl_nn_use_passive_wait(argv);
    rl_malloc_policy();  /* docs/decisions/worker-allocator.md */
    long v0;
    static const struct option longopts[] = {
        {"role", required_argument, 0, 'r'},      {"driver", required_argument, 0, 'd'},
        {"rank", required_argument, 0, 'k'},      {"node", required_argument, 0, 'n'},
        {"log-level", required_argument, 0, 'l'}, {"heartbeat-ms", required_argument, 0, 'h'},
        {"give-up-s", required_argument, 0, 'g'}, {"help", no_argument, 0, 'H'},
        {"start-window-s", required_argument, 0, 'W'},
        {"version", no_argument, 0, 'V'},         {"job", required_argument, 0, 'j'},
        {"token-stdin", no_argument, 0, 't'},     {"cert", required_argument, 0, 'c'},
        {"driver-key", required_argument, 0, 'K'}, {"max-message-mb", required_argument, 0, 'm'},
        {"http-port", required_argument, 0, 'p'}, {"http-bind", required_argument, 0, 'b'},
        {"rank-from-hostname", no_argument, 0, 'R'}, {"instance", required_argument, 0, 'I'},
        {"cpus", required_argument, 0, 'C'},      {"share-cores", required_argument, 0, 'S'},
        {"relay", no_argument, 0, 'Y'},           {"bind", required_argument, 0, 'B'},
        {"relay-hold-ms", required_argument, 0, 'Z'},
        {0, 0, 0, 0},
    };
    rl_worker_options opt = {0};
    const char *role_name = getenv("RL_ROLE");
    opt.driver = getenv("RL_DRIVER");
    opt.cert = getenv("RL_WORKER_CERT");
    const char *driver_key = getenv("RL_DRIVER_KEY");
    const char *cpus = getenv("RL_CPUS");
    const char *share_text = getenv("RL_SHARE_CORES");
    const char *share_from = "share-cores (RL_SHARE_CORES)"; /* for its error */
    int token_stdin = 0, rank_from_host = 0, relay = 0, hold_ms = 20;
    const char *bind = NULL;
    static char token[128], keybuf[RL_NET_KEY_TXT];
    /* the slot token of a spawned worker: read it, then drop it from the
     * environment so that nothing this worker starts inherits it */
    const char *tok_env = getenv("RL_WORKER_TOKEN");
    if (tok_env) {
        snprintf(token, sizeof token, "%s", tok_env);
        opt.token = token;
    }
    if (getenv("RL_RANK") && (s_parse_long(getenv("RL_RANK"), 0, INT_MAX, &v0) == 0))
        opt.rank = (int)v0;
    if (getenv("RL_HTTP_PORT") && s_parse_long(getenv("RL_HTTP_PORT"), 0, 65535, &v0) == 0)
        opt.http_port = (int)v0;
    int c, rc;
    long v;
    while ((c = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
        switch (c) {
        case 'r': role_name = optarg; break;
        case 'd': opt.driver = optarg; break;
        case 'k':
            if ((rc = s_opt_int("rank", optarg, 0, INT_MAX, "an integer >= 0", &opt.rank)))
                return rc;
            break;
        case 'n': opt.node = optarg; break;
        case 'l': {
            rl_log_level lvl;
            if (rl_log_parse_level(optarg, &lvl)) {
                fprintf(stderr, "rl-worker: %s\n", rl_error_message());
                return RL_WORKER_EXIT_USAGE;
            }
            rl_log_set_level(lvl);
            break;
        }
        case 'h':
            if ((rc = s_opt_int("heartbeat-ms", optarg, 1, 3600000, "an integer in [1, 3600000]",
                                &opt.heartbeat_ms)))
                return rc;
            break;
        case 'g': {
            char *end;
            double s = strtod(optarg, &end);
            if (end == optarg || *end || !(s > 0 && s <= 2e6))
                return s_bad("give-up-s", optarg, "a number of seconds in (0, 2000000]");
            opt.give_up_ms = (int)(s * 1000);
            if (opt.give_up_ms < 1)
                opt.give_up_ms = 1;
            break;
        }
        case 'W': {
            char *end;
            double s = strtod(optarg, &end);
            if (end == optarg || *end || !(s >= 0 && s <= 2e6))
                return s_bad("start-window-s", optarg, "a number of seconds in [0, 2000000]");
            opt.start_window_ms = (int)(s * 1000);
            break;
        }
        case 'j': opt.job_id = optarg; break;
        case 't': token_stdin = 1; break;
        case 'c': opt.cert = optarg; break;
        case 'K': driver_key = optarg; break;
        case 'R': rank_from_host = 1; break;
        case 'I': { /* systemd's rl-worker@ROLE-RANK: role and rank in one */
            static char inst[128];
            const char *dash = strrchr(optarg, '-');
            if (!dash || dash == optarg || (size_t)(dash - optarg) >= sizeof inst ||
                s_parse_long(dash + 1, 0, INT_MAX, &v))
                return s_bad("instance", optarg, "ROLE-RANK, e.g. actor-1");
            snprintf(inst, sizeof inst, "%.*s", (int)(dash - optarg), optarg);
            role_name = inst;
            opt.rank = (int)v;
            break;
        }
        case 'b': opt.http_bind = optarg; break;
        case 'C': cpus = optarg; break;
        case 'S':
            share_text = optarg;
            share_from = "share-cores";
            break;
        case 'm':
            if (s_parse_long(optarg, 1, 1 << 20, &v))
                return s_bad("max-message-mb", optarg, "an integer in [1, 1048576]");
            opt.max_message_bytes = (int64_t)v << 20;
            break;
        case 'p':
            if ((rc = s_opt_int("http-port", optarg, 0, 65535, "a port in [0, 65535]", &opt.http_port)))
                return rc;
            break;
        case 'Y': relay = 1; break;
        case 'B': bind = optarg; break;
        case 'Z':
            if ((rc = s_opt_int("relay-hold-ms", optarg, 0, 10000, "an integer in [0, 10000]",
                                &hold_ms)))
                return rc;
            break;
        case 'H': s_usage(stdout); return RL_WORKER_EXIT_OK;
        case 'V': printf("rl-worker %s\n", RL_VERSION_STRING); return RL_WORKER_EXIT_OK;
        default: s_usage(stderr); return RL_WORKER_EXIT_USAGE;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "rl-worker: unexpected argument '%s'\n", argv[optind]);
        return RL_WORKER_EXIT_USAGE;
    }
    if (driver_key && strlen(driver_key) != 40) { /* a certificate file */
        rl_net_keypair kp;
        if (rl_net_load_cert(driver_key, 0, &kp)) {
            fprintf(stderr, "rl-worker: --driver-key: %s\n", rl_error_message());
            return RL_WORKER_EXIT_USAGE;
        }
        snprintf(keybuf, sizeof keybuf, "%s", kp.public_txt);
        driver_key = keybuf;
    }
    if (relay)
        return s_run_relay(opt.driver, bind, opt.node, hold_ms, opt.give_up_ms,
                           opt.max_message_bytes, opt.cert, driver_key);
    if (bind) {
        fprintf(stderr, "rl-worker: --bind is for --relay\n");
        return RL_WORKER_EXIT_USAGE;
    }
    /* Bind before any thread starts (threads inherit the mask), and size
     * libgomp's pool to the cores: it reads OMP_NUM_THREADS when it loads,
     * so the worker runs itself again with it set (the mask, argv, stdin
     * and the slot token carry over). Only then is the token dropped from
     * the environment, so that nothing this worker starts inherits it. */
    long share = 0;
    if (share_text && s_parse_long(share_text, 1, RL_CPUS_MAX, &share))
        return s_bad(share_from, share_text, "an integer in [1, 1024]");
    int ncpus = 0;
    if (cpus && *cpus) {
        if (rl_cpus_bind(cpus, &ncpus)) {
            fprintf(stderr, "rl-worker: --cpus: %s\n", rl_error_message());
            return RL_WORKER_EXIT_USAGE;
        }
        (void)rl_nn_use_thread_count(argv, ncpus);
    } else if (share > 1 && !rl_cpus_allowed(&ncpus)) {
        /* K ranks of this role share these cores: a pool of 1/K each */
        int n = ncpus / (int)share;
        (void)rl_nn_use_thread_count(argv, n > 0 ? n : 1);
    }
    if (tok_env)
        unsetenv("RL_WORKER_TOKEN");
    if (!role_name || !opt.driver) {
        fprintf(stderr, "rl-worker: --role and --driver are required\n");
        s_usage(stderr);
        return RL_WORKER_EXIT_USAGE;
    }
    const rl_worker_role *role = rl_worker_role_find(role_name);
    if (!role) {
        char roles[512];
        fprintf(stderr, "rl-worker: unknown role '%s' (this rl-worker serves: %s)\n", role_name,
                rl_worker_role_names(roles, sizeof roles));
        return RL_WORKER_EXIT_USAGE;
    }
    if (rank_from_host && s_rank_from_hostname(&opt.rank)) {
        fprintf(stderr, "rl-worker: --rank-from-hostname: the host name does not end in -N\n");
        return RL_WORKER_EXIT_USAGE;
    }
    if (token_stdin) { /* the driver's ssh launch writes the token on stdin */
        if (!fgets(token, sizeof token, stdin)) {
            fprintf(stderr, "rl-worker: --token-stdin: no token on stdin\n");
            return RL_WORKER_EXIT_USAGE;
        }
        token[strcspn(token, "\r\n")] = '\0';
        opt.token = token;
    }
    opt.driver_key = driver_key;
    if (!!opt.cert != !!opt.driver_key &&
        !(opt.cert && strncmp(opt.driver, "ipc:///", 7) == 0)) {
        fprintf(stderr, "rl-worker: --cert and --driver-key go together (CurveZMQ; a worker "
                        "behind a node relay, --driver ipc:///PATH, takes --cert alone)\n");
        return RL_WORKER_EXIT_USAGE;
    }
    opt.sd_notify = getenv("NOTIFY_SOCKET") != NULL;
    opt.role = role->name;
    opt.test_methods = rl_test_methods; /* served only if the driver asks (selftest) */
    opt.test_retry_safe = rl_test_retry_safe;
    opt.test_inline = rl_test_inline;
    opt.retry_safe = rl_worker_role_retry_safe(role->name);
    rl_log_set_identity(role->name, opt.rank);
    if (ncpus && cpus && *cpus)
        rl_log_info("on cpus %s: %d compute threads", cpus, rl_nn_get_threads());
    else if (ncpus)
        rl_log_info("%d cores shared by %ld ranks of its role: %d compute threads", ncpus, share,
                    rl_nn_get_threads());
    return rl_worker_run(&opt, role);
}
