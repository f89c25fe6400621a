/* relays.c — the driver's node relays (see driver_internal.h and
 * rlrt/runtime/relay.h): one `rl-worker --relay` per node with `relay:
 * true` that holds a started slot, started before the node's workers (they
 * connect to it), started again when it exits while the job runs, and
 * stopped after the workers at shutdown. */
#include "common/runtime/driver_internal.h"

#include "rlrt/error.h"
#include "rlrt/log.h"
#include "rlrt/runtime/relay.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static rl_drv_relay *s_of_node(const rl_driver *d, const rl_cluster_node *node)
{
    for (int i = 0; i < d->n_relays; i++)
        if (d->relays[i].node == node)
            return &d->relays[i];
    return NULL;
}

int rl_drv_relays_build(rl_driver *d)
{
    for (int i = 0; i < d->n_slots; i++) {
        const rl_cluster_node *nd = d->slots[i].node;
        if (!nd->relay || nd->launch == RL_LAUNCH_EXTERNAL || s_of_node(d, nd))
            continue;
        rl_drv_relay *r = realloc(d->relays, sizeof *r * (size_t)(d->n_relays + 1));
        if (!r)
            return rl_error_set(RL_ENOMEM, "driver: out of memory");
        d->relays = r;
        r = &d->relays[d->n_relays++];
        memset(r, 0, sizeof *r);
        r->d = d;
        r->node = nd;
        rl_relay_endpoint(d->job_id, nd->name, d->driver_key[0] != 0, r->endpoint,
                          sizeof r->endpoint);
    }
    return RL_OK;
}

void rl_drv_relays_init_handles(rl_driver *d)
{
    for (int i = 0; i < d->n_relays; i++) {
        uv_timer_init(&d->loop, &d->relays[i].timer);
        d->relays[i].timer.data = &d->relays[i];
    }
}

/* Where a process the driver starts on `node` reaches the driver. */
static const char *s_driver_endpoint(const rl_driver *d, const rl_cluster_node *node)
{
    return node->launch == RL_LAUNCH_LOCAL && d->local_endpoint[0] ? d->local_endpoint
                                                                    : d->endpoint;
}

const char *rl_drv_slot_endpoint(const rl_drv_slot *s)
{
    const rl_drv_relay *r = s_of_node(s->d, s->node);
    return r ? r->endpoint : s_driver_endpoint(s->d, s->node);
}

int rl_drv_slot_relayed(const rl_drv_slot *s) { return s_of_node(s->d, s->node) != NULL; }

static int s_spawn(rl_drv_relay *r);

static void s_on_timer(uv_timer_t *t)
{
    rl_drv_relay *r = t->data;
    rl_drv_lock(r->d);
    if (!r->d->shutting_down && !r->d->fatal[0] && !r->proc_running && s_spawn(r))
        rl_drv_set_fatal(r->d, "the relay of node %s cannot be started again: %s", r->node->name,
                         rl_error_message());
    rl_drv_unlock(r->d);
}

static void s_on_exit(uv_process_t *p, int64_t status, int signo)
{
    rl_drv_relay *r = p->data;
    rl_driver *d = r->d;
    rl_drv_lock(d);
    r->proc_running = 0;
    uv_close((uv_handle_t *)p, NULL);
    if (!d->shutting_down && !d->fatal[0]) {
        r->restarts++;
        if (r->restarts > d->cl->restart_max) {
            rl_drv_set_fatal(d, "the relay of node %s exited %d times (status %lld, signal %d); "
                             "restart.max_restarts is %d", r->node->name, r->restarts,
                             (long long)status, signo, d->cl->restart_max);
        } else {
            /* its workers reconnect to the new one by themselves (ZeroMQ);
             * the driver sees them as reconnected (calls in flight fail) */
            uint64_t ms = 100u << (r->restarts < 6 ? r->restarts - 1 : 5);
            rl_log_warn("the relay of node %s exited (status %lld, signal %d): starting it "
                        "again in %llu ms (%d of %d)", r->node->name, (long long)status, signo,
                        (unsigned long long)ms, r->restarts, d->cl->restart_max);
            uv_timer_start(&r->timer, s_on_timer, ms, 0);
        }
    }
    rl_drv_unlock(d);
}

static int s_spawn(rl_drv_relay *r)
{
    rl_driver *d = r->d;
    const rl_cluster_node *nd = r->node;
    if (!d->opt.worker_binary || !*d->opt.worker_binary)
        return rl_error_set(RL_EINVAL, "cannot start the relay of node %s: no rl-worker binary "
                            "given", nd->name);
    char hold[16], maxmb[32], giveup[32];
    snprintf(hold, sizeof hold, "%d", nd->relay_hold_ms);
    /* an orphan on an ssh node leaves after this long without us (a
     * worker's give-up, but never under a minute: its workers may all be
     * restarting, and then nothing of ours passes through it) */
    double g = 10 * d->cl->heartbeat_give_up_s;
    snprintf(giveup, sizeof giveup, "%.3f", g > 60 ? g : 60);
    snprintf(maxmb, sizeof maxmb, "%lld", (long long)(d->cl->max_message_bytes >> 20));
    const char *level = d->opt.worker_log_level ? d->opt.worker_log_level : "info";
    char *argv[40];
    int a = 0;
    char sshbuf[RL_CLUSTER_ADDR_MAX], host[RL_CLUSTER_ADDR_MAX + RL_CLUSTER_NAME_MAX + 2];
    char remote[2048];
    if (nd->launch == RL_LAUNCH_SSH) {
        a = rl_drv_ssh_argv(nd, argv, sshbuf, sizeof sshbuf, host, sizeof host);
        int n = snprintf(remote, sizeof remote,
                         "exec %s --relay --driver %s --bind %s --node %s --relay-hold-ms %s "
                         "--log-level %s --max-message-mb %s --give-up-s %s",
                         d->opt.worker_binary, s_driver_endpoint(d, nd), r->endpoint, nd->name,
                         hold, level, maxmb, giveup);
        if (d->driver_key[0] && n > 0 && (size_t)n < sizeof remote)
            n += snprintf(remote + n, sizeof remote - (size_t)n, " --cert %s --driver-key %s",
                          d->cl->security_worker_cert, d->driver_key);
        if (n < 0 || (size_t)n >= sizeof remote)
            return rl_error_set(RL_EINVAL, "the relay of node %s: the ssh command is too long",
                                nd->name);
        argv[a++] = remote;
    } else {
        const char *args[] = {d->opt.worker_binary, "--relay", "--driver", s_driver_endpoint(d, nd),
                              "--bind",
                              r->endpoint, "--node", nd->name, "--relay-hold-ms", hold,
                              "--log-level", level, "--max-message-mb", maxmb, "--give-up-s",
                              giveup};
        for (size_t i = 0; i < sizeof args / sizeof *args; i++)
            argv[a++] = (char *)args[i];
        if (d->driver_key[0]) { /* paths and public keys only */
            argv[a++] = "--cert";
            argv[a++] = (char *)d->cl->security_worker_cert;
            argv[a++] = "--driver-key";
            argv[a++] = d->driver_key;
        }
    }
    argv[a] = NULL;
    /* our environment, and our pid: a local relay leaves when we die */
    int e = 0;
    char **env = rl_drv_child_env(0, 1, &e);
    if (!env)
        return rl_error_set(RL_ENOMEM, "cannot start the relay of node %s: out of memory",
                            nd->name);
    char ppid[48];
    if (nd->launch == RL_LAUNCH_LOCAL) {
        snprintf(ppid, sizeof ppid, "RL_DRIVER_PID=%ld", (long)getpid());
        env[e++] = ppid;
    }
    env[e] = NULL;
    int rc = rl_drv_spawn(d, &r->proc, r, argv, env, NULL, s_on_exit);
    free(env);
    if (rc != 0)
        return rl_error_set(RL_EIO, "cannot start the relay of node %s: %s: %s", nd->name,
                            argv[0], uv_strerror(rc));
    r->proc_running = 1;
    rl_log_info("started the relay of node %s (pid %d, %s): its workers connect to %s",
                nd->name, r->proc.pid, rl_launch_mode_name(nd->launch), r->endpoint);
    return RL_OK;
}

int rl_drv_relays_launch(rl_driver *d)
{
    for (int i = 0; i < d->n_relays; i++)
        if (!d->relays[i].proc_running) {
            int rc = s_spawn(&d->relays[i]);
            if (rc)
                return rc;
        }
    return RL_OK;
}

void rl_drv_relays_signal(rl_driver *d, int signo)
{
    for (int i = 0; i < d->n_relays; i++) {
        uv_timer_stop(&d->relays[i].timer);
        if (d->relays[i].proc_running)
            uv_process_kill(&d->relays[i].proc, signo);
    }
}

void rl_drv_relays_stop_if_done(rl_driver *d)
{
    if (!d->shutting_down || d->shutdown_requested == 1 || !rl_drv_relays_running(d))
        return;
    for (int i = 0; i < d->n_slots; i++)
        if (d->slots[i].proc_running)
            return;
    for (int i = 0; i < d->n_relays; i++) {
        uv_timer_stop(&d->relays[i].timer);
        if (d->relays[i].proc_running && !d->relays[i].stopping) {
            d->relays[i].stopping = 1;
            uv_process_kill(&d->relays[i].proc, SIGTERM);
        }
    }
}

int rl_drv_relays_running(const rl_driver *d)
{
    int n = 0;
    for (int i = 0; i < d->n_relays; i++)
        n += d->relays[i].proc_running;
    return n;
}

void rl_drv_relays_free(rl_driver *d)
{
    free(d->relays);
    d->relays = NULL;
    d->n_relays = 0;
}

/* ---- a relay started again ------------------------------------------------------------- */

/* The node part of a relay identity "\x01relay:NODE:PID.NONCE\x01"
 * (relay.c); the whole identity for any other form. */
static void s_node_of(const unsigned char *id, size_t len, const unsigned char **node, size_t *n)
{
    *node = id;
    *n = len;
    if (len > 8 && memcmp(id + 1, "relay:", 6) == 0) {
        const unsigned char *p = id + 7, *end = id + len - 1, *colon = NULL;
        for (const unsigned char *q = p; q < end; q++)
            if (*q == ':')
                colon = q;
        if (colon) {
            *node = p;
            *n = (size_t)(colon - p);
        }
    }
}

void rl_drv_relay_moved(rl_driver *d, const unsigned char *old, size_t old_len,
                        const unsigned char *now_id, size_t now_len, size_t now_relay)
{
    size_t old_relay = rl_msg_relay_part(old, old_len);
    if (!old_relay || !now_relay ||
        (old_relay == now_relay && memcmp(old, now_id, old_relay) == 0))
        return;
    const unsigned char *n1, *n2;
    size_t l1, l2;
    s_node_of(old, old_relay, &n1, &l1);
    s_node_of(now_id, now_relay, &n2, &l2);
    if (l1 != l2 || memcmp(n1, n2, l1) != 0)
        return; /* a worker that moved to another node's relay: nothing about this one */
    unsigned char gone[RL_MSG_RELAY_ID_MAX]; /* old is a slot's id, changed below */
    memcpy(gone, old, old_relay);
    int printable = 1;
    for (size_t k = 0; k < l2; k++)
        printable &= n2[k] > ' ' && n2[k] < 127;
    rl_log_warn("node %.*s: its relay was started again", printable ? (int)l2 : 1,
                printable ? (const char *)n2 : "?");
    const unsigned char *sender = now_id + now_relay;
    size_t sender_len = now_len - now_relay;
    for (int i = 0; i < d->n_slots; i++) {
        rl_drv_slot *s = &d->slots[i];
        if (!s->has_id || s->id_len <= old_relay || memcmp(s->id, gone, old_relay) != 0)
            continue;
        size_t wl = s->id_len - old_relay;
        if (wl == sender_len && memcmp(s->id + old_relay, sender, wl) == 0)
            continue; /* the worker that said HELLO: its slot takes the new identity now */
        rl_log_warn("%s: the relay of its node was started again: its worker reconnects",
                    s->label);
        if (now_relay + wl <= RL_MSG_ID_MAX) { /* the worker, through the new relay */
            unsigned char to[RL_MSG_ID_MAX];
            memcpy(to, now_id, now_relay);
            memcpy(to + now_relay, s->id + old_relay, wl);
            rl_drv_send_disconnect(d, to, now_relay + wl, "the relay of this node was started "
                                   "again: send HELLO");
        }
        s->has_id = 0;
        rl_drv_fail_calls(s, "lost its node's relay");
        if (s->state == RL_SLOT_READY)
            s->state = RL_SLOT_CONFIGURING; /* claimed: its HELLO proves the token */
        s->ready_since = 0;
        s->last_seen = uv_now(&d->loop);
    }
}
