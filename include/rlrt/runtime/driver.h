/* rlrt/runtime/driver.h — the single controller: worker groups, dispatch,
 * futures, heartbeats and supervision.
 *
 * Purpose: verl's RayWorkerGroup + @register dispatch modes with native
 * daemons. The driver binds a ROUTER; every (role, rank) of the roles the job
 * starts (rl_driver_options.roles; roles are plain names from cluster.yaml)
 * is a slot that a worker fills by saying HELLO. `local` slots are spawned
 * with uv_spawn, `ssh` slots with `ssh HOST rl-worker ...`, `external` slots
 * are waited for. A group per started role offers calls in four dispatch
 * modes:
 *   one_to_all  the same DataProto to every rank, one result per rank;
 *   dp_compute  the batch chunked across ranks (padded when rows don't
 *               divide), replies concatenated in rank order, padding stripped;
 *   rank_zero   rank 0 only;
 *   all_to_all  a list of per-rank DataProtos, one result per rank.
 * Calls return futures so a recipe can overlap roles.
 *
 * Threading: the driver runs its libuv loop on its own I/O thread, started
 * by rl_driver_new(): only that thread touches the child processes and the
 * timers, and it receives everything on the ROUTER, so heartbeats, child
 * exits and signals are handled whatever the caller does — a recipe may
 * compute between calls for as long as it likes. API calls take the driver
 * mutex; a call sends its CALLs to the READY ranks itself (the ROUTER is
 * only used under that mutex) and leaves those for ranks that are not READY
 * queued for the loop; other work is queued and the loop woken (uv_async);
 * waits (rl_future_wait, rl_group_wait_ready,
 * rl_driver_start, rl_driver_poll, rl_driver_shutdown) block on a condition
 * variable that every loop callback broadcasts. The API may be called from
 * any thread; a future is used by one thread at a time.
 *
 * Failure handling: a worker silent for interval × liveness, or whose process
 * exits, is dead; its in-flight calls fail with an error naming the worker
 * and the method, and (when a call of its failed) the other ranks of its
 * group abort their waits on peers at once (rl_group_abort), so a collective
 * with the dead rank fails within the heartbeat's bound, not at its timeout. From the death until a
 * step completes with every slot READY again (rl_driver_note_step; before
 * the first step: until every slot is READY), /healthz says "recovering",
 * naming the lost slots and since when, and /metrics counts the recoveries
 * and their seconds. local/ssh workers are restarted with exponential backoff up
 * to restart.max_restarts; calls made while a rank restarts are queued and
 * sent once it is READY again. If a role cannot be restored, or cannot start
 * at all (rl-worker exits RL_WORKER_EXIT_USAGE before HELLO, or the role's
 * init fails), every wait fails with that message and rl_driver_fatal() is
 * set. Everything that arrives in a message (role, rank, call ids, payload
 * flags, handler times) is checked before use.
 *
 * CONFIGURE: each worker gets the job tree as JSON with the file:line:col of
 * its nodes (so a role's config errors name job.yaml), its group's size and
 * its rank, and whether to serve its test methods.
 *
 * Ownership: rl_driver_new() borrows the cluster and job config (they must
 * outlive the driver). Futures are the caller's (rl_future_free()); results
 * taken from a future are the caller's.
 */
#ifndef RLRT_RUNTIME_DRIVER_H
#define RLRT_RUNTIME_DRIVER_H

#include "rlrt/config.h"
#include "rlrt/dataproto.h"
#include "rlrt/runtime/cluster.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct rl_driver rl_driver;
typedef struct rl_group rl_group;
typedef struct rl_future rl_future;

typedef enum rl_dispatch {
    RL_DISPATCH_ONE_TO_ALL = 0,
    RL_DISPATCH_DP_COMPUTE = 1,
    RL_DISPATCH_RANK_ZERO = 2,
    RL_DISPATCH_ALL_TO_ALL = 3
} rl_dispatch;

const char *rl_dispatch_name(rl_dispatch mode);

typedef struct rl_driver_options {
    const rl_cluster *cluster;  /* borrowed */
    const rl_config *job;       /* borrowed; may be NULL. CONFIGURE carries the
                                   whole job tree as JSON, with the file:line
                                   of every node: a role reads its `<role>.*`
                                   subtree and shared sections (`model.*`) */
    const char *worker_binary;  /* rl-worker for local/ssh launch */
    const char *bind_override;  /* e.g. "tcp://127.0.0.1:*" (tests); NULL =
                                   the cluster's bind endpoint */
    const char *worker_log_level; /* passed as --log-level; NULL = info */
    int ready_timeout_ms;       /* local/ssh start-up; default 30000 */
    /* The cluster roles to start (NULL-terminated); NULL = every role with
     * ranks. A listed role the cluster lacks, or one with no ranks, makes
     * rl_driver_new fail (RL_ECONFIG naming the cluster file and its roles);
     * a cluster role not listed is not started (logged once at info). */
    const char *const *roles;
    /* 1: workers also serve their test methods (the selftest's echo, add,
     * ...; rl_worker_options.test_methods); 0: production methods only. */
    int test_methods;
    /* The job id to run under (16 lowercase hex digits); NULL = a random
     * one. A driver that resumes a run passes the id of the run it resumes
     * (rl-driver --resume reads it from the output directory), so the
     * external workers that outlived the old driver rejoin — they claim
     * their free slots again — instead of being refused as another job's. */
    const char *job_id;
} rl_driver_options;

/* Binds the ROUTER and starts the I/O thread (workers are launched by
 * rl_driver_start). NULL + message when the options are inconsistent with
 * the cluster (see rl_driver_options.roles) or a resource (socket, thread,
 * memory) cannot be had. */
rl_driver *rl_driver_new(const rl_driver_options *opt);
/* Launches local/ssh workers and waits until every slot is READY (external
 * ones up to cluster external_wait_timeout_s). On timeout: RL_ETIMEOUT with
 * the list of missing workers. A role whose worker cannot start — rl-worker
 * exits with status 64 (usage error, e.g. a role it does not serve) before
 * HELLO, or the role's init fails — is fatal at once, without restarts:
 * RL_ESTATE with "role R cannot start: ...". */
int rl_driver_start(rl_driver *d);
/* The endpoint workers connect to (after a wildcard bind: the real port). */
const char *rl_driver_endpoint(const rl_driver *d);
/* This run's job id (16 hex digits, random per rl_driver_new unless
 * rl_driver_options.job_id gives it): workers present it in HELLO; a
 * worker of another job is refused and exits. */
const char *rl_driver_job_id(const rl_driver *d);
/* The driver's CurveZMQ public key (Z85) when cluster.yaml has a security:
 * section, else "". External workers need it (--driver-key). */
const char *rl_driver_public_key(const rl_driver *d);
/* The group of a started role; NULL + RL_ENOTFOUND naming the role and the
 * cluster file when the cluster has no such role or this job did not start
 * it. */
rl_group *rl_driver_group(rl_driver *d, const char *role);
/* The started roles' groups, in cluster order: i in [0, count). */
int rl_driver_group_count(const rl_driver *d);
rl_group *rl_driver_group_at(rl_driver *d, int i);
int rl_group_size(const rl_group *g);
const char *rl_group_role(const rl_group *g);
/* pid of a local rank's process (0 if none) — for tests and logs. */
int rl_group_pid(const rl_group *g, int rank);
/* Address of the node a rank is placed on (from cluster.yaml). */
const char *rl_group_address(const rl_group *g, int rank);
/* A rank's placement (node index, GPUs, cores; from cluster.yaml), NULL for
 * a rank outside the group. Borrowed from the cluster. */
const rl_placement *rl_group_placement(const rl_group *g, int rank);
/* Waits until every rank of the group is READY. */
int rl_group_wait_ready(rl_group *g, int timeout_ms);
/* Waits until every rank has finished every call sent to it before (a
 * failed group call leaves the other ranks' parts running: a recovery drains
 * them before it sends new work). RL_ETIMEOUT after timeout_ms (< 0: none). */
int rl_group_drain(rl_group *g, int timeout_ms);
/* Tells every rank of g to abort its waits on peers (RL_WORKER_ABORT,
 * rlrt/runtime/worker.h): a collective, weight or data channel wait of any
 * call sent to it before ends within 50 ms with RL_EPEER naming `why`
 * (NULL: "the recipe"); calls sent after are not touched. Returns when every
 * rank acknowledged (RL_ETIMEOUT after timeout_ms; a rank not READY gets it
 * once it is). A recovery calls it before it drains the groups, so no
 * survivor waits out its timeout for a lost peer of another group (a
 * rollout for the weights of a dead actor). The driver already sends it by
 * itself to the other ranks of a lost worker's group. */
int rl_group_abort(rl_group *g, const char *why, int timeout_ms);

/* one_to_all, dp_compute, rank_zero. `in` may be NULL (empty batch); it is
 * not modified and may be freed right after the call. */
rl_future *rl_group_call(rl_group *g, const char *method, rl_dispatch mode,
                         const rl_dataproto *in);
/* all_to_all: per_rank[0..size) (entries may be NULL). */
rl_future *rl_group_call_each(rl_group *g, const char *method,
                              rl_dataproto *const *per_rank);

/* Blocks until the future completes: every rank answered, or one
 * failed (the others' late answers are dropped). 0 on success; on failure the
 * error code with a message naming the worker(s) and the method;
 * RL_ETIMEOUT after timeout_ms (< 0: no limit); RL_ESTATE if interrupted
 * (SIGTERM/SIGINT) or the driver is fatal. */
int rl_future_wait(rl_future *f, int timeout_ms);
/* Waits for fs[0..n) (entries may be NULL, all of one driver) until every
 * one completed, or until one FAILED: then at once, with its error, while
 * the others may still run (a phase that calls two groups, as the weight
 * sync does, learns of a lost worker without waiting for its peer's
 * timeout; a recovery aborts and drains what still runs). 0 when every one
 * succeeded; RL_ETIMEOUT after timeout_ms (< 0: no limit); RL_ESTATE as
 * rl_future_wait. rl_future_done / rl_future_wait(f, 0) then tell each. */
int rl_future_wait_all(rl_future *const *fs, int n, int timeout_ms);
int rl_future_done(const rl_future *f);
/* dp_compute: the concatenated, unpadded result; rank_zero: rank 0's;
 * one_to_all/all_to_all: RL_EINVAL (use rl_future_take_rank). A rank that
 * returned no payload is an error (RL_EPROTO naming the method, the role
 * and the rank): call without taking when a method returns nothing. */
int rl_future_take(rl_future *f, rl_dataproto **out);
/* Rank `rank`'s result (same rule about a missing payload). */
int rl_future_take_rank(rl_future *f, int rank, rl_dataproto **out);
void rl_future_free(rl_future *f);
/* Call + wait + take in one (dp_compute / rank_zero); out == NULL: call
 * and wait only (any payload is dropped). */
int rl_group_call_sync(rl_group *g, const char *method, rl_dispatch mode,
                       const rl_dataproto *in, rl_dataproto **out);

/* Sleeps up to timeout_ms while the I/O thread works (0: returns at once);
 * returns early with RL_ESTATE when interrupted or fatal. */
int rl_driver_poll(rl_driver *d, int timeout_ms);
/* Set by SIGTERM/SIGINT. */
int rl_driver_interrupted(const rl_driver *d);
/* Non-NULL once a role cannot be restored. */
const char *rl_driver_fatal(const rl_driver *d);
/* Cumulative time of completed calls: wall (issue → last reply, on the
 * driver) and compute (the slowest rank's handler time, reported by the
 * workers in REPLY.result). wall − compute is what dispatch, transfers and
 * queueing cost. */
void rl_driver_call_time(const rl_driver *d, double *wall_s, double *compute_s, int64_t *calls);
/* Total worker restarts so far. */
int rl_driver_restarts(const rl_driver *d);
/* CPU time used so far by this driver process and every worker process it
 * launched on this machine (launch: local), all their threads (Linux's
 * per-process CPU clocks), and the cores those processes may run on (the
 * union of their affinity masks). A recipe diffs two readings to see how
 * many cores a step kept busy (perf/cpu_cores_busy). *complete is 1 when
 * every rank of the job was counted; 0 when some rank's CPU is not visible
 * here (ssh or external launch, or a rank between restarts) — its time is
 * then missing from *cpu_s. A restarted worker's clock starts again at 0, so
 * a diff across a restart (rl_driver_restarts changed) means nothing. */
typedef struct rl_driver_cpu {
    double cpu_s; /* seconds of CPU, summed over the processes */
    int cores;    /* cores in the union of their affinity masks */
    int complete;
} rl_driver_cpu;
void rl_driver_cpu_usage(const rl_driver *d, rl_driver_cpu *out);
/* How many times rank `rank` of g has become READY (1 after the first
 * start; +1 after every restart or reconnect): a recipe that keeps state on
 * a worker compares it with the value it saw to know the worker must be
 * restored (the hook for step-level recovery). 0 for a bad rank. */
int64_t rl_group_incarnation(const rl_group *g, int rank);
/* A recipe reports a finished step (its index and wall time): shown on
 * /healthz ("step") and /metrics (rlrt_step, rlrt_step_seconds_*). */
void rl_driver_note_step(rl_driver *d, int64_t step, double seconds);
/* The HTTP port /healthz and /metrics are served on (0: none). */
int rl_driver_http_port(const rl_driver *d);
/* SHUTDOWN to every worker, waits for local children (SIGKILL after
 * timeout_ms), closes everything. 0 if every child exited with status 0. */
int rl_driver_shutdown(rl_driver *d, int timeout_ms);
void rl_driver_free(rl_driver *d);

#ifdef __cplusplus
}
#endif
#endif
