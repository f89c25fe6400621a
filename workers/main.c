/* rl-worker — one binary for every role; --role picks the method table. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rlrt/rlrt.h"
#include "rlrt/runtime/worker.h"
#include "roles.h"

static void s_usage(FILE *f)
{
    fprintf(f,
            "usage: rl-worker --role ROLE --driver tcp://HOST:PORT [--rank N] [--node NAME]\n"
            "                 [--log-level debug|info|warn|error] [--heartbeat-ms MS]\n"
            "                 [--give-up-s S]\n"
            "\n"
            "Serves the methods of ROLE (rollout, actor, env, reward) for an rl-driver.\n"
            "Started by the driver (local/ssh launch) or by systemd/Kubernetes (external).\n"
            "Exits 0 on SHUTDOWN or SIGTERM, 2 when the driver stays unreachable.\n");
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
    while ((c = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
        switch (c) {
        case 'r': role_name = optarg; break;
        case 'd': opt.driver = optarg; break;
        case 'k': opt.rank = atoi(optarg); break;
        case 'n': opt.node = optarg; break;
        case 'l': {
            rl_log_level lvl;
            if (rl_log_parse_level(optarg, &lvl)) {
                fprintf(stderr, "rl-worker: %s\n", rl_error_message());
                return 1;
            }
            rl_log_set_level(lvl);
            break;
        }
        case 'h': opt.heartbeat_ms = atoi(optarg); break;
        case 'g': opt.give_up_ms = (int)(atof(optarg) * 1000); break;
        case 'H': s_usage(stdout); return 0;
        case 'V': printf("rl-worker %s\n", RL_VERSION_STRING); return 0;
        default: s_usage(stderr); return 1;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "rl-worker: unexpected argument '%s'\n", argv[optind]);
        return 1;
    }
    if (!role_name || !opt.driver) {
        fprintf(stderr, "rl-worker: --role and --driver are required\n");
        s_usage(stderr);
        return 1;
    }
    const rl_worker_role *roles[] = {&rl_role_rollout, &rl_role_actor, &rl_role_reward};
    const rl_worker_role *role = NULL;
    for (size_t i = 0; i < sizeof roles / sizeof roles[0]; i++)
        if (strcmp(roles[i]->name, role_name) == 0)
            role = roles[i];
    if (!role) {
        fprintf(stderr, "rl-worker: unknown role '%s' (allowed: rollout, actor, env, reward)\n",
                role_name);
        return 1;
    }
    if (opt.rank < 0) {
        fprintf(stderr, "rl-worker: --rank must be >= 0\n");
        return 1;
    }
    opt.role = role->name;
    rl_log_set_identity(role->name, opt.rank);
    return rl_worker_run(&opt, role);
}
