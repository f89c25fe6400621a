/* rl-worker — one binary for every role; --role picks the method table from
 * the registry (workers/registry.h). */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "registry.h"
#include "rlrt/rlrt.h"
#include "rlrt/runtime/worker.h"
#include "selftest/test_methods.h"

static void s_usage(FILE *f)
{
    char roles[512];
    fprintf(f,
            "usage: rl-worker --role ROLE --driver tcp://HOST:PORT [--rank N] [--node NAME]\n"
            "                 [--log-level debug|info|warn|error] [--heartbeat-ms MS]\n"
            "                 [--give-up-s S]\n"
            "\n"
            "Serves the methods of ROLE (%s) for an rl-driver.\n"
            "Started by the driver (local/ssh launch) or by systemd/Kubernetes (external).\n"
            "Exits 0 on SHUTDOWN or SIGTERM, 1 on a start-up error, 2 when the driver stays\n"
            "unreachable, 64 on a usage error.\n",
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

int main(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"role", required_argument, 0, 'r'},      {"driver", required_argument, 0, 'd'},
        {"rank", required_argument, 0, 'k'},      {"node", required_argument, 0, 'n'},
        {"log-level", required_argument, 0, 'l'}, {"heartbeat-ms", required_argument, 0, 'h'},
        {"give-up-s", required_argument, 0, 'g'}, {"help", no_argument, 0, 'H'},
        {"version", no_argument, 0, 'V'},         {0, 0, 0, 0},
    };
    rl_worker_options opt = {0};
    const char *role_name = NULL;
    int c;
    long v;
    while ((c = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
        switch (c) {
        case 'r': role_name = optarg; break;
        case 'd': opt.driver = optarg; break;
        case 'k':
            if (s_parse_long(optarg, 0, INT_MAX, &v))
                return s_bad("rank", optarg, "an integer >= 0");
            opt.rank = (int)v;
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
            if (s_parse_long(optarg, 1, 3600000, &v))
                return s_bad("heartbeat-ms", optarg, "an integer in [1, 3600000]");
            opt.heartbeat_ms = (int)v;
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
        case 'H': s_usage(stdout); return RL_WORKER_EXIT_OK;
        case 'V': printf("rl-worker %s\n", RL_VERSION_STRING); return RL_WORKER_EXIT_OK;
        default: s_usage(stderr); return RL_WORKER_EXIT_USAGE;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "rl-worker: unexpected argument '%s'\n", argv[optind]);
        return RL_WORKER_EXIT_USAGE;
    }
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
    opt.role = role->name;
    opt.test_methods = rl_test_methods; /* served only if the driver asks (selftest) */
    rl_log_set_identity(role->name, opt.rank);
    return rl_worker_run(&opt, role);
}
