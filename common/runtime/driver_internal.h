/* driver_internal.h — the rl_driver's state, shared by the files of the
 * driver (private to common/runtime; see rlrt/runtime/driver.h for the
 * public contract):
 *   driver.c    construction, the I/O thread, waits, start, shutdown, free
 *   launcher.c  spawning local/ssh workers, exits, restarts with backoff,
 *               liveness, waiting for READY
 *   protocol.c  sending, HELLO/READY/REPLY/ERROR handling, CONFIGURE,
 *               heartbeats, SHUTDOWN
 *   dispatch.c  groups, futures, chunking, calls
 *   relays.c    node relays (rlrt/runtime/relay.h): starting them before
 *               their node's workers, again when they exit, stopping them
 *
 * Threading: the libuv loop runs on the driver's I/O thread; only that
 * thread touches child processes and libuv handles. The ROUTER socket is
 * used under d->mu only: by the I/O thread (the rl_zuv drain holds d->mu),
 * and by an API thread that sends the CALLs it just issued to READY slots
 * itself (no hand-off to the I/O thread; rl_drv_send_to then wakes the loop
 * when the send left input pending, see common/runtime/zuv.h). Every function
 * here expects d->mu held. Functions marked (I/O thread) may only run on the
 * I/O thread (from a loop callback).
 *
 * Ownership: the driver owns its slots (one per placement of the cluster),
 * groups and the sub-calls queued on slots; a future is the caller's, and a
 * sub-call points at its future until it is answered, failed or the future
 * is freed (rl_future_free detaches its sub-calls first).
 */
#ifndef RLRT_RUNTIME_DRIVER_INTERNAL_H
#define RLRT_RUNTIME_DRIVER_INTERNAL_H

#include <pthread.h>
#include <stdint.h>
#include <uv.h>

#include "rlrt/runtime/driver.h"
#include "common/runtime/handshake.h"
#include "common/runtime/msg.h"
#include "common/runtime/net.h"
#include "common/runtime/zuv.h"

#define RL_DRV_TOKEN_HEX RL_HS_TOKEN_HEX /* a slot's secret: 32 bytes as hex */

/* DOWN: no process / not connected; STARTING: spawned, no HELLO yet;
 * CONFIGURING: HELLO answered with CONFIGURE, waiting for READY; READY:
 * serving calls; FAILED: given up (the driver is fatal). */
typedef enum { RL_SLOT_DOWN, RL_SLOT_STARTING, RL_SLOT_CONFIGURING, RL_SLOT_READY, RL_SLOT_FAILED } rl_drv_slot_state;

typedef struct rl_drv_subcall {
    uint64_t call_id;
    rl_future *f;
    int index;
    int sent;
    int attempts;          /* sends so far (a retry-safe call may be re-sent) */
    rl_dataproto *payload; /* kept until sent (queued while the rank restarts),
                              and until answered when it may be retried */
    struct rl_drv_subcall *next;
} rl_drv_subcall;

/* A node relay the driver starts (a node with `relay: true`, launch local
 * or ssh, that holds a started slot). */
typedef struct rl_drv_relay {
    rl_driver *d;
    const rl_cluster_node *node;
    char endpoint[160]; /* rl_relay_endpoint(): the node's workers use it */
    uv_process_t proc;
    int proc_running;
    int restarts;       /* exits while the job ran */
    int stopping;       /* SIGTERM sent at shutdown */
    uv_timer_t timer;   /* the restart's back-off */
} rl_drv_relay;

typedef struct rl_drv_slot {
    rl_driver *d;
    int group; /* index into d->groups */
    int rank;
    const rl_placement *pl;
    const rl_cluster_node *node;
    char label[RL_CLUSTER_NAME_MAX + 16]; /* "actor/1" */
    rl_drv_slot_state state;
    unsigned char id[RL_MSG_ID_MAX];
    size_t id_len;
    int has_id;
    long worker_pid; /* from HELLO */
    int hello_seen;  /* HELLO received since the last spawn */
    /* The slot's secret: made at spawn (local/ssh: handed to the process in
     * its environment or on its stdin) or agreed by key exchange when an
     * external worker claims the slot; it never travels. Every HELLO for a
     * claimed slot must prove it (common/runtime/handshake.h): a reconnect
     * proves it is the same worker. */
    char token[RL_DRV_TOKEN_HEX + 1];
    int token_set;
    uint64_t hello_epoch;  /* bumped on every accepted proof: a challenge is
                              good for one HELLO */
    uint8_t kx_public[RL_HS_KX_BYTES]; /* the driver's half of a claim, for */
    int kx_pending;                    /* the CONFIGURE that answers it */
    char **retry_safe; /* methods its READY declared retry-safe */
    int n_retry_safe;
    char node_name[64]; /* node from its HELLO (logs) */
    int64_t calls_ok, calls_failed; /* metrics */
    double handler_s;               /* sum of REPLY compute_s */
    uint64_t ready_since;           /* uv_now when READY (0: not) */
    int64_t incarnation;            /* times it became READY */
    uv_process_t proc;
    int proc_running;
    int proc_pid;
    uv_timer_t restart_timer; /* a restart's back-off; or the wait for a dying worker's ERROR */
    int64_t exit_status;      /* of a worker that exited configuring, decided later */
    int exit_signo;
    int restarts;
    uint64_t last_seen, last_sent;
    rl_drv_subcall *calls;
} rl_drv_slot;

struct rl_group {
    rl_driver *d;
    int role;         /* index into cl->roles */
    const char *name; /* cl->roles[role].name */
    int size;         /* ranks, >= 1 */
    rl_drv_slot **ranks;
};

struct rl_future {
    rl_driver *d;
    rl_group *g;
    rl_dispatch mode;
    char method[128];
    int n;
    int pending;
    rl_dataproto **results;
    int64_t *in_rows; /* dp_compute: rows sent to each rank */
    int64_t pad;
    int failed;
    int code;
    char error[1024];
    int taken;
    uint64_t t_issue;   /* uv_hrtime when issued */
    double compute_s;   /* slowest rank's handler time */
    int accounted;
};

struct rl_driver {
    rl_driver_options opt;
    const rl_cluster *cl;
    uv_loop_t loop;
    void *zctx;
    void *router;
    rl_zuv *watch;
    uv_timer_t hb_timer;
    uv_timer_t launch_timer;  /* the next batch of rl_drv_launch_some */
    int launch_next;          /* the next slot to launch */
    uv_signal_t sigterm, sigint;
    uv_async_t wake;          /* API thread -> I/O thread */
    pthread_t io_thread;
    pthread_mutex_t mu;       /* guards everything below and the slots */
    pthread_cond_t cv;        /* broadcast after every loop callback */
    int start_requested, shutdown_requested, kill_requested, quit;
    int io_started;           /* the I/O thread runs (rl_driver_free joins it) */
    int sync_init, loop_init; /* what rl_driver_new built (for cleanup) */
    char *config_json;        /* CONFIGURE: the job tree as JSON ... */
    char *locations_json;     /* ... and where each node came from */
    char start_error[1024];
    char endpoint[512];
    char local_endpoint[160]; /* ipc://@rlrt-JOB-driver: local workers' (or "") */
    char job_id[33];          /* random per driver run: HELLO must match */
    rl_hs_issuer hs;          /* HELLO challenges (a random key per run) */
    char driver_key[RL_NET_KEY_TXT]; /* public key (security on) or "" */
    char **authorized;        /* security: the worker keys allowed */
    int n_authorized;
    int64_t bytes_in, bytes_out, msgs_in, msgs_out, refused; /* metrics */
    rl_net_ratelimit log_limit; /* hostile input logs */
    struct rl_http *http;     /* /healthz and /metrics (http.driver_port) */
    int64_t step;             /* rl_driver_note_step */
    double step_s, steps_s_total;
    int64_t steps;
    /* Recovery (rl_drv_recovery_*): a worker of the started job was lost at
     * recovering_ms (uv_hrtime ms; 0: no recovery under way) and the job has
     * not completed a step with every slot READY since. */
    uint64_t recovering_ms;
    double recovering_wall_s;  /* the same moment on the wall clock */
    char recovering_slots[256]; /* "actor/1, actor/0": the slots lost since */
    char recovering_why[256];   /* why the first one was lost */
    int64_t recoveries;        /* completed */
    double recovery_s_last, recovery_s_total;
    uint64_t last_hb_ms;      /* the heartbeat timer last ran (loop alive) */
    int started;              /* rl_driver_start succeeded */
    int interval_ms;
    int liveness;
    rl_drv_slot *slots; /* the placements of the started roles */
    int n_slots;
    rl_drv_relay *relays; /* relays.c */
    int n_relays;
    rl_group *groups;   /* one per started role, cluster order */
    int n_groups;
    int *group_of_role; /* cl->roles index -> groups index, or -1 */
    uint64_t next_call_id;
    uint64_t seq;
    int interrupted;
    int shutting_down;
    int total_restarts;
    int child_failures;
    char fatal[1024];         /* set once (rl_drv_set_fatal) */
    double calls_wall_s, calls_compute_s; /* completed calls (rl_driver_call_time) */
    int64_t calls_done;
    /* A drain of the ROUTER (I/O thread, under mu) wakes the waits on cv
     * at its end only when it did something a wait can be for: a future
     * completed or failed, or any message other than a REPLY that left its
     * future pending or a HEARTBEAT. Replies trickling in one by one would
     * otherwise wake the recipe thread once per worker and call. */
    int drain_wake;
    /* API thread, under mu: inside rl_drv_send_batch_begin/end the sends
     * skip their ZMQ_EVENTS check (a getsockopt, a poll and getpids each);
     * the end checks once for all of them (send_check: one is owed). */
    int send_batch, send_check;
};


/* ---- driver.c ---- */
/* 1 on the driver's I/O thread (the one running the libuv loop). */
int rl_drv_on_io_thread(void);
/* Milliseconds of the monotonic clock: the loop's cached uv_now() on the
 * I/O thread, uv_hrtime() elsewhere (the same clock). */
uint64_t rl_drv_now_ms(rl_driver *d);
void rl_drv_lock(rl_driver *d);
/* Releases d->mu, then wakes the waits on d->cv. */
void rl_drv_unlock(rl_driver *d);
/* Asks the I/O thread to run its work (launch, send queued calls, ...). */
void rl_drv_wake(rl_driver *d);
/* Waits (d->mu held, released while blocked) until cond(arg), the timeout
 * (< 0: none), or — unless `always` — an interruption or a fatal error.
 * 0, RL_ETIMEOUT (no message) or RL_ESTATE (message set). */
int rl_drv_wait_until(rl_driver *d, int (*cond)(void *), void *arg, int timeout_ms, int always);
/* The job cannot go on: d->fatal = the message (the first one wins), logged;
 * every queued and sent call fails with it and every wait returns it. */
void rl_drv_set_fatal(rl_driver *d, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Slot s of a started job lost its worker (why): the job is recovering from
 * now on (/healthz, /metrics), or still, with s added to the lost slots. */
void rl_drv_recovery_begin(rl_drv_slot *s, const char *why);
/* A slot became READY: a recovery before the recipe's first step ends once
 * every slot is READY again (later ones end at the next step with every
 * slot READY: rl_driver_note_step). */
void rl_drv_recovery_ready(rl_driver *d);

/* ---- launcher.c ---- */
/* (I/O thread) Spawns the next RL_DRV_LAUNCH_BATCH local/ssh slots from
 * d->launch_next; the first failure goes to d->start_error. 1 when every
 * slot is launched (or one failed), 0 when more remain: the caller lets
 * the loop answer the started workers' HELLOs before the next batch (a
 * job of hundreds of workers spawned in one callback left the first ones
 * unanswered past their give-up time). */
#define RL_DRV_LAUNCH_BATCH 16
int rl_drv_launch_some(rl_driver *d);
/* How long a starting slot may take to say HELLO (10 × the liveness +
 * 10 s); its worker, told by --start-window-s, waits as long for us. */
uint64_t rl_drv_starting_window_ms(const rl_driver *d);
/* The processes the driver starts (workers and relays). argv[0..]: node
 * nd's ssh command split at spaces (at most 20 words) and [user@]address,
 * in the caller's buffers; returns the count. */
int rl_drv_ssh_argv(const rl_cluster_node *nd, char **argv, char *cmd, size_t cmd_size,
                    char *host, size_t host_size);
/* Our environment for a child, without what the driver sets for its
 * children (RL_WORKER_TOKEN, RL_DRIVER_PID, CUDA_VISIBLE_DEVICES when
 * drop_cvd) and systemd's (NOTIFY_SOCKET, WATCHDOG_*), with room for
 * `extra` entries and the NULL after them; *n: the entries filled. Free the
 * array, not its strings. NULL: out of memory. */
char **rl_drv_child_env(int drop_cvd, int extra, int *n);
/* (I/O thread) uv_spawn of argv with env; stdin from `in` (a pipe to
 * create; NULL: none), stdout and stderr ours. proc->data = data. On
 * failure (libuv's code) proc is being closed. */
int rl_drv_spawn(rl_driver *d, uv_process_t *proc, void *data, char **argv, char **env,
                 uv_stream_t *in, uv_exit_cb cb);
/* (I/O thread) The worker in slot s is gone: its calls fail; a restart
 * follows (after its process exited, if it still runs). */
void rl_drv_slot_dead(rl_drv_slot *s, const char *why);
/* (I/O thread) Heartbeat timer: liveness of every slot, heartbeats out. */
void rl_drv_on_heartbeat(uv_timer_t *t);
/* Waits until every slot of group g (NULL: of every group) is READY;
 * RL_ETIMEOUT lists the missing workers. */
int rl_drv_wait_ready(rl_driver *d, rl_group *g, int timeout_ms);

/* ---- relays.c ---- */
/* The relays of the started slots' nodes (after the slots and the job id). */
int rl_drv_relays_build(rl_driver *d);
/* Their timers on d->loop (before the I/O thread runs). */
void rl_drv_relays_init_handles(rl_driver *d);
/* (I/O thread) Starts every relay; RL_OK or the first failure. */
int rl_drv_relays_launch(rl_driver *d);
/* Where slot s's worker connects: its node's relay, else the driver. */
const char *rl_drv_slot_endpoint(const rl_drv_slot *s);
/* 1 when slot s's worker is behind a relay (with security it gets its
 * certificate for its channels but no driver key: it speaks to the relay
 * over the node's private Unix socket). */
int rl_drv_slot_relayed(const rl_drv_slot *s);
/* (I/O thread) Signals every running relay (SIGTERM at shutdown once the
 * workers are gone, SIGKILL when killing). */
void rl_drv_relays_signal(rl_driver *d, int signo);
/* (I/O thread) At shutdown, once no worker process of ours runs: SIGTERM
 * to the relays (their workers' SHUTDOWNs went through them first). */
void rl_drv_relays_stop_if_done(rl_driver *d);
/* (I/O thread) A worker that held the identity old[0, old_len) proved its
 * slot's token (HELLO) from now_id[0, now_len), whose relay part ends at
 * now_relay: when both are behind relays of the same node (the identity
 * names it) and the relay's identity changed, that relay was started again
 * and its old connections and the calls in them are gone. Every other slot
 * behind the old identity then fails its calls, waits for a new HELLO
 * (retry-safe calls go again once it is READY) and is told, over the new
 * relay, to send it at once. Only a proved HELLO counts: a peer that makes
 * up a relay identity moves nobody. */
void rl_drv_relay_moved(rl_driver *d, const unsigned char *old, size_t old_len,
                        const unsigned char *now_id, size_t now_len, size_t now_relay);
/* Relays whose process still runs. */
int rl_drv_relays_running(const rl_driver *d);
void rl_drv_relays_free(rl_driver *d);

/* ---- protocol.c ---- */
/* (I/O thread) Sends env (+ payload) to a peer identity / a connected slot. */
int rl_drv_send_to(rl_driver *d, const unsigned char *id, size_t id_len, Rl__Envelope *env,
                   const rl_dataproto *payload);
int rl_drv_send(rl_drv_slot *s, Rl__Envelope *env, const rl_dataproto *payload);
/* (API thread, under mu) Around a run of sends to many ranks: the check
 * for input that a send may have taken the edge of (rl_drv_send_to) is
 * made once, at the end, not after every send. */
void rl_drv_send_batch_begin(rl_driver *d);
void rl_drv_send_batch_end(rl_driver *d);
void rl_drv_send_disconnect(rl_driver *d, const unsigned char *id, size_t id_len, const char *why);
void rl_drv_send_error_to(rl_driver *d, const unsigned char *id, size_t id_len, int code,
                          const char *message);
/* CALL for sub-call c; on success its payload is released. */
int rl_drv_send_call(rl_drv_slot *s, rl_drv_subcall *c);
/* (I/O thread) The ROUTER is readable: handles one message (rl_zuv
 * callback; the drain holds d->mu). */
int rl_drv_on_readable(void *sock, void *arg);
/* (I/O thread) SHUTDOWN to every connected worker. */
void rl_drv_send_shutdown(rl_driver *d);

/* ---- launcher.c: tokens ---- */
/* Fills s->token with a fresh secret. */
int rl_drv_new_token(rl_drv_slot *s);

/* ---- dispatch.c ---- */
/* 1 when slot s's worker declared `method` retry-safe in its READY. */
int rl_drv_retry_safe(const rl_drv_slot *s, const char *method);
/* Records the failure of sub-call `index` of f (the first message wins). */
void rl_drv_future_fail(rl_future *f, int index, int code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
void rl_drv_subcall_free(rl_drv_subcall *c);
/* Detaches the sent sub-call `call_id` from slot s (NULL if unknown or not
 * sent to this worker). */
rl_drv_subcall *rl_drv_take_subcall(rl_drv_slot *s, uint64_t call_id);
/* Slot s lost its worker (it died, left or reconnected; why): its sent
 * calls fail (retry-safe ones are re-sent; queued ones wait for the
 * restarted worker), and when one failed the other ranks of its group are
 * told to abort their waits (RL_WORKER_ABORT, call id 0: a collective
 * waiting for the lost rank ends now, not at its timeout); a started job is
 * recovering (rl_drv_recovery_begin). */
void rl_drv_fail_calls(rl_drv_slot *s, const char *why);
/* The driver is fatal: every queued or sent call fails with d->fatal. */
void rl_drv_fail_all_queued(rl_driver *d);
/* (I/O thread) Sends the queued calls of every READY slot. */
void rl_drv_send_queued(rl_driver *d);
/* Sends the queued calls of slot s if it is READY (any thread, d->mu held);
 * a call that cannot be sent fails its future. */
void rl_drv_send_slot_queued(rl_drv_slot *s);

#endif
