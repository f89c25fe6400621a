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
#include "driver/recipes/inputs.h"
#include "driver/recipes/phases.h"
#include "common/schema/trainer.h"
#include "rlrt/error.h"
#include "rlrt/log.h"
#include "common/nn/engine/ops.h"
#include "rlrt/config.h"
#include "common/runtime/net.h"
#include "rlrt/runtime/cluster.h"
#include "rlrt/runtime/driver.h"
#include "common/core/util.h"

static void s_usage(FILE *f)
{
    fprintf(f,
            "usage: rl-driver --cluster cluster.yaml --config job.yaml [key=value ...]\n"
            "                 [--log-level debug|info|warn|error] [--worker PATH]\n"
            "                 [--bind tcp://ADDR:PORT] [--resume]\n"
            "       rl-driver --check [--cluster cluster.yaml] --config job.yaml [key=value ...]\n"
            "                                      check the job (and cluster.yaml): keys, ranges,\n"
            "                                      the recipe's own checks; start nothing\n"
            "       rl-driver keygen DIR NAME...   write DIR/NAME.cert and DIR/NAME.cert_secret\n"
            "       rl-driver config-doc           print docs/CONFIG.md (every recipe's keys)\n"
            "       rl-driver config-keys [RECIPE] the keys a recipe's jobs know, one a line\n"
            "\n"
            "Runs the job's recipe (%s) on the workers of cluster.yaml.\n"
            "key=value overrides any known job key (docs/CONFIG.md).\n"
            "--resume continues from the latest checkpoint in %s.\n"
            "Recipes:\n",
            RL_CFG_PATH(&rl_trainer_section, rl_trainer_config, recipe),
            RL_CFG_PATH(&rl_trainer_section, rl_trainer_config, output_dir));
    for (size_t i = 0; rl_recipes[i]; i++)
        fprintf(f, "  %-12s %s\n", rl_recipes[i]->name, rl_recipes[i]->summary);
}

/* "selftest, sft, ..." */
static void s_recipe_names(char *buf, size_t cap)
{
    buf[0] = '\0';
    for (size_t i = 0, k = 0; rl_recipes[i] && k < cap; i++)
        k += (size_t)snprintf(buf + k, cap - k, "%s%s", i ? ", " : "", rl_recipes[i]->name);
}

/* The recipe named by an override trainer.recipe=... or the job file. A job
 * names its recipe: a job file without keys (empty, only comments, {} or
 * ---) is refused, even with the override (it is not the file meant), and
 * so is a job without trainer.recipe in the file or an override. */
static int s_pick_recipe(const char *job_path, int n, char **overrides, const rl_recipe **out)
{
    const char *key = RL_CFG_PATH(&rl_trainer_section, rl_trainer_config, recipe);
    size_t klen = strlen(key);
    char name[128] = "", known[512];
    s_recipe_names(known, sizeof known);
    int from_override = 0;
    for (int i = 0; i < n; i++) {
        if (strncmp(overrides[i], key, klen) == 0 && overrides[i][klen] == '=') {
            snprintf(name, sizeof name, "%s", overrides[i] + klen + 1);
            from_override = 1;
        }
    }
    if (job_path) {
        rl_config *job = rl_config_parse_file(job_path);
        if (!job)
            return rl_error_code();
        const rl_config_node *root = rl_config_root(job);
        if (rl_config_node_kind(root) == RL_CONFIG_MAP && rl_config_node_len(root) == 0) {
            rl_config_free(job);
            return rl_error_set(RL_ECONFIG, "%s: the job file has no keys; a job names at least its "
                                "recipe (%s: one of %s)", job_path, key, known);
        }
        const char *v = NULL;
        if (!from_override && rl_config_has(job, key) && rl_config_get_string(job, key, &v)) {
            rl_config_free(job);
            return rl_error_code();
        }
        if (v)
            snprintf(name, sizeof name, "%s", v);
        rl_config_free(job);
        if (!from_override && !v)
            return rl_error_set(RL_ECONFIG, "%s: %s missing: a job names its recipe (recipes: %s)",
                                job_path, key, known);
    } else if (!from_override) {
        return rl_error_set(RL_ECONFIG, "no job: give --config job.yaml (naming %s) or the override "
                            "%s=NAME (recipes: %s)", key, key, known);
    }
    *out = rl_recipe_find(name);
    if (*out)
        return RL_OK;
    return rl_error_set(RL_ECONFIG, "%s: %s: unknown recipe '%s' (known: %s)",
                        from_override ? "override" : job_path, key, name, known);
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

/* The leaves of a known-keys tree, one dotted path a line. */
static void s_print_keys(const rl_config_node *n)
{
    if (rl_config_node_kind(n) != RL_CONFIG_MAP || rl_config_node_len(n) == 0) {
        printf("%s\n", rl_config_node_path(n));
        return;
    }
    for (size_t i = 0; i < rl_config_node_len(n); i++)
        s_print_keys(rl_config_node_item(n, i));
}

/* rl-driver config-keys [RECIPE]: every key the recipe's jobs know (all
 * recipes' when none is named), one a line; keys of several recipes once. */
static int s_config_keys(const char *name)
{
    for (size_t i = 0; rl_recipes[i]; i++) {
        if (name && strcmp(name, rl_recipes[i]->name) != 0)
            continue;
        rl_config *known = rl_recipe_known_keys(rl_recipes[i]);
        if (!known) {
            fprintf(stderr, "rl-driver config-keys: %s\n", rl_error_message());
            return 1;
        }
        s_print_keys(rl_config_root(known));
        rl_config_free(known);
        if (name)
            return 0;
    }
    if (name) {
        fprintf(stderr, "rl-driver config-keys: unknown recipe '%s'\n", name);
        return 1;
    }
    return 0;
}

int main(int argc, char **argv)
{
    /* the roles take turns on the same cores: idle OpenMP pools must sleep,
     * not spin (common/nn/engine/ops.h); returns only when the user chose a policy
     * or the re-exec failed */
    (void)rl_nn_use_passive_wait(argv);
    rl_malloc_policy(); /* docs/decisions/worker-allocator.md */
    if (argc >= 2 && strcmp(argv[1], "keygen") == 0)
        return s_keygen(argc, argv);
    if ((argc == 2 || argc == 3) && strcmp(argv[1], "config-keys") == 0)
        return s_config_keys(argc == 3 ? argv[2] : NULL);
    if (argc == 2 && strcmp(argv[1], "config-doc") == 0) {
        char *doc = rl_recipes_config_doc();
        if (!doc) {
            fprintf(stderr, "rl-driver config-doc: %s\n", rl_error_message());
            return 1;
        }
        fputs(doc, stdout);
        free(doc);
        return 0;
    }
    static const struct option longopts[] = {
        {"cluster", required_argument, 0, 'c'}, {"config", required_argument, 0, 'j'},
        {"log-level", required_argument, 0, 'l'}, {"worker", required_argument, 0, 'w'},
        {"bind", required_argument, 0, 'b'},    {"resume", no_argument, 0, 'r'},
        {"help", no_argument, 0, 'h'},          {"check", no_argument, 0, 'k'},
        {"version", no_argument, 0, 'V'},       {0, 0, 0, 0},
    };
    const char *cluster_path = NULL, *job_path = NULL, *bind = NULL, *level = "info";
    char worker[PATH_MAX];
    s_default_worker(worker, sizeof worker);
    int c, resume = 0, check = 0;
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
        case 'k': check = 1; break;
        case 'h': s_usage(stdout); return 0;
        case 'V': printf("rl-driver %s\n", RL_VERSION_STRING); return 0;
        default: s_usage(stderr); return 1;
        }
    }
    if (!cluster_path && !check) {
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
    char resume_kv[128];
    if (resume) {
        snprintf(resume_kv, sizeof resume_kv, "%s=true",
                 RL_CFG_PATH(&rl_trainer_ckpt_section, rl_trainer_ckpt_config, resume));
        overrides[n_over++] = resume_kv;
    }
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
    rl_config *known = rl_recipe_known_keys(recipe);
    if (!known) {
        fprintf(stderr, "rl-driver: %s\n", rl_error_message());
        return 1;
    }
    rl_config *job = rl_config_load_job_tree(known, job_path, n_over, (const char *const *)overrides);
    rl_config_free(known);
    if (!job) {
        fprintf(stderr, "rl-driver: %s\n", rl_error_message());
        return 1;
    }
    int bad = 0;
    for (size_t i = 0; !bad && recipe->sections && recipe->sections[i]; i++)
        bad = !rl_config_section_get(job, recipe->sections[i]);
    if (bad || (recipe->prepare && recipe->prepare(job))) {
        fprintf(stderr, "rl-driver: %s\n", rl_error_message());
        rl_config_free(job);
        return 1;
    }
    rl_cluster *cl = cluster_path ? rl_cluster_load(cluster_path) : NULL;
    if (cluster_path && !cl) {
        fprintf(stderr, "rl-driver: %s\n", rl_error_message());
        rl_config_free(job);
        return 1;
    }
    /* the files the job names, where the driver can see them (driver/recipes/inputs.h) */
    char unchecked[512];
    if (rl_job_check_inputs(job, recipe->roles, cl, unchecked, sizeof unchecked)) {
        fprintf(stderr, "rl-driver: %s\n", rl_error_message());
        rl_cluster_free(cl);
        rl_config_free(job);
        return 1;
    }
    if (check) {
        printf("rl-driver: job %s (recipe %s)%s%s checked: every key known, every value in range, "
               "the input paths there%s%s%s\n", job_path ? job_path : "(defaults)", recipe->name,
               cl ? " and " : "", cl ? cluster_path : "",
               unchecked[0] ? " (left to the workers, which read them on their nodes: " : "",
               unchecked, unchecked[0] ? ")" : "");
        rl_cluster_free(cl);
        rl_config_free(job);
        return 0;
    }
    if (unchecked[0])
        rl_log_info("input paths left to the workers (read on their nodes): %s", unchecked);
    char *table = rl_cluster_table(cl);
    rl_log_info("recipe %s, cluster %s:\n%s", recipe->name, cluster_path, table ? table : "");
    free(table);

    /* the recipe says which cluster roles it calls and whether the workers
     * serve the selftest's test methods */
    /* the run's job id lives in its output directory: a --resume runs under
     * it again, so external workers that outlived the old driver rejoin */
    const char *out_dir = NULL;
    char id_path[PATH_MAX] = "", job_id[17] = "";
    if (!rl_config_get_string_or(job, RL_CFG_PATH(&rl_trainer_section, rl_trainer_config,
                                                  output_dir), NULL, &out_dir) &&
        out_dir && out_dir[0])
        snprintf(id_path, sizeof id_path, "%s/job_id", out_dir);
    if (resume && id_path[0]) {
        FILE *f = fopen(id_path, "r");
        if (f) {
            if (fscanf(f, "%16s", job_id) != 1)
                job_id[0] = 0;
            fclose(f);
            if (job_id[0])
                rl_log_info("resuming job %s (%s): its external workers may rejoin", job_id,
                            id_path);
        }
    }
    rl_driver_options opt = {.cluster = cl, .job = job, .worker_binary = worker,
                             .bind_override = bind, .worker_log_level = level,
                             .roles = recipe->roles, .test_methods = recipe->test_methods,
                             .job_id = job_id[0] ? job_id : NULL};
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
        FILE *f = id_path[0] && !rl_mkdir_p(out_dir) ? fopen(id_path, "w") : NULL;
        if (f) {
            fprintf(f, "%s\n", rl_driver_job_id(d));
            fclose(f);
        } else if (id_path[0]) {
            rl_log_warn("cannot write %s: a --resume will run under a new job id", id_path);
        }
        int rc = recipe->loop ? rl_recipe_run(d, job, recipe->loop) : recipe->run(d, job);
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
