/* launcher.c — starting workers (uv_spawn for local slots, ssh for ssh
 * slots), their exits, restarts with exponential backoff, liveness by
 * heartbeat, and waiting until slots are READY (see driver_internal.h). */
#include "common/runtime/driver_internal.h"

#include "rlrt/error.h"
#include "rlrt/log.h"
#include "rlrt/runtime/health.h"
#include "rlrt/runtime/worker.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int s_spawn(rl_drv_slot *s);

int rl_drv_new_token(rl_drv_slot *s)
{
    rl_hs_new_token(s->token);
    s->token_set = 1;
    s->hello_epoch++; /* challenges made for the slot's last worker die */
    return RL_OK;
}

/* ssh: the token reaches the remote rl-worker on its stdin (never argv). */
typedef struct {
    uv_pipe_t pipe;
    uv_write_t req;
    char buf[RL_DRV_TOKEN_HEX + 2];
} s_stdin_feed;

static void s_feed_closed(uv_handle_t *h) { free(h->data); }

static void s_feed_written(uv_write_t *req, int status)
{
    (void)status; /* a failed write shows as a worker that never says HELLO */
    s_stdin_feed *f = req->data;
    uv_close((uv_handle_t *)&f->pipe, s_feed_closed);
}

static double s_backoff_s(const rl_driver *d, int restarts)
{
    double b = d->cl->restart_backoff_s;
    for (int i = 1; i < restarts; i++)
        b *= 2;
    return b < d->cl->restart_backoff_max_s ? b : d->cl->restart_backoff_max_s;
}

static const char *s_role(const rl_drv_slot *s) { return s->d->groups[s->group].name; }

/* Restarts slot s now (I/O thread, d->mu held). */
static void s_restart_now(rl_drv_slot *s)
{
    if (s->d->shutting_down || s->d->fatal[0])
        return;
    if (s_spawn(s)) {
        s->state = RL_SLOT_FAILED;
        rl_drv_set_fatal(s->d, "role %s cannot be restored: restart of %s failed: %s", s_role(s),
                         s->label, rl_error_message());
    }
}

static void s_on_restart_timer(uv_timer_t *t)
{
    rl_drv_slot *s = t->data;
    rl_drv_lock(s->d);
    s_restart_now(s);
    rl_drv_unlock(s->d);
}

static void s_schedule_restart(rl_drv_slot *s, const char *why)
{
    rl_driver *d = s->d;
    if (d->shutting_down || s->node->launch == RL_LAUNCH_EXTERNAL)
        return;
    if (s->restarts >= d->cl->restart_max) {
        s->state = RL_SLOT_FAILED;
        rl_drv_set_fatal(d,
                         "role %s cannot be restored: %s %s and was already restarted %d times "
                         "(restart.max_restarts = %d)",
                         s_role(s), s->label, why, s->restarts, d->cl->restart_max);
        return;
    }
    s->restarts++;
    d->total_restarts++;
    double b = s_backoff_s(d, s->restarts);
    rl_log_warn("restarting %s in %.2f s (restart %d of %d)", s->label, b, s->restarts,
                d->cl->restart_max);
    uv_timer_start(&s->restart_timer, s_on_restart_timer, (uint64_t)(b * 1000), 0);
}

/* The worker in slot s is gone (silent, exited, or left). */
void rl_drv_slot_dead(rl_drv_slot *s, const char *why)
{
    if (s->state == RL_SLOT_DOWN || s->state == RL_SLOT_FAILED)
        return;
    rl_log_error("worker %s (pid %ld, node %s) %s", s->label,
                 s->proc_pid ? (long)s->proc_pid : s->worker_pid, s->node->name, why);
    s->state = RL_SLOT_DOWN;
    s->has_id = 0;
    s->token_set = 0; /* nobody may claim the slot with the dead worker's token */
    s->ready_since = 0;
    rl_drv_fail_calls(s, why);
    if (s->proc_running) {
        uv_process_kill(&s->proc, SIGKILL); /* restart follows from the exit callback */
    } else {
        s_schedule_restart(s, why);
    }
}

static void s_on_proc_closed(uv_handle_t *h) { (void)h; }

/* A worker's process ended (status, signo): a restart, a failed role, or
 * nothing at shutdown. */
static void s_exit_classify(rl_drv_slot *s, int64_t status, int signo)
{
    rl_driver *d = s->d;
    char why[96];
    if (signo)
        snprintf(why, sizeof why, "was killed by signal %d", signo);
    else
        snprintf(why, sizeof why, "exited with status %lld", (long long)status);
    if (d->shutting_down) {
        if (status != 0 || signo)
            d->child_failures++;
        rl_log_info("%s (pid %d) %s", s->label, s->proc_pid, why);
        s->state = RL_SLOT_DOWN;
        s->proc_pid = 0;
        return;
    }
    if (status == RL_WORKER_EXIT_USAGE && !signo && !s->hello_seen) {
        /* rl-worker refused its command line (e.g. a role it does not
         * serve): every restart would do the same */
        s->state = RL_SLOT_FAILED;
        s->has_id = 0;
        s->proc_pid = 0;
        rl_drv_fail_calls(s, why);
        rl_drv_set_fatal(d, "role %s cannot start: rl-worker exited with status %d (usage "
                         "error; see its message above)", s_role(s), RL_WORKER_EXIT_USAGE);
        return;
    }
    if (s->state != RL_SLOT_DOWN && s->state != RL_SLOT_FAILED)
        rl_drv_slot_dead(s, why); /* not running any more: this schedules the restart */
    else if (s->state != RL_SLOT_FAILED)
        s_schedule_restart(s, why); /* we killed it after it went silent */
    s->proc_pid = 0;
}

/* How long the driver waits, after a worker that was configuring exited
 * with a failure, for the ERROR it sent before exiting: the exit can reach
 * this loop before the message does, and the role's start must fail with
 * the worker's reason (protocol.c: "role R cannot start: ..."), not as a
 * lost worker to restart. */
#define S_EXIT_GRACE_MS 300

static void s_on_exit_timer(uv_timer_t *t)
{
    rl_drv_slot *s = t->data;
    rl_drv_lock(s->d);
    s_exit_classify(s, s->exit_status, s->exit_signo);
    rl_drv_unlock(s->d);
}

static void s_on_exit_locked(uv_process_t *p, int64_t status, int signo)
{
    rl_drv_slot *s = p->data;
    s->proc_running = 0;
    uv_close((uv_handle_t *)p, s_on_proc_closed);
    if (!s->d->shutting_down && s->state == RL_SLOT_CONFIGURING && (status != 0 || signo)) {
        s->exit_status = status;
        s->exit_signo = signo;
        uv_timer_start(&s->restart_timer, s_on_exit_timer, S_EXIT_GRACE_MS, 0);
        return;
    }
    s_exit_classify(s, status, signo);
}

static void s_on_exit(uv_process_t *p, int64_t status, int signo)
{
    rl_driver *d = ((rl_drv_slot *)p->data)->d;
    rl_drv_lock(d);
    s_on_exit_locked(p, status, signo);
    rl_drv_relays_stop_if_done(d);
    rl_drv_unlock(d);
}

int rl_drv_ssh_argv(const rl_cluster_node *nd, char **argv, char *cmd, size_t cmd_size,
                    char *host, size_t host_size)
{
    int a = 0;
    snprintf(cmd, cmd_size, "%s", nd->ssh_command[0] ? nd->ssh_command : "ssh");
    char *save = NULL;
    for (char *tok = strtok_r(cmd, " ", &save); tok && a < 20; tok = strtok_r(NULL, " ", &save))
        argv[a++] = tok;
    if (nd->ssh_user[0])
        snprintf(host, host_size, "%s@%s", nd->ssh_user, nd->address);
    else
        snprintf(host, host_size, "%s", nd->address);
    argv[a++] = host;
    return a;
}

char **rl_drv_child_env(int drop_cvd, int extra, int *n)
{
    extern char **environ;
    int nenv = 0;
    while (environ[nenv])
        nenv++;
    char **env = calloc((size_t)(nenv + extra + 1), sizeof *env);
    if (!env)
        return NULL;
    int e = 0;
    for (int i = 0; i < nenv; i++)
        if ((strncmp(environ[i], "CUDA_VISIBLE_DEVICES=", 21) != 0 || !drop_cvd) &&
            strncmp(environ[i], "RL_WORKER_TOKEN=", 16) != 0 &&
            strncmp(environ[i], "RL_DRIVER_PID=", 14) != 0 &&
            /* systemd's notification socket is the driver's, not its children's */
            strncmp(environ[i], "NOTIFY_SOCKET=", 14) != 0 &&
            strncmp(environ[i], "WATCHDOG_", 9) != 0)
            env[e++] = environ[i];
    *n = e;
    return env;
}

int rl_drv_spawn(rl_driver *d, uv_process_t *proc, void *data, char **argv, char **env,
                 uv_stream_t *in, uv_exit_cb cb)
{
    uv_process_options_t po;
    memset(&po, 0, sizeof po);
    uv_stdio_container_t stdio[3];
    stdio[0].flags = UV_IGNORE;
    if (in) {
        stdio[0].flags = UV_CREATE_PIPE | UV_READABLE_PIPE;
        stdio[0].data.stream = in;
    }
    stdio[1].flags = UV_INHERIT_FD;
    stdio[1].data.fd = 1;
    stdio[2].flags = UV_INHERIT_FD;
    stdio[2].data.fd = 2;
    po.file = argv[0];
    po.args = argv;
    po.env = env;
    po.exit_cb = cb;
    po.stdio_count = 3;
    po.stdio = stdio;
    memset(proc, 0, sizeof *proc);
    proc->data = data;
    int rc = uv_spawn(&d->loop, proc, &po);
    if (rc != 0)
        uv_close((uv_handle_t *)proc, s_on_proc_closed);
    return rc;
}

static int s_spawn(rl_drv_slot *s)
{
    rl_driver *d = s->d;
    if (!d->opt.worker_binary || !*d->opt.worker_binary)
        return rl_error_set(RL_EINVAL, "cannot start %s on node %s: no rl-worker binary given",
                            s->label, s->node->name);
    char rank[16], hb[16], gpus[256] = "", giveup[32], maxmb[32], http_port[16], window[32];
    snprintf(rank, sizeof rank, "%d", s->rank);
    snprintf(hb, sizeof hb, "%d", d->interval_ms);
    snprintf(giveup, sizeof giveup, "%.3f", d->cl->heartbeat_give_up_s);
    /* the worker waits for our first answer as long as we wait for its
     * HELLO (rl_drv_starting_window_ms) */
    snprintf(window, sizeof window, "%.3f", rl_drv_starting_window_ms(d) / 1000.0);
    snprintf(maxmb, sizeof maxmb, "%lld", (long long)(d->cl->max_message_bytes >> 20));
    snprintf(http_port, sizeof http_port, "%d",
             d->cl->http_worker_port ? d->cl->http_worker_port + (int)(s - d->slots) : 0);
    if (d->cl->http_worker_port && d->cl->http_worker_port + (int)(s - d->slots) > 65535)
        return rl_error_set(RL_ECONFIG, "%s: http.worker_port %d + slot %d is past 65535",
                            d->cl->file, d->cl->http_worker_port, (int)(s - d->slots));
    if (rl_drv_new_token(s))
        return rl_error_wrap(rl_error_code(), "cannot start %s", s->label);
    int ssh = s->node->launch == RL_LAUNCH_SSH;
    /* ranks of this role on this node without cpus: they split its cores */
    int share = rl_cluster_core_share(d->cl, s->pl);
    char share_text[16];
    snprintf(share_text, sizeof share_text, "%d", share);
    for (int i = 0, n = 0; i < s->pl->ngpus; i++)
        n += snprintf(gpus + n, sizeof gpus - (size_t)n, i ? ",%d" : "%d", s->pl->gpus[i]);
    const char *level = d->opt.worker_log_level ? d->opt.worker_log_level : "info";
    char *argv[64];
    int a = 0;
    char remote[4096];
    char sshbuf[RL_CLUSTER_ADDR_MAX];
    char host[RL_CLUSTER_ADDR_MAX + RL_CLUSTER_NAME_MAX + 2];
    if (s->node->launch == RL_LAUNCH_SSH) {
        /* ssh [opts] [user@]host 'CUDA_VISIBLE_DEVICES=.. rl-worker ...' */
        a = rl_drv_ssh_argv(s->node, argv, sshbuf, sizeof sshbuf, host, sizeof host);
        int rn = snprintf(remote, sizeof remote,
                          "%s%s%sexec %s --role %s --rank %d --driver %s --node %s --log-level %s "
                          "--heartbeat-ms %d --job %s --give-up-s %s --start-window-s %s "
                          "--max-message-mb %s --token-stdin",
                          gpus[0] ? "CUDA_VISIBLE_DEVICES=" : "", gpus, gpus[0] ? " " : "",
                          d->opt.worker_binary, s_role(s), s->rank, rl_drv_slot_endpoint(s), s->node->name,
                          level, d->interval_ms, d->job_id, giveup, window, maxmb);
        if (d->driver_key[0] && rn > 0 && (size_t)rn < sizeof remote)
            rn += snprintf(remote + rn, sizeof remote - (size_t)rn, " --cert %s%s%s",
                           d->cl->security_worker_cert,
                           rl_drv_slot_relayed(s) ? "" : " --driver-key ",
                           rl_drv_slot_relayed(s) ? "" : d->driver_key);
        if (d->cl->http_worker_port && rn > 0 && (size_t)rn < sizeof remote)
            rn += snprintf(remote + rn, sizeof remote - (size_t)rn,
                           " --http-port %s --http-bind %s", http_port, d->cl->http_bind);
        if (s->pl->cpus[0] && rn > 0 && (size_t)rn < sizeof remote) /* digits , - only */
            rn += snprintf(remote + rn, sizeof remote - (size_t)rn, " --cpus %s", s->pl->cpus);
        if (share > 1 && rn > 0 && (size_t)rn < sizeof remote)
            rn += snprintf(remote + rn, sizeof remote - (size_t)rn, " --share-cores %d", share);
        if (rn < 0 || (size_t)rn >= sizeof remote)
            return rl_error_set(RL_EINVAL, "cannot start %s: the ssh command is too long",
                                s->label);
        argv[a++] = remote;
    } else {
        argv[a++] = (char *)d->opt.worker_binary;
        argv[a++] = "--role";
        argv[a++] = (char *)s_role(s);
        argv[a++] = "--rank";
        argv[a++] = rank;
        argv[a++] = "--driver";
        argv[a++] = (char *)rl_drv_slot_endpoint(s);
        argv[a++] = "--node";
        argv[a++] = (char *)s->node->name;
        argv[a++] = "--log-level";
        argv[a++] = (char *)level;
        argv[a++] = "--heartbeat-ms";
        argv[a++] = hb;
        argv[a++] = "--job";
        argv[a++] = d->job_id;
        argv[a++] = "--give-up-s";
        argv[a++] = giveup;
        argv[a++] = "--start-window-s";
        argv[a++] = window;
        argv[a++] = "--max-message-mb";
        argv[a++] = maxmb;
        if (d->driver_key[0]) { /* paths and public keys only: no secret in argv */
            argv[a++] = "--cert";
            argv[a++] = (char *)d->cl->security_worker_cert;
            if (!rl_drv_slot_relayed(s)) { /* behind a relay: its private Unix socket */
                argv[a++] = "--driver-key";
                argv[a++] = d->driver_key;
            }
        }
        if (d->cl->http_worker_port) {
            argv[a++] = "--http-port";
            argv[a++] = http_port;
            argv[a++] = "--http-bind";
            argv[a++] = (char *)d->cl->http_bind;
        }
        if (s->pl->cpus[0]) {
            argv[a++] = "--cpus";
            argv[a++] = (char *)s->pl->cpus;
        }
        if (share > 1) {
            argv[a++] = "--share-cores";
            argv[a++] = share_text;
        }
    }
    argv[a] = NULL;

    /* Environment: ours, plus CUDA_VISIBLE_DEVICES for local GPU placements. */
    int e = 0;
    char **env = rl_drv_child_env(gpus[0] != 0, 3, &e);
    s_stdin_feed *feed = ssh ? calloc(1, sizeof *feed) : NULL;
    if (!env || (ssh && !feed)) {
        free(env);
        free(feed);
        return rl_error_set(RL_ENOMEM, "cannot start %s: out of memory", s->label);
    }
    char cvd[300], tok[RL_DRV_TOKEN_HEX + 32], ppid[48];
    if (gpus[0] && s->node->launch == RL_LAUNCH_LOCAL) {
        snprintf(cvd, sizeof cvd, "CUDA_VISIBLE_DEVICES=%s", gpus);
        env[e++] = cvd;
    }
    if (!ssh) { /* the environment is readable by this user only, unlike argv */
        snprintf(tok, sizeof tok, "RL_WORKER_TOKEN=%s", s->token);
        env[e++] = tok;
        /* our child: it asks for a signal when we die (PR_SET_PDEATHSIG), so
         * its ports are free for the next driver's workers at once */
        snprintf(ppid, sizeof ppid, "RL_DRIVER_PID=%ld", (long)getpid());
        env[e++] = ppid;
    }
    env[e] = NULL;
    if (feed) {
        uv_pipe_init(&d->loop, &feed->pipe, 0);
        feed->pipe.data = feed;
    }
    int rc = rl_drv_spawn(d, &s->proc, s, argv, env, feed ? (uv_stream_t *)&feed->pipe : NULL,
                          s_on_exit);
    memset(tok, 0, sizeof tok);
    free(env);
    if (rc != 0) {
        if (feed)
            uv_close((uv_handle_t *)&feed->pipe, s_feed_closed);
        return rl_error_set(RL_EIO, "cannot start %s on node %s: %s: %s", s->label, s->node->name,
                            argv[0], uv_strerror(rc));
    }
    if (feed) {
        snprintf(feed->buf, sizeof feed->buf, "%s\n", s->token);
        uv_buf_t b = uv_buf_init(feed->buf, (unsigned)strlen(feed->buf));
        feed->req.data = feed;
        if (uv_write(&feed->req, (uv_stream_t *)&feed->pipe, &b, 1, s_feed_written) != 0)
            uv_close((uv_handle_t *)&feed->pipe, s_feed_closed);
    }
    s->proc_running = 1;
    s->proc_pid = s->proc.pid;
    s->hello_seen = 0;
    s->state = RL_SLOT_STARTING;
    s->last_seen = uv_now(&d->loop);
    rl_log_info("started %s (pid %d, %s on %s)", s->label, s->proc_pid,
                rl_launch_mode_name(s->node->launch), s->node->name);
    return RL_OK;
}

/* I/O thread: launches the next batch of local/ssh slots (on rl_driver_start). */
int rl_drv_launch_some(rl_driver *d)
{
    int spawned = 0;
    if (d->launch_next == 0 && rl_drv_relays_launch(d)) { /* before the workers */
        snprintf(d->start_error, sizeof d->start_error, "%s", rl_error_message());
        return 1;
    }
    while (d->launch_next < d->n_slots && spawned < RL_DRV_LAUNCH_BATCH) {
        rl_drv_slot *s = &d->slots[d->launch_next++];
        if (s->node->launch == RL_LAUNCH_EXTERNAL)
            continue;
        if (s_spawn(s)) {
            snprintf(d->start_error, sizeof d->start_error, "%s", rl_error_message());
            return 1;
        }
        spawned++;
    }
    return d->launch_next >= d->n_slots;
}

uint64_t rl_drv_starting_window_ms(const rl_driver *d)
{
    return 10 * (uint64_t)d->interval_ms * (uint64_t)d->liveness + 10000;
}

static void s_on_heartbeat_locked(rl_driver *d)
{
    uint64_t now = uv_now(&d->loop);
    d->last_hb_ms = uv_hrtime() / 1000000;
    if (!d->fatal[0]) /* the I/O loop runs and the job can go on */
        rl_sd_notify("WATCHDOG=1");
    uint64_t limit = (uint64_t)d->interval_ms * (uint64_t)d->liveness;
    for (int i = 0; i < d->n_slots; i++) {
        rl_drv_slot *s = &d->slots[i];
        if (s->state != RL_SLOT_READY && s->state != RL_SLOT_CONFIGURING && s->state != RL_SLOT_STARTING)
            continue;
        /* A starting process gets a generous window to say HELLO. */
        uint64_t window = s->state == RL_SLOT_STARTING ? rl_drv_starting_window_ms(d) : limit;
        if (now - s->last_seen > window) {
            char why[96];
            snprintf(why, sizeof why, "missed heartbeats for %.1f s",
                     (double)(now - s->last_seen) / 1000.0);
            if (s->state == RL_SLOT_STARTING && !s->proc_running)
                continue; /* external: just not there yet */
            rl_drv_slot_dead(s, why);
            continue;
        }
        /* last_sent may be a little ahead of the loop's cached clock (an API
         * thread's send): compare without unsigned wrap-around */
        if (s->has_id && now >= s->last_sent + (uint64_t)d->interval_ms) {
            Rl__Envelope env;
            Rl__Heartbeat hb;
            rl_msg_heartbeat(&env, &hb, uv_hrtime());
            rl_drv_send(s, &env, NULL);
        }
    }
}

void rl_drv_on_heartbeat(uv_timer_t *t)
{
    rl_driver *d = t->data;
    rl_drv_lock(d);
    s_on_heartbeat_locked(d);
    rl_drv_unlock(d);
}

typedef struct {
    rl_driver *d;
    rl_group *g; /* NULL: every slot */
} s_ready_arg;

static int s_all_ready(void *arg)
{
    s_ready_arg *a = arg;
    rl_driver *d = a->d;
    for (int i = 0; i < d->n_slots; i++)
        if ((!a->g || &d->groups[d->slots[i].group] == a->g) && d->slots[i].state != RL_SLOT_READY)
            return 0;
    return 1;
}

/* Caller holds d->mu. */
int rl_drv_wait_ready(rl_driver *d, rl_group *g, int timeout_ms)
{
    s_ready_arg a = {d, g};
    int rc = rl_drv_wait_until(d, s_all_ready, &a, timeout_ms, 0);
    if (rc != RL_ETIMEOUT)
        return rc;
    char list[1024];
    int n = 0, missing = 0;
    for (int i = 0; i < d->n_slots; i++) {
        rl_drv_slot *s = &d->slots[i];
        if ((g && &d->groups[s->group] != g) || s->state == RL_SLOT_READY)
            continue;
        missing++;
        if (n < (int)sizeof list - 100)
            n += snprintf(list + n, sizeof list - (size_t)n, "%s%s (node %s, %s)", n ? ", " : "",
                          s->label, s->node->name, rl_launch_mode_name(s->node->launch));
    }
    return rl_error_set(RL_ETIMEOUT, "timed out after %.1f s waiting for %d worker%s: %s",
                        timeout_ms / 1000.0, missing, missing == 1 ? "" : "s", list);
}
