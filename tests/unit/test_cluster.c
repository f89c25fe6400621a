/* test_cluster.c — cluster.yaml: the example files, the placement table and
 * every validation error with its exact message. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "rlrt/error.h"
#include "rlrt/config.h"
#include "rlrt/runtime/cluster.h"
#include "rlrt/runtime/cpus.h"

/* A valid file; the error cases below replace one line of it. Line numbers
 * in the expected messages count lines of this text. */
static const char *const BASE[] = {
    "driver:",                                     /* 1 */
    "  port: 5555",                                /* 2 */
    "  node: head",                                /* 3 */
    "nodes:",                                      /* 4 */
    "  - name: head",                              /* 5 */
    "    address: 10.0.0.1",                       /* 6 */
    "    gpus: 4",                                 /* 7 */
    "    launch: ssh",                             /* 8 */
    "  - name: box",                               /* 9 */
    "    address: 10.0.0.2",                       /* 10 */
    "    launch: external",                        /* 11 */
    "roles:",                                      /* 12 */
    "  actor:",                                    /* 13 */
    "    count: 2",                                /* 14 */
    "    placement:",                              /* 15 */
    "      - {rank: 0, node: head, gpus: [0, 1]}", /* 16 */
    "      - {rank: 1, node: head, gpus: [2, 3], cpus: \"8-11,3\"}", /* 17 */
    "  reward: {count: 3, node: box}",             /* 18 */
    "heartbeat: {interval_s: 0.5}",                /* 19 */
    NULL,
};

/* BASE with line `line` (1-based) replaced by `with` (NULL: deleted). */
static rl_cluster *s_load_variant(int line, const char *with)
{
    char text[4096];
    size_t len = 0;
    for (int i = 0; BASE[i]; i++) {
        const char *l = (i + 1 == line) ? with : BASE[i];
        if (!l)
            l = "";
        len += (size_t)snprintf(text + len, sizeof text - len, "%s\n", l);
    }
    rl_config *c = rl_config_parse_string(text, len, "cluster.yaml");
    if (!c)
        return NULL;
    rl_cluster *cl = rl_cluster_from_config(c);
    rl_config_free(c);
    return cl;
}

static void s_expect_error(int line, const char *with, const char *msg)
{
    rl_cluster *cl = s_load_variant(line, with);
    if (cl) {
        rl_cluster_free(cl);
        fail_msg("line %d = '%s' was accepted; expected: %s", line, with ? with : "", msg);
    }
    assert_int_equal(rl_error_code(), RL_ECONFIG);
    assert_string_equal(rl_error_message(), msg);
}

static void test_base_file(void **state)
{
    (void)state;
    rl_cluster *cl = s_load_variant(0, NULL);
    if (!cl)
        fail_msg("%s", rl_error_message());
    assert_int_equal(cl->n_nodes, 2);
    assert_int_equal(cl->nodes[0].launch, RL_LAUNCH_SSH);
    assert_string_equal(cl->nodes[0].ssh_command, "ssh");
    assert_int_equal(cl->nodes[1].gpus, 0);
    assert_int_equal(cl->n_placements, 5);
    assert_int_equal(cl->n_roles, 2); /* file order */
    assert_string_equal(cl->roles[0].name, "actor");
    assert_int_equal(cl->roles[0].count, 2);
    assert_int_equal(cl->roles[0].line, 13);
    assert_string_equal(cl->roles[1].name, "reward");
    assert_int_equal(cl->roles[1].count, 3);
    assert_int_equal(cl->roles[1].line, 18);
    assert_int_equal(rl_cluster_role_index(cl, "reward"), 1);
    assert_int_equal(rl_cluster_role_index(cl, "rollout"), -1);
    assert_int_equal(cl->placements[2].role, 1);
    assert_string_equal(cl->driver_endpoint, "tcp://10.0.0.1:5555");
    assert_string_equal(cl->driver_bind_endpoint, "tcp://*:5555");
    assert_true(cl->heartbeat_interval_s == 0.5);
    assert_int_equal(cl->heartbeat_liveness, 3);
    assert_int_equal(cl->restart_max, 3);
    assert_true(cl->external_wait_timeout_s == 300.0);
    const rl_placement *p = rl_cluster_find(cl, "actor", 1);
    assert_non_null(p);
    assert_int_equal(p->role, 0);
    assert_int_equal(p->node, 0);
    assert_int_equal(p->ngpus, 2);
    assert_int_equal(p->gpus[0], 2);
    assert_int_equal(p->gpus[1], 3);
    assert_string_equal(p->cpus, "3,8-11"); /* canonical form */
    assert_string_equal(rl_cluster_find(cl, "actor", 0)->cpus, "");
    p = rl_cluster_find(cl, "reward", 2);
    assert_non_null(p);
    assert_int_equal(p->node, 1);
    assert_int_equal(p->ngpus, 0);
    assert_null(rl_cluster_find(cl, "reward", 3));
    assert_null(rl_cluster_find(cl, "rollout", 0));
    /* cores shared: actor 0 is alone unpinned on head, actor 1 has cpus, the
     * reward ranks start outside the driver */
    assert_int_equal(rl_cluster_core_share(cl, rl_cluster_find(cl, "actor", 0)), 1);
    assert_int_equal(rl_cluster_core_share(cl, rl_cluster_find(cl, "actor", 1)), 0);
    assert_int_equal(rl_cluster_core_share(cl, rl_cluster_find(cl, "reward", 0)), 0);
    char *t = rl_cluster_table(cl);
    assert_string_equal(t,
                        "role     rank  node             address                  launch   gpus         cpus\n"
                        "actor       0  head             10.0.0.1                 ssh      0,1          -\n"
                        "actor       1  head             10.0.0.1                 ssh      2,3          3,8-11\n"
                        "reward      0  box              10.0.0.2                 external -            -\n"
                        "reward      1  box              10.0.0.2                 external -            -\n"
                        "reward      2  box              10.0.0.2                 external -            -\n");
    free(t);
    rl_cluster_free(cl);
}

static void test_errors(void **state)
{
    (void)state;
    /* missing keys */
    s_expect_error(6, NULL, "cluster.yaml:5:5: nodes[0]: missing key 'address'");
    s_expect_error(2, NULL, "cluster.yaml:3:3: driver: missing key 'port'");
    s_expect_error(14, NULL, "cluster.yaml:15:5: roles.actor: missing key 'count'");
    s_expect_error(16, "      - {node: head, gpus: [0, 1]}",
                   "cluster.yaml:16:9: roles.actor.placement[0]: missing key 'rank'");
    /* wrong types */
    s_expect_error(7, "    gpus: many",
                   "cluster.yaml:7:11: nodes[0].gpus: expected an integer, got 'many'");
    s_expect_error(2, "  port: [1]",
                   "cluster.yaml:2:9: driver.port: expected an integer, got a list");
    s_expect_error(19, "heartbeat: {interval_s: soon}",
                   "cluster.yaml:19:25: heartbeat.interval_s: expected a number, got 'soon'");
    s_expect_error(16, "      - {rank: 0, node: head, gpus: 0}",
                   "cluster.yaml:16:37: roles.actor.placement[0].gpus: expected a list of "
                   "GPU indices");
    /* values out of range */
    s_expect_error(2, "  port: 70000", "cluster.yaml:2:9: driver.port: 70000 out of range 1..65535");
    s_expect_error(19, "heartbeat: {interval_s: 0}",
                   "cluster.yaml:19:25: heartbeat.interval_s: must be > 0, got 0");
    s_expect_error(8, "    launch: docker",
                   "cluster.yaml:8:13: nodes[0].launch: expected local, ssh or external, got "
                   "'docker'");
    /* role names: identifiers; unknown keys */
    s_expect_error(18, "  Critic: {count: 1, node: box}",
                   "cluster.yaml:18:3: roles.Critic: invalid role name 'Critic' (expected "
                   "[a-z][a-z0-9_]*, at most 63 characters)");
    s_expect_error(18, "  2nd_actor: {count: 1, node: box}",
                   "cluster.yaml:18:3: roles.2nd_actor: invalid role name '2nd_actor' (expected "
                   "[a-z][a-z0-9_]*, at most 63 characters)");
    s_expect_error(18, "  env-1: {count: 1, node: box}",
                   "cluster.yaml:18:3: roles.env-1: invalid role name 'env-1' (expected "
                   "[a-z][a-z0-9_]*, at most 63 characters)");
    s_expect_error(18, "  actor: {count: 1, node: box}",
                   "cluster.yaml:18:3: roles.actor: duplicate key");
    s_expect_error(10, "    adress: 10.0.0.2",
                   "cluster.yaml:10:5: nodes[1]: unknown key 'adress'; did you mean 'address'?");
    s_expect_error(19, "heartbeet: {interval_s: 0.5}",
                   "cluster.yaml:19:1: unknown key 'heartbeet'; did you mean 'heartbeat'?");
    /* ranks */
    s_expect_error(17, "      - {rank: 0, node: head, gpus: [2, 3]}",
                   "cluster.yaml:17:16: roles.actor.placement[1].rank: duplicate rank 0 (also "
                   "at line 16)");
    s_expect_error(17, "      - {rank: 2, node: head, gpus: [2, 3]}",
                   "cluster.yaml:17:16: roles.actor.placement[1].rank: rank 2 out of range "
                   "0..1");
    s_expect_error(14, "    count: 3",
                   "cluster.yaml:14:12: roles.actor.count: count is 3 but 2 placements are "
                   "given");
    /* nodes and GPUs */
    s_expect_error(17, "      - {rank: 1, node: gpu9, gpus: [2, 3]}",
                   "cluster.yaml:17:25: roles.actor.placement[1].node: unknown node 'gpu9' "
                   "(nodes: head, box)");
    s_expect_error(3, "  node: nowhere",
                   "cluster.yaml:3:9: driver.node: unknown node 'nowhere' (nodes: head, box)");
    s_expect_error(17, "      - {rank: 1, node: head, gpus: [2, 4]}",
                   "cluster.yaml:17:41: roles.actor.placement[1].gpus[1]: GPU index 4 out of "
                   "range: node 'head' has 4 GPUs");
    s_expect_error(17, "      - {rank: 1, node: head, gpus: [3, 3]}",
                   "cluster.yaml:17:41: roles.actor.placement[1].gpus[1]: GPU 3 listed twice");
    s_expect_error(9, "  - name: head",
                   "cluster.yaml:9:11: nodes[1].name: duplicate node 'head' (first defined at "
                   "line 5)");
    s_expect_error(18, "  reward: {count: 3, node: box, placement: []}",
                   "cluster.yaml:18:11: roles.reward: give either 'placement' or 'node', not "
                   "both");
    s_expect_error(11, "    ssh: {user: x}",
                   "cluster.yaml:11:10: nodes[1].ssh: ssh settings on a node whose launch is "
                   "'local'");
    /* cpus */
    s_expect_error(17, "      - {rank: 1, node: head, cpus: 3-1}",
                   "cluster.yaml:17:37: roles.actor.placement[1].cpus: cpus '3-1': range 3-1 "
                   "runs backwards");
    s_expect_error(17, "      - {rank: 1, node: head, cpus: \"0, 1\"}",
                   "cluster.yaml:17:37: roles.actor.placement[1].cpus: cpus '0, 1': expected an "
                   "index or a range LOW-HIGH at ' 1'");
    s_expect_error(18, "  reward: {count: 3, node: box, cpus: \"0-3,2\"}",
                   "cluster.yaml:18:39: roles.reward.cpus: cpus '0-3,2': cpu 2 listed twice");
    s_expect_error(18, "  reward: {count: 3, node: box, cpus: 4096}",
                   "cluster.yaml:18:39: roles.reward.cpus: cpus '4096': index at '4096' is not "
                   "below 1024");
    s_expect_error(18, "  reward: {count: 3, node: box, cpus: [1, 2]}",
                   "cluster.yaml:18:39: roles.reward.cpus: expected a string, got a list");
    /* YAML syntax errors come through with their line */
    rl_cluster *cl = s_load_variant(16, "      - {rank: 0, node: head, gpus: [0, 1]");
    assert_null(cl);
    assert_string_equal(rl_error_message(),
                        "cluster.yaml:17:7: did not find expected ',' or '}' while parsing a "
                        "flow mapping (started at line 16)");
}

static void test_example_files(void **state)
{
    (void)state;
    rl_cluster *cl = rl_cluster_load("examples/cluster-local.yaml");
    if (!cl)
        fail_msg("%s", rl_error_message());
    assert_int_equal(cl->n_nodes, 1);
    /* rollout x1, actor x2, reward x2 (make run) */
    assert_int_equal(cl->n_roles, 3);
    assert_string_equal(cl->roles[0].name, "rollout");
    assert_int_equal(cl->roles[0].count, 1);
    assert_string_equal(cl->roles[1].name, "actor");
    assert_int_equal(cl->roles[1].count, 2);
    assert_string_equal(cl->roles[2].name, "reward");
    assert_int_equal(cl->roles[2].count, 2);
    assert_int_equal(cl->n_placements, 5);
    for (int i = 0; i < cl->n_placements; i++)
        assert_int_equal(cl->nodes[cl->placements[i].node].launch, RL_LAUNCH_LOCAL);
    assert_string_equal(cl->driver_endpoint, "tcp://127.0.0.1:5555");
    assert_true(cl->heartbeat_interval_s == 1.0);
    assert_int_equal(cl->heartbeat_liveness, 3);
    rl_cluster_free(cl);

    cl = rl_cluster_load("examples/cluster-two-node.yaml");
    if (!cl)
        fail_msg("%s", rl_error_message());
    assert_int_equal(cl->n_nodes, 2);
    assert_int_equal(cl->nodes[0].launch, RL_LAUNCH_SSH);
    assert_string_equal(cl->nodes[0].ssh_user, "rl");
    assert_string_equal(cl->nodes[0].ssh_command, "ssh -o BatchMode=yes -o ConnectTimeout=10");
    assert_int_equal(cl->nodes[1].launch, RL_LAUNCH_EXTERNAL);
    assert_int_equal(cl->roles[rl_cluster_role_index(cl, "actor")].count, 4);
    const rl_placement *p = rl_cluster_find(cl, "actor", 3);
    assert_non_null(p);
    assert_int_equal(p->ngpus, 2);
    assert_int_equal(p->gpus[0], 6);
    assert_string_equal(cl->driver_endpoint, "tcp://10.0.0.1:5555");
    assert_string_equal(cl->driver_bind_endpoint, "tcp://0.0.0.0:5555");
    assert_true(cl->external_wait_timeout_s == 600.0);
    assert_int_equal(cl->restart_max, 5);
    rl_cluster_free(cl);

    assert_null(rl_cluster_load("examples/no-such-cluster.yaml"));
    assert_int_equal(rl_error_code(), RL_EIO);
}

/* Roles are data: any identifier is a role, in file order; the table's
 * role column widens for long names; a role may have no ranks. */
/* CPU lists: the forms Linux writes, canonical text, and binding. */
static void test_cpus(void **state)
{
    (void)state;
    cpu_set_t set;
    int n = 0;
    char text[64];
    assert_int_equal(rl_cpus_parse("0-3,8,10-11", &set, &n), RL_OK);
    assert_int_equal(n, 7);
    assert_true(CPU_ISSET(8, &set) && !CPU_ISSET(9, &set));
    assert_int_equal(rl_cpus_format(&set, text, sizeof text), 11);
    assert_string_equal(text, "0-3,8,10-11");
    assert_int_equal(rl_cpus_parse("5,4,1023", &set, &n), RL_OK);
    rl_cpus_format(&set, text, sizeof text);
    assert_string_equal(text, "4-5,1023");
    assert_int_equal(rl_cpus_format(&set, text, 4), 8); /* needs 8, truncated */
    assert_string_equal(text, "4-5");
    static const char *const bad[][2] = {
        {"", "cpus: empty list (expected e.g. \"0-3,8\")"},
        {"1,", "cpus '1,': expected an index or a range LOW-HIGH at ''"},
        {"1-", "cpus '1-': expected an index or a range LOW-HIGH at ''"},
        {"-1", "cpus '-1': expected an index or a range LOW-HIGH at '-1'"},
        {"1;2", "cpus '1;2': unexpected ';' (expected ',' or the end)"},
        {"0-1024", "cpus '0-1024': index at '0-1024' is not below 1024"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        assert_int_equal(rl_cpus_parse(bad[i][0], &set, &n), RL_EINVAL);
        assert_string_equal(rl_error_message(), bad[i][1]);
    }
    /* binding: to the cores this process has (a no-op), and to one it lacks */
    cpu_set_t have;
    assert_int_equal(sched_getaffinity(0, sizeof have, &have), 0);
    char mine[RL_CPUS_TEXT_MAX];
    rl_cpus_format(&have, mine, sizeof mine);
    assert_int_equal(rl_cpus_bind(mine, &n), RL_OK);
    assert_int_equal(n, CPU_COUNT(&have));
    assert_int_equal(rl_cpus_bind("1023", &n), RL_EINVAL);
    char want[400];
    snprintf(want, sizeof want, "cpus '1023': this process may not run on cpu 1023 (it may use %s)",
             mine);
    assert_string_equal(rl_error_message(), want);
}

static void test_role_names(void **state)
{
    (void)state;
    const char *yaml = "driver: {port: 5555}\n"
                       "nodes: [{name: n, address: 10.0.0.9}]\n"
                       "roles:\n"
                       "  critic: {count: 1, node: n}\n"
                       "  env_simulator_2: {count: 2, node: n}\n"
                       "  idle: {count: 0, node: n}\n";
    rl_config *c = rl_config_parse_string(yaml, strlen(yaml), "c.yaml");
    assert_non_null(c);
    rl_cluster *cl = rl_cluster_from_config(c);
    rl_config_free(c);
    if (!cl)
        fail_msg("%s", rl_error_message());
    assert_int_equal(cl->n_roles, 3);
    assert_int_equal(rl_cluster_role_index(cl, "critic"), 0);
    assert_int_equal(rl_cluster_role_index(cl, "env_simulator_2"), 1);
    assert_int_equal(rl_cluster_role_index(cl, "idle"), 2);
    assert_int_equal(cl->roles[2].count, 0);
    assert_int_equal(cl->n_placements, 3);
    assert_int_equal(rl_cluster_find(cl, "env_simulator_2", 1)->role, 1);
    assert_null(rl_cluster_find(cl, "idle", 0));
    assert_null(rl_cluster_find(cl, NULL, 0));
    assert_int_equal(rl_cluster_core_share(cl, rl_cluster_find(cl, "critic", 0)), 1);
    assert_int_equal(rl_cluster_core_share(cl, rl_cluster_find(cl, "env_simulator_2", 1)), 2);
    char *t = rl_cluster_table(cl);
    assert_string_equal(t,
                        "role            rank  node             address                  launch   gpus         cpus\n"
                        "critic             0  n                10.0.0.9                 local    -            -\n"
                        "env_simulator_2    0  n                10.0.0.9                 local    -            - (1/2 of the cores)\n"
                        "env_simulator_2    1  n                10.0.0.9                 local    -            - (1/2 of the cores)\n");
    free(t);
    rl_cluster_free(cl);
    /* the longest name that fits */
    char name[RL_CLUSTER_NAME_MAX + 1];
    memset(name, 'a', sizeof name);
    name[RL_CLUSTER_NAME_MAX - 1] = '\0';
    char text[512];
    snprintf(text, sizeof text, "driver: {port: 1}\nnodes: [{name: n, address: x}]\n"
             "roles: {%s: {count: 1, node: n}}\n", name);
    c = rl_config_parse_string(text, strlen(text), "c.yaml");
    cl = rl_cluster_from_config(c);
    assert_non_null(cl);
    rl_cluster_free(cl);
    rl_config_free(c);
    name[RL_CLUSTER_NAME_MAX - 1] = 'a';
    name[RL_CLUSTER_NAME_MAX] = '\0';
    snprintf(text, sizeof text, "driver: {port: 1}\nnodes: [{name: n, address: x}]\n"
             "roles: {%s: {count: 1, node: n}}\n", name);
    c = rl_config_parse_string(text, strlen(text), "c.yaml");
    assert_null(rl_cluster_from_config(c));
    assert_int_equal(rl_error_code(), RL_ECONFIG);
    rl_config_free(c);
}

/* `relay` and `relay_hold_ms` of a node: read, and refused where they
 * cannot work, with the line. */
static rl_cluster *s_parse(const char *text)
{
    rl_config *c = rl_config_parse_string(text, strlen(text), "cluster.yaml");
    if (!c)
        return NULL;
    rl_cluster *cl = rl_cluster_from_config(c);
    rl_config_free(c);
    return cl;
}

static void test_relay_keys(void **state)
{
    (void)state;
    const char *ok = "driver: {port: 5555}\n"
                     "nodes:\n"
                     "  - {name: head, address: 10.0.0.1}\n"
                     "  - {name: gpu-1.a, address: 10.0.0.2, launch: ssh, relay: true}\n"
                     "  - {name: gpu2, address: 10.0.0.3, relay: true, relay_hold_ms: 0}\n"
                     "roles: {actor: {count: 1, node: gpu-1.a}}\n";
    rl_cluster *cl = s_parse(ok);
    if (!cl)
        fail_msg("%s", rl_error_message());
    assert_int_equal(cl->nodes[0].relay, 0);
    assert_int_equal(cl->nodes[1].relay, 1);
    assert_int_equal(cl->nodes[1].relay_hold_ms, 20);
    assert_int_equal(cl->nodes[2].relay, 1);
    assert_int_equal(cl->nodes[2].relay_hold_ms, 0);
    assert_int_equal(cl->driver_local_ipc, 1); /* the default */
    rl_cluster_free(cl);
    cl = s_parse("driver: {port: 5555, local_ipc: false}\nnodes: [{name: n, address: x}]\n"
                 "roles: {actor: {count: 1, node: n}}\n");
    if (!cl)
        fail_msg("%s", rl_error_message());
    assert_int_equal(cl->driver_local_ipc, 0);
    rl_cluster_free(cl);
    struct {
        const char *node, *extra, *want;
    } bad[] = {
        {"{name: box, address: h, launch: external, relay: true}", "",
         "cluster.yaml:3:54: nodes[0].relay: node 'box' is external: the driver starts no "
         "relay there"},
        {"{name: box, address: h, relay_hold_ms: 5}", "",
         "cluster.yaml:3:44: nodes[0].relay_hold_ms: relay_hold_ms on node 'box', which has no "
         "relay (relay: true)"},
        {"{name: box, address: h, relay: true, relay_hold_ms: 20000}", "",
         "cluster.yaml:3:57: nodes[0].relay_hold_ms: 20000 out of range 0..10000"},
        {"{name: 'b x', address: h, relay: true}", "",
         "cluster.yaml:3:38: nodes[0].relay: a node with a relay needs a name of 1 to 32 "
         "letters, digits, '_', '-' or '.'"},
        {"{name: box, address: h, relay: yes please}", "", "nodes[0].relay: "},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        char text[1024];
        snprintf(text, sizeof text,
                 "driver: {port: 5555}\nnodes:\n  - %s\nroles: {actor: {count: 1, node: box}}\n%s",
                 bad[i].node, bad[i].extra);
        cl = s_parse(text);
        if (cl) {
            rl_cluster_free(cl);
            fail_msg("case %zu was accepted; expected: %s", i, bad[i].want);
        }
        if (!strstr(rl_error_message(), bad[i].want))
            fail_msg("case %zu: '%s' lacks '%s'", i, rl_error_message(), bad[i].want);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_base_file),
        cmocka_unit_test(test_errors),
        cmocka_unit_test(test_example_files),
        cmocka_unit_test(test_role_names),
        cmocka_unit_test(test_cpus),
        cmocka_unit_test(test_relay_keys),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
