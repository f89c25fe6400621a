/* rl-driver — the single controller: loads cluster.yaml and the job, starts
 * or waits for the workers, runs the job's recipe, shuts everything down. */
#include <getopt.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "rlrt/rlrt.h"
#include "driver/recipe.h"
#include "rlrt/error.h"
#include "rlrt/log.h"
#include "common/nn/engine/ops.h"
#include "rlrt/config.h"
#include "common/runtime/net.h"
#include "rlrt/runtime/cluster.h"
#include "rlrt/runtime/driver.h"

static const rl_recipe *s_recipes[] = {&rl_recipe_selftest,      &rl_recipe_sft,
                                       &rl_recipe_rlvr,          &rl_recipe_scorer_train,
                                       &rl_recipe_flow_pretrain, &rl_recipe_diffusion,
                                       &rl_recipe_libero_collect, &rl_recipe_flow_warmstart,
                                       &rl_recipe_libero_rl};

static void s_usage(FILE *f)
{
    fprintf(f,
            "usage: rl-driver --cluster cluster.yaml --config job.yaml [key=value ...]\n"
            "                 [--log-level debug|info|warn|error] [--worker PATH]\n"
            "                 [--bind tcp://ADDR:PORT] [--resume]\n"
            "       rl-driver keygen DIR NAME...   write DIR/NAME.cert and DIR/NAME.cert_secret\n"
            "\n"
            "Runs the job's recipe (trainer.recipe) on the workers of cluster.yaml.\n"
            "key=value overrides any known job key, e.g. selftest.rounds=3.\n"
            "--resume continues from the latest checkpoint in trainer.output_dir.\n"
            "Recipes:\n");
    for (size_t i = 0; i < sizeof s_recipes / sizeof s_recipes[0]; i++)
        fprintf(f, "  %-12s %s\n", s_recipes[i]->name, s_recipes[i]->summary);
}

static const rl_recipe *s_find_recipe(const char *name)
{
    for (size_t i = 0; i < sizeof s_recipes / sizeof s_recipes[0]; i++)
        if (strcmp(s_recipes[i]->name, name) == 0)
            return s_recipes[i];
    return NULL;
}

/* The recipe named by an override trainer.recipe=... or the job file. */
static int s_pick_recipe(const char *job_path, int n, char **overrides, const rl_recipe **out)
{
    char name[128] = "selftest";
    int from_override = 0;
    for (int i = 0; i < n; i++) {
        if (strncmp(overrides[i], "trainer.recipe=", 15) == 0) {
            snprintf(name, sizeof name, "%s", overrides[i] + 15);
            from_override = 1;
        }
    }
    if (!from_override && job_path) {
        rl_config *job = rl_config_parse_file(job_path);
        const char *v = NULL;
        if (!job || rl_config_get_string_or(job, "trainer.recipe", "selftest", &v)) {
            rl_config_free(job);
            return rl_error_code();
        }
        snprintf(name, sizeof name, "%s", v);
        rl_config_free(job);
    }
    *out = s_find_recipe(name);
    if (*out)
        return RL_OK;
    char known[256] = "";
    for (size_t i = 0, k = 0; i < sizeof s_recipes / sizeof s_recipes[0]; i++)
        k += (size_t)snprintf(known + k, sizeof known - k, "%s%s", i ? ", " : "", s_recipes[i]->name);
    return rl_error_set(RL_ECONFIG, "%s: trainer.recipe: unknown recipe '%s' (known: %s)",
                        from_override ? "override" : job_path, name, known);
}

static void s_default_worker(char *buf, size_t len)
{
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n <= 0) {
        snprintf(buf, len, "rl-worker");
        return;
    }
    exe[n] = '\0';
    snprintf(buf, len, "%s/rl-worker", dirname(exe));
}

/* rl-driver keygen DIR NAME...: CurveZMQ certificates for cluster.yaml's
 * security: section (the driver's, and one per worker or per role). */
static int s_keygen(int argc, char **argv)
{
    if (argc < 4) {
        fprintf(stderr, "usage: rl-driver keygen DIR NAME...\n"
                        "writes DIR/NAME.cert (public: copy it to authorized_keys/ or give it to\n"
                        "workers as --driver-key) and DIR/NAME.cert_secret (mode 0600)\n");
        return 1;
    }
    for (int i = 3; i < argc; i++) {
        rl_net_keypair kp;
        if (rl_net_keygen(argv[2], argv[i], &kp)) {
            fprintf(stderr, "rl-driver keygen: %s\n", rl_error_message());
            return 1;
        }
        printf("%s/%s.cert  public key %s\n", argv[2], argv[i], kp.public_txt);
    }
    return 0;
}

int main(int argc, char **argv)
{
    /* the roles take turns on the same cores: idle OpenMP pools must sleep,
     * not spin (common/nn/engine/ops.h); returns only when the user chose a policy
     * or the re-exec failed */
    (void)rl_nn_use_passive_wait(argv);
    if (argc >= 2 && strcmp(argv[1], "keygen") == 0)
        return s_keygen(argc, argv);
    static const struct option longopts[] = {
        {"cluster", required_argument, 0, 'c'}, {"config", required_argument, 0, 'j'},
        {"log-level", required_argument, 0, 'l'}, {"worker", required_argument, 0, 'w'},
        {"bind", required_argument, 0, 'b'},    {"resume", no_argument, 0, 'r'},
        {"help", no_argument, 0, 'h'},
        {"version", no_argument, 0, 'V'},       {0, 0, 0, 0},
    };
    const char *cluster_path = NULL, *job_path = NULL, *bind = NULL, *level = "info";
    char worker[PATH_MAX];
    s_default_worker(worker, sizeof worker);
    int c, resume = 0;
    rl_log_set_identity("driver", -1);
    while ((c = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
        switch (c) {
        case 'c': cluster_path = optarg; break;
        case 'j': job_path = optarg; break;
        case 'l': {
            rl_log_level lvl;
            if (rl_log_parse_level(optarg, &lvl)) {
                fprintf(stderr, "rl-driver: %s\n", rl_error_message());
                return 1;
            }
            rl_log_set_level(lvl);
            level = optarg;
            break;
        }
        case 'w': snprintf(worker, sizeof worker, "%s", optarg); break;
        case 'b': bind = optarg; break;
        case 'r': resume = 1; break;
        case 'h': s_usage(stdout); return 0;
        case 'V': printf("rl-driver %s\n", RL_VERSION_STRING); return 0;
        default: s_usage(stderr); return 1;
        }
    }
    if (!cluster_path) {
        fprintf(stderr, "rl-driver: --cluster is required\n");
        s_usage(stderr);
        return 1;
    }
    /* --resume is the override trainer.resume=true (recipes that checkpoint) */
    static char *overrides[256];
    int n_over = argc - optind;
    if (n_over > 250) {
        fprintf(stderr, "rl-driver: more than 250 overrides\n");
        return 1;
    }
    for (int i = 0; i < n_over; i++)
        overrides[i] = argv[optind + i];
    if (resume)
        overrides[n_over++] = "trainer.resume=true";
    for (int i = 0; i < n_over; i++) {
        if (!strchr(overrides[i], '=')) {
            fprintf(stderr, "rl-driver: argument '%s' is not a key=value override\n", overrides[i]);
            return 1;
        }
    }
    const rl_recipe *recipe;
    if (s_pick_recipe(job_path, n_over, overrides, &recipe)) {
        fprintf(stderr, "rl-driver: %s\n", rl_error_message());
        return 1;
    }
    /* the recipe's defaults fragments laid over the common ones, in order */
    rl_config *merged = rl_config_parse_string(RL_COMMON_DEFAULTS, strlen(RL_COMMON_DEFAULTS),
                                               "<common defaults>");
    for (const char *const *frag = recipe->defaults; merged && frag && *frag; frag++) {
        rl_config *own = rl_config_parse_string(*frag, strlen(*frag), "<recipe defaults>");
        rl_config *next = own ? rl_config_merge(merged, own) : NULL;
        rl_config_free(own);
        rl_config_free(merged);
        merged = next;
    }
    char *defaults = merged ? rl_config_to_yaml(merged, "") : NULL;
    rl_config_free(merged);
    if (!defaults) {
        fprintf(stderr, "rl-driver: recipe %s defaults: %s\n", recipe->name, rl_error_message());
        return 1;
    }
    rl_config *job = rl_config_load_job(defaults, job_path, n_over, (const char *const *)overrides);
    free(defaults);
    if (!job) {
        fprintf(stderr, "rl-driver: %s\n", rl_error_message());
        return 1;
    }
    if (recipe->prepare && recipe->prepare(job)) {
        fprintf(stderr, "rl-driver: %s\n", rl_error_message());
        rl_config_free(job);
        return 1;
    }
    rl_cluster *cl = rl_cluster_load(cluster_path);
    if (!cl) {
        fprintf(stderr, "rl-driver: %s\n", rl_error_message());
        rl_config_free(job);
        return 1;
    }
    char *table = rl_cluster_table(cl);
    rl_log_info("recipe %s, cluster %s:\n%s", recipe->name, cluster_path, table ? table : "");
    free(table);

    /* the recipe says which cluster roles it calls and whether the workers
     * serve the selftest's test methods */
    rl_driver_options opt = {.cluster = cl, .job = job, .worker_binary = worker,
                             .bind_override = bind, .worker_log_level = level,
                             .roles = recipe->roles, .test_methods = recipe->test_methods};
    rl_driver *d = rl_driver_new(&opt);
    if (!d) {
        rl_log_error("%s", rl_error_message());
        rl_cluster_free(cl);
        rl_config_free(job);
        return 1;
    }
    int status = 0;
    if (rl_driver_start(d)) {
        rl_log_error("start-up failed: %s", rl_error_message());
        status = 1;
    } else {
        rl_log_info("all workers ready (job %s); running %s", rl_driver_job_id(d), recipe->name);
        int rc = recipe->run(d, job);
        if (rl_driver_interrupted(d)) {
            rl_log_info("interrupted: shutting down cleanly");
        } else if (rc) {
            rl_log_error("recipe %s failed: %s", recipe->name, rl_error_message());
            status = 1;
        }
    }
    if (rl_driver_fatal(d))
        status = 1;
    if (rl_driver_shutdown(d, 10000)) {
        rl_log_warn("%s", rl_error_message());
        if (!rl_driver_interrupted(d))
            status = status ? status : 1;
    }
    rl_driver_free(d);
    rl_cluster_free(cl);
    rl_config_free(job);
    rl_log_info("exit %d", status);
    return status;
}
