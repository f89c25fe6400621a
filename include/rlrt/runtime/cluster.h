/* rlrt/runtime/cluster.h — cluster.yaml: nodes, role placement, supervision.
 *
 * Purpose: rl-driver reads cluster.yaml to know which machines exist, how to
 * start workers on each (launch mode), where every (role, rank) runs and on
 * which GPUs, where the driver listens, and the heartbeat / restart policy.
 * The result is a flat placement table the launcher walks.
 *
 * Schema (keys not listed are errors, with a suggestion):
 *
 *   driver:                       # required
 *     bind: 0.0.0.0               # interface the ROUTER binds (default *)
 *     address: 10.0.0.1           # address workers connect to (default: the
 *                                 #   address of driver.node, else of nodes[0])
 *     node: head                  # optional: the node the driver runs on
 *     port: 5555                  # required, 1..65535
 *     local_ipc: true             # default: the workers and relays it
 *                                 #   starts on its own machine (launch:
 *                                 #   local) connect over a Unix socket,
 *                                 #   ipc://@rlrt-JOB-driver, not TCP (not
 *                                 #   with security); false: all over TCP
 *   heartbeat: {interval_s: 1.0, liveness: 3}          # defaults 1 s x 3
 *     # give_up_s: a worker whose driver stays silent this long after the
 *     #   liveness ran out exits (status 2); default interval_s x liveness
 *   restart: {max_restarts: 3, backoff_s: 1.0, backoff_max_s: 30.0}
 *     # call_retries: 2 — how often a call to a method its role declares
 *     #   retry-safe (rl_method.flags) is sent again when the worker running
 *     #   it dies; other methods fail the call at once
 *   limits: {max_message_mb: 256}  # largest frame any socket of the job
 *                                  # accepts (ZMQ_MAXMSGSIZE): control plane,
 *                                  # data and weight channels, collectives
 *   http:                          # read-only /healthz and /metrics
 *     bind: 127.0.0.1              # default 127.0.0.1
 *     driver_port: 9100            # 0 (default) = no HTTP on the driver
 *     worker_port: 9200            # 0 (default) = none; a local/ssh worker
 *                                  #   gets worker_port + its slot index
 *   security:                      # CurveZMQ on every TCP socket (optional)
 *     driver_cert: keys/driver.cert      # the driver's secret certificate
 *     worker_cert: keys/worker.cert      # what local/ssh workers load (path
 *                                        #   on their node)
 *     authorized_keys: keys/authorized   # folder of worker public certs
 *                                        #   (*.cert); only these may connect
 *     # relative paths are relative to cluster.yaml; `rl-driver keygen DIR
 *     # NAME` writes DIR/NAME.cert (public) and DIR/NAME.cert_secret
 *   external_wait_timeout_s: 300  # how long to wait for external workers
 *   nodes:                        # required, at least one
 *     - name: gpu0                # required, unique
 *       address: 10.0.0.2         # required
 *       gpus: 8                   # default 0
 *       launch: local             # local | ssh | external (default local)
 *       ssh: {user: rl, command: "ssh -o BatchMode=yes"}   # ssh only
 *       relay: true               # default false: the node's workers reach
 *                                 #   the driver through one relay process
 *                                 #   there (rlrt/runtime/relay.h), started
 *                                 #   by the driver (local/ssh) on
 *                                 #   ipc://@rlrt-JOB-NODE (with security:
 *                                 #   ipc:///tmp/rlrt-JOB-NODE/relay, a 0700
 *                                 #   directory; CurveZMQ to the driver);
 *                                 #   name: [A-Za-z0-9_.-], <= 32
 *       relay_hold_ms: 20         # how long the relay may hold a reply for
 *                                 #   its method's other replies (0..10000)
 *   roles:                        # required; any role names, in any order
 *     actor:                      # a name: [a-z][a-z0-9_]*, at most 63 chars
 *       count: 2                  # required, >= 0
 *       placement:                # one entry per rank, ranks 0..count-1
 *         - {rank: 0, node: gpu0, gpus: [0, 1]}
 *         - {rank: 1, node: gpu0, gpus: [2, 3], cpus: "16-31"}
 *     reward: {count: 2, node: gpu0}   # shorthand: every rank on one node,
 *                                      # no GPUs
 *     env: {count: 4, node: gpu0, cpus: "32-47"}  # shorthand: every rank on
 *                                      # these cores
 *   # cpus (optional): the cores of the node the worker runs on, as a Linux
 *   #   CPU list ("0-7,16"; rlrt/runtime/cpus.h). rl-worker gets --cpus,
 *   #   binds itself there and runs as many compute threads as the list has
 *   #   cores (OMP_NUM_THREADS, when set, wins). Absent: any core, threads =
 *   #   the machine's cores. Checked here for form; whether the node has the
 *   #   cores is checked by the worker, which refuses to start otherwise.
 *
 * Role names are data: the runtime gives no name a meaning. rl-driver starts
 * the roles its recipe asks for (driver.h) and rl-worker serves the roles it
 * has a method table for; a cluster may list roles a given job does not use.
 *
 * Invariants (checked by rl_cluster_load): node names unique; role names
 * unique identifiers; every placement names a known node; GPU indices <
 * that node's gpus and not repeated within one rank; cpus a well-formed
 * list (rl_cpus_parse); ranks of a role are
 * exactly 0..count-1, each once. Errors are RL_ECONFIG with
 * "cluster.yaml:LINE:COL: path: problem".
 *
 * Ownership: rl_cluster_load()/rl_cluster_from_config() return an object
 * freed with rl_cluster_free(); all arrays and strings inside belong to it.
 * rl_cluster_table() returns malloc'd text.
 */
#ifndef RLRT_RUNTIME_CLUSTER_H
#define RLRT_RUNTIME_CLUSTER_H

#include "rlrt/config.h"
#include "rlrt/runtime/cpus.h"

#ifdef __cplusplus
extern "C" {
#endif

#define RL_CLUSTER_NAME_MAX 64
#define RL_CLUSTER_ADDR_MAX 256
#define RL_CLUSTER_MAX_GPUS 64
#define RL_CLUSTER_PATH_MAX 1024
#define RL_CLUSTER_DEFAULT_MAX_MESSAGE_MB 256

typedef enum rl_launch_mode {
    RL_LAUNCH_LOCAL = 0,    /* the driver spawns and supervises the worker */
    RL_LAUNCH_SSH = 1,      /* the driver starts it over ssh */
    RL_LAUNCH_EXTERNAL = 2  /* systemd/Kubernetes start it; the driver waits */
} rl_launch_mode;

/* "local", "ssh", "external". */
const char *rl_launch_mode_name(rl_launch_mode m);

typedef struct rl_cluster_node {
    char name[RL_CLUSTER_NAME_MAX];
    char address[RL_CLUSTER_ADDR_MAX];
    int gpus;
    rl_launch_mode launch;
    char ssh_user[RL_CLUSTER_NAME_MAX];     /* "" = the current user */
    char ssh_command[RL_CLUSTER_ADDR_MAX];  /* default "ssh" */
    int relay;    /* 1: its workers reach the driver through a node relay */
    int relay_hold_ms; /* the relay's reply hold (rlrt/runtime/relay.h) */
    int line;                               /* where it is defined */
} rl_cluster_node;

/* A role of cluster.yaml: a name the application gives it (the runtime
 * attaches no meaning to it) and how many ranks it has. */
typedef struct rl_cluster_role {
    char name[RL_CLUSTER_NAME_MAX]; /* [a-z][a-z0-9_]*, unique */
    int count;                      /* ranks 0..count-1; may be 0 */
    int line;                       /* where its key is in the file */
} rl_cluster_role;

typedef struct rl_placement {
    int role; /* index into rl_cluster.roles */
    int rank;
    int node; /* index into rl_cluster.nodes */
    int ngpus;
    int gpus[RL_CLUSTER_MAX_GPUS];
    char cpus[RL_CPUS_TEXT_MAX]; /* "" = any core; else a CPU list (cpus.h) */
} rl_placement;

typedef struct rl_cluster {
    char file[RL_CLUSTER_ADDR_MAX];
    rl_cluster_node *nodes;
    int n_nodes;
    rl_cluster_role *roles; /* in file order */
    int n_roles;
    /* Sorted by role (file order), then rank. */
    rl_placement *placements;
    int n_placements;
    int driver_node;                            /* -1 if not given */
    char driver_bind[RL_CLUSTER_ADDR_MAX];      /* e.g. "*" */
    char driver_address[RL_CLUSTER_ADDR_MAX];
    int driver_port;
    int driver_local_ipc;  /* 1 (default): local workers use a Unix socket */
    char driver_bind_endpoint[RL_CLUSTER_ADDR_MAX + 16]; /* tcp://0.0.0.0:5555 (bind form) */
    char driver_endpoint[RL_CLUSTER_ADDR_MAX + 16];      /* tcp://10.0.0.1:5555 */
    double heartbeat_interval_s; /* default 1.0 */
    int heartbeat_liveness;      /* default 3 */
    int restart_max;             /* default 3 */
    double restart_backoff_s;    /* default 1.0 (doubles per restart) */
    double restart_backoff_max_s; /* default 30.0 */
    double external_wait_timeout_s; /* default 300.0 */
    double heartbeat_give_up_s;  /* default interval_s x liveness */
    int restart_call_retries;    /* default 2 */
    int64_t max_message_bytes;   /* limits.max_message_mb x 2^20; default 256 MiB */
    char http_bind[RL_CLUSTER_ADDR_MAX];   /* default 127.0.0.1 */
    int http_driver_port;        /* 0 = off */
    int http_worker_port;        /* 0 = off */
    int security;                /* 1 when a security: section is given */
    char security_driver_cert[RL_CLUSTER_PATH_MAX];
    char security_worker_cert[RL_CLUSTER_PATH_MAX];
    char security_authorized_keys[RL_CLUSTER_PATH_MAX];
} rl_cluster;

/* How many ranks share the cores of placement p's node: the placements of
 * its role on its node without `cpus:` (they compute at the same time), p
 * included; 0 when p has cpus or its node's workers are started outside the
 * driver (launch: external; such a worker takes RL_SHARE_CORES itself). The
 * launcher passes it as --share-cores. */
int rl_cluster_core_share(const rl_cluster *cl, const rl_placement *p);

rl_cluster *rl_cluster_load(const char *path);
rl_cluster *rl_cluster_from_config(const rl_config *c);
void rl_cluster_free(rl_cluster *cl);
/* Index of the role called `name` in cl->roles, or -1 (no message set). */
int rl_cluster_role_index(const rl_cluster *cl, const char *name);
/* The placement of (role, rank), or NULL (no message set). */
const rl_placement *rl_cluster_find(const rl_cluster *cl, const char *role, int rank);
/* Human-readable placement table, one line per rank:
 * "role     rank  node   address    launch    gpus" */
char *rl_cluster_table(const rl_cluster *cl);

#ifdef __cplusplus
}
#endif
#endif
