/* protocol.c — the driver's side of the control plane: sending, HELLO →
 * CONFIGURE, READY, REPLY, ERROR, DISCONNECT, heartbeats and SHUTDOWN (see
 * driver_internal.h and proto/rl.proto). */
#include "common/runtime/driver_internal.h"

#include "rlrt/error.h"
#include "rlrt/log.h"
#include "common/runtime/value.h"
#include "rlrt/wire.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int rl_drv_send_to(rl_driver *d, const unsigned char *id, size_t id_len, Rl__Envelope *env,
                     const rl_dataproto *payload)
{
    env->seq = ++d->seq;
    int rc = rl_msg_send(d->router, id, id_len, env, payload);
    if (rc == RL_OK) {
        d->msgs_out++;
        d->bytes_out += (int64_t)rl_msg_size(env, payload);
    }
    if (rl_drv_on_io_thread())
        rl_zuv_kick(d->watch);
    else if (d->send_batch)
        d->send_check = 1; /* once, at rl_drv_send_batch_end */
    else if (rl_zuv_pending(d->router))
        rl_drv_wake(d); /* the send took an edge: the loop drains (s_on_wake) */
    return rc;
}

void rl_drv_send_batch_begin(rl_driver *d)
{
    if (!rl_drv_on_io_thread())
        d->send_batch++;
}

void rl_drv_send_batch_end(rl_driver *d)
{
    if (rl_drv_on_io_thread() || !d->send_batch || --d->send_batch)
        return;
    /* input that any of the sends pulled in is still pending: one check */
    if (d->send_check && rl_zuv_pending(d->router))
        rl_drv_wake(d);
    d->send_check = 0;
}

int rl_drv_send(rl_drv_slot *s, Rl__Envelope *env, const rl_dataproto *payload)
{
    if (!s->has_id)
        return rl_error_set(RL_ESTATE, "%s is not connected", s->label);
    int rc = rl_drv_send_to(s->d, s->id, s->id_len, env, payload);
    if (rc == RL_OK)
        s->last_sent = rl_drv_now_ms(s->d);
    return rc;
}

void rl_drv_send_disconnect(rl_driver *d, const unsigned char *id, size_t id_len, const char *why)
{
    Rl__Envelope env = RL__ENVELOPE__INIT;
    Rl__Disconnect dis = RL__DISCONNECT__INIT;
    dis.reason = (char *)why;
    env.body_case = RL__ENVELOPE__BODY_DISCONNECT;
    env.disconnect = &dis;
    rl_drv_send_to(d, id, id_len, &env, NULL);
}

void rl_drv_send_error_to(rl_driver *d, const unsigned char *id, size_t id_len, int code,
                            const char *message)
{
    Rl__Envelope env = RL__ENVELOPE__INIT;
    Rl__Error err = RL__ERROR__INIT;
    err.code = code;
    err.message = (char *)message;
    env.body_case = RL__ENVELOPE__BODY_ERROR;
    env.error = &err;
    rl_drv_send_to(d, id, id_len, &env, NULL);
}

int rl_drv_send_call(rl_drv_slot *s, rl_drv_subcall *c)
{
    Rl__Envelope env = RL__ENVELOPE__INIT;
    Rl__Call call = RL__CALL__INIT;
    call.call_id = c->call_id;
    call.method = c->f->method;
    call.has_payload = c->payload != NULL;
    env.body_case = RL__ENVELOPE__BODY_CALL;
    env.call = &call;
    int rc = rl_drv_send(s, &env, c->payload);
    if (rc == RL_OK) {
        c->sent = 1;
        c->attempts++;
        /* frames hold their own references; a retry-safe call keeps its
         * payload (a view: no copy) until answered, to be sent again */
        if (!(s->d->cl->restart_call_retries > 0 && rl_drv_retry_safe(s, c->f->method))) {
            rl_dataproto_free(c->payload);
            c->payload = NULL;
        }
    }
    return rc;
}

static int s_id_is(const rl_drv_slot *s, const unsigned char *id, size_t len)
{
    return s->has_id && s->id_len == len && memcmp(s->id, id, len) == 0;
}

/* The slot whose worker has identity id. A worker names its connection
 * "ROLE/RANK#PID.GEN" (worker.c): that names the one slot to compare, so
 * a message costs O(groups), not O(slots) — a scan per message made every
 * call over N workers O(N^2). The name is the peer's claim: it is only a
 * hint, checked against the identity the slot holds, and anything else
 * falls back to the scan. */
static rl_drv_slot *s_slot_by_id(rl_driver *d, const unsigned char *id, size_t len)
{
    size_t off = rl_msg_relay_part(id, len); /* behind a relay: the worker's part */
    const unsigned char *w = id + off;
    size_t wlen = len - off;
    const unsigned char *slash = memchr(w, '/', wlen);
    if (slash && slash > w) {
        size_t rl = (size_t)(slash - w);
        long rank = 0;
        size_t i = rl + 1;
        for (; i < wlen && i < rl + 8 && w[i] >= '0' && w[i] <= '9'; i++)
            rank = rank * 10 + (w[i] - '0');
        if (i > rl + 1 && i < wlen && w[i] == '#') {
            for (int g = 0; g < d->n_groups; g++) {
                const rl_group *gr = &d->groups[g];
                if (rank < gr->size && strlen(gr->name) == rl && memcmp(gr->name, w, rl) == 0 &&
                    s_id_is(gr->ranks[rank], id, len))
                    return gr->ranks[rank];
            }
        }
    }
    for (int i = 0; i < d->n_slots; i++) {
        rl_drv_slot *s = &d->slots[i];
        if (s->has_id && s->id_len == len && memcmp(s->id, id, len) == 0)
            return s;
    }
    return NULL;
}

/* CONFIGURE answers HELLO: the job tree as JSON with its locations,
 * heartbeat settings, the slot's place in its group and whether the test
 * methods are served. */
static void s_send_configure(rl_drv_slot *s)
{
    rl_driver *d = s->d;
    rl_group *g = &d->groups[s->group];
    json_t *extra = json_pack("{s:i, s:i, s:s, s:b}", "world_size", g->size, "rank", s->rank,
                              "driver_endpoint", d->endpoint, "test_methods",
                              d->opt.test_methods != 0);
    if (extra && d->n_authorized) {
        /* the job's worker keys: a worker's own CURVE servers (data and
         * weight channels, collectives) admit exactly these */
        json_t *keys = json_array();
        for (int i = 0; keys && i < d->n_authorized; i++)
            json_array_append_new(keys, json_string(d->authorized[i]));
        if (!keys || json_object_set_new(extra, "authorized_keys", keys)) {
            json_decref(extra);
            extra = NULL;
        }
    }
    Rl__Value *extra_v = extra ? rl_value_from_json(extra) : NULL;
    json_decref(extra);
    if (!extra_v) {
        /* the worker times out waiting and is restarted; say why */
        rl_log_error("CONFIGURE for %s: out of memory", s->label);
        return;
    }
    Rl__Envelope env = RL__ENVELOPE__INIT;
    Rl__Configure c = RL__CONFIGURE__INIT;
    /* the whole job tree: a role reads its own `<role>.*` subtree and shared
     * sections such as `model.*`; with the locations its checks can name
     * job.yaml:line:col */
    c.config.data = (uint8_t *)(d->config_json ? d->config_json : "{}");
    c.config.len = strlen((const char *)c.config.data);
    if (d->locations_json) {
        c.locations.data = (uint8_t *)d->locations_json;
        c.locations.len = strlen(d->locations_json);
    }
    c.config_format = "json";
    c.heartbeat_ms = (uint32_t)d->interval_ms;
    c.liveness = (uint32_t)d->liveness;
    c.extra = extra_v;
    c.job_id = d->job_id;
    if (s->kx_pending) { /* this CONFIGURE gives the slot: the driver's half */
        c.kx_public.data = s->kx_public;
        c.kx_public.len = sizeof s->kx_public;
    }
    c.give_up_ms = (uint32_t)(d->cl->heartbeat_give_up_s * 1000);
    c.max_message_bytes = (uint64_t)d->cl->max_message_bytes;
    env.body_case = RL__ENVELOPE__BODY_CONFIGURE;
    env.configure = &c;
    if (rl_drv_send(s, &env, NULL))
        rl_log_error("CONFIGURE for %s: %s", s->label, rl_error_message());
    s->kx_pending = 0;
    rl_value_free(extra_v);
}

/* CHALLENGE: a fresh nonce for this HELLO's peer, slot and epoch. */
static void s_send_challenge(rl_drv_slot *s, const unsigned char *id, size_t id_len)
{
    rl_driver *d = s->d;
    uint8_t nonce[RL_HS_NONCE_BYTES];
    rl_hs_challenge(&d->hs, uv_hrtime() / 1000000, (uint32_t)(s - d->slots), s->hello_epoch, id,
                    id_len, nonce);
    Rl__Envelope env = RL__ENVELOPE__INIT;
    Rl__Challenge ch = RL__CHALLENGE__INIT;
    ch.nonce.data = nonce;
    ch.nonce.len = sizeof nonce;
    env.body_case = RL__ENVELOPE__BODY_CHALLENGE;
    env.challenge = &ch;
    rl_drv_send_to(d, id, id_len, &env, NULL);
}

/* HELLO: every field is checked against the slots of this job before it is
 * used; anything else is refused with ERROR + DISCONNECT. A refusal never
 * tells the caller anything about the worker that holds a slot. A HELLO for
 * a held slot (spawned, or claimed by an external worker) gets a CHALLENGE
 * and must come again with a proof of the slot's token
 * (common/runtime/handshake.h); a free external slot is claimed by a key
 * exchange. */
static void s_on_hello(rl_driver *d, rl_msg *m)
{
    const Rl__Hello *h = m->env->hello;
    const char *role_name = h->role ? h->role : "";
    const char *node = h->node ? h->node : "";
    const char *job = h->job_id ? h->job_id : "";
    char why[512];
    if (job[0] && strcmp(job, d->job_id) != 0) {
        /* an orphan of an earlier driver on this port, or a stranger */
        snprintf(why, sizeof why, "refused: this worker belongs to job %.40s, not to job %s "
                 "(an earlier driver's worker must exit)", job, d->job_id);
        goto refuse;
    }
    int role = rl_cluster_role_index(d->cl, role_name);
    if (role < 0) {
        snprintf(why, sizeof why, "refused: %s has no role '%.64s'", d->cl->file, role_name);
        goto refuse;
    }
    if (d->group_of_role[role] < 0) {
        snprintf(why, sizeof why, "refused: role %s of %s is not started by this job", role_name,
                 d->cl->file);
        goto refuse;
    }
    rl_group *g = &d->groups[d->group_of_role[role]];
    if (h->rank >= (uint32_t)g->size) { /* unsigned: a rank >= 2^31 is refused too */
        snprintf(why, sizeof why, "refused: no slot %s/%u in %s (%s has %d rank%s)", role_name,
                 h->rank, d->cl->file, role_name, g->size, g->size == 1 ? "" : "s");
        goto refuse;
    }
    if (m->id_len == 0 || m->id_len > sizeof ((rl_drv_slot *)0)->id) {
        snprintf(why, sizeof why, "refused: bad peer identity (%zu bytes)", m->id_len);
        goto refuse;
    }
    rl_drv_slot *s = g->ranks[h->rank];
    if (s->state == RL_SLOT_FAILED) {
        snprintf(why, sizeof why, "refused: %s was given up", s->label);
        goto refuse;
    }
    int external = s->node->launch == RL_LAUNCH_EXTERNAL;
    int claimed = !external || s->state == RL_SLOT_CONFIGURING || s->state == RL_SLOT_READY;
    const char *holder = external ? "held by a connected worker" : "started by this driver";
    if (claimed && !h->proof.len && !h->challenge.len) {
        if (!s->token_set) { /* a spawned slot between its worker's death and restart */
            snprintf(why, sizeof why, "refused: %s is %s and has no worker now", s->label,
                     holder);
            goto refuse;
        }
        s_send_challenge(s, m->id, m->id_len); /* prove the token: HELLO again */
        return;
    }
    /* the worker proves the token over its own identity; behind a relay
     * the driver sees the relay's before it (msg.h) */
    const unsigned char *peer = m->id + m->peer_off;
    size_t peer_len = m->id_len - m->peer_off;
    if (claimed) {
        /* a replayed HELLO answers a challenge that is spent (the epoch moved
         * on when it was accepted) or was made for another peer */
        uint64_t now_ms = uv_hrtime() / 1000000;
        if (rl_hs_challenge_check(&d->hs, h->challenge.data, h->challenge.len, now_ms,
                                  (uint32_t)(s - d->slots), s->hello_epoch, m->id, m->id_len,
                                  RL_HS_CHALLENGE_MAX_AGE_MS)) {
            /* The peer this slot just accepted answering a second challenge
             * of the epoch it spent: a worker that timed out waiting for us
             * (a driver slow to answer under load) sent HELLO twice and got
             * two challenges. Its first answer was accepted; this one is a
             * duplicate to drop, not a stranger to refuse. */
            int same_peer = s->has_id && s->id_len == m->id_len &&
                            memcmp(s->id, m->id, m->id_len) == 0 && s->hello_epoch > 0 &&
                            (s->state == RL_SLOT_CONFIGURING || s->state == RL_SLOT_READY);
            if (same_peer &&
                rl_hs_challenge_check(&d->hs, h->challenge.data, h->challenge.len, now_ms,
                                      (uint32_t)(s - d->slots), s->hello_epoch - 1, m->id,
                                      m->id_len, RL_HS_CHALLENGE_MAX_AGE_MS) == RL_OK &&
                s->token_set &&
                rl_hs_proof_ok(s->token, h->challenge.data, h->challenge.len, job, role_name,
                               h->rank, peer, peer_len, h->proof.data, h->proof.len)) {
                rl_log_debug("%s: a second answer to a spent challenge; dropped", s->label);
                return;
            }
            snprintf(why, sizeof why, "refused: %s is %s; this HELLO's proof of the slot's "
                     "token is void: %s", s->label, holder, rl_error_message());
            goto refuse;
        }
        if (!s->token_set ||
            !rl_hs_proof_ok(s->token, h->challenge.data, h->challenge.len, job, role_name,
                            h->rank, peer, peer_len, h->proof.data, h->proof.len)) {
            snprintf(why, sizeof why, "refused: %s is %s; this HELLO's proof of the slot's "
                     "token is wrong", s->label, holder);
            goto refuse;
        }
        s->hello_epoch++; /* the challenge is spent */
    }
    int same_id = s->has_id && s->id_len == m->id_len && memcmp(s->id, m->id, m->id_len) == 0;
    if (s->has_id && !same_id && (s->state == RL_SLOT_READY || s->state == RL_SLOT_CONFIGURING)) {
        /* Paranoid Pirate: the same worker (it proved the token) lost us and
         * reconnected. Calls sent on the old connection are lost (the worker
         * drops their results); retry-safe ones are sent again. */
        rl_log_warn("%s (pid %u) reconnected", s->label, h->pid);
        /* through another relay of its node, having proved its token: that
         * node's relay was started again (relays.c) */
        rl_drv_relay_moved(d, s->id, s->id_len, m->id, m->id_len, m->peer_off);
        rl_drv_fail_calls(s, "reconnected");
    }
    if (!claimed) { /* an external worker claims the slot: agree its token */
        if (rl_hs_kx_driver(h->kx_public.data, h->kx_public.len, s->kx_public, s->token)) {
            snprintf(why, sizeof why, "refused: %s is free, but the HELLO claiming it: %s",
                     s->label, rl_error_message());
            goto refuse;
        }
        s->token_set = 1;
        s->hello_epoch++;
        s->kx_pending = 1;
    }
    memcpy(s->id, m->id, m->id_len);
    s->id_len = m->id_len;
    s->has_id = 1;
    s->hello_seen = 1;
    s->worker_pid = (long)h->pid;
    snprintf(s->node_name, sizeof s->node_name, "%.63s", node);
    s->state = RL_SLOT_CONFIGURING;
    s->ready_since = 0;
    s->last_seen = uv_now(&d->loop);
    rl_log_debug("HELLO from %s (pid %u, node %.64s)", s->label, h->pid, node);
    s_send_configure(s);
    return;
refuse:
    d->refused++;
    {
        long dropped = 0;
        char idbuf[64];
        if (rl_net_ratelimit_allow(&d->log_limit, &dropped))
            rl_log_error("HELLO from peer %s as %.64s/%u (pid %u on %.64s): %s%s",
                         rl_msg_id_str(m->id, m->id_len < 16 ? m->id_len : 16, idbuf, sizeof idbuf),
                         role_name, h->rank, h->pid, node, why,
                         dropped ? " (more refusals were not logged)" : "");
    }
    rl_drv_send_error_to(d, m->id, m->id_len, RL_EINVAL, why);
    rl_drv_send_disconnect(d, m->id, m->id_len, why);
}

static void s_on_ready(rl_drv_slot *s, const Rl__Ready *r)
{
    if (s->state != RL_SLOT_CONFIGURING && s->state != RL_SLOT_READY) {
        rl_log_warn("%s: READY in state %d ignored", s->label, (int)s->state);
        return;
    }
    for (int i = 0; i < s->n_retry_safe; i++)
        free(s->retry_safe[i]);
    free(s->retry_safe);
    s->retry_safe = NULL;
    s->n_retry_safe = 0;
    size_t n = r->n_retry_safe < 1024 ? r->n_retry_safe : 1024;
    if (n && (s->retry_safe = calloc(n, sizeof *s->retry_safe))) {
        for (size_t i = 0; i < n; i++)
            if (r->retry_safe[i] && strlen(r->retry_safe[i]) < 128 &&
                (s->retry_safe[s->n_retry_safe] = strdup(r->retry_safe[i])))
                s->n_retry_safe++;
    }
    if (s->state != RL_SLOT_READY)
        s->incarnation++;
    s->state = RL_SLOT_READY;
    s->ready_since = uv_now(&s->d->loop);
    rl_log_info("%s ready (pid %ld on %s)", s->label, s->worker_pid, s->node->name);
    rl_drv_recovery_ready(s->d);
    rl_drv_send_queued(s->d); /* calls queued while it (re)started */
}

/* compute_s of REPLY.result: a finite, non-negative number, else 0. */
static double s_compute_s(const Rl__Value *result)
{
    if (!result)
        return 0;
    /* the worker's own form, {compute_s: double}: read in place, no JSON
     * (an allocation per reply, at every rank of every call) */
    if (result->kind_case == RL__VALUE__KIND_MAP_VALUE && result->map_value &&
        result->map_value->n_entries == 1 && result->map_value->entries[0]) {
        const Rl__MapEntry *e = result->map_value->entries[0];
        if (e->key.len == 9 && memcmp(e->key.data, "compute_s", 9) == 0 && e->value &&
            e->value->kind_case == RL__VALUE__KIND_DOUBLE_VALUE) {
            double cs = e->value->double_value;
            return cs >= 0 && cs < 1e12 ? cs : 0; /* also false for NaN */
        }
    }
    json_t *r = rl_value_to_json(result, 0);
    double cs = json_number_value(json_object_get(r, "compute_s"));
    json_decref(r);
    return cs >= 0 && cs < 1e12 ? cs : 0; /* also false for NaN */
}

static void s_on_reply(rl_drv_slot *s, rl_msg *m)
{
    rl_drv_subcall *c = rl_drv_take_subcall(s, m->env->reply->call_id);
    if (!c) {
        rl_log_warn("%s: reply to unknown call %llu dropped", s->label,
                    (unsigned long long)m->env->reply->call_id);
        return;
    }
    rl_future *f = c->f;
    if (m->payload_error) {
        rl_drv_future_fail(f, c->index, m->payload_error, "%s: bad reply payload for '%s': %s",
                           s->label, f->method, rl_error_message());
    } else if (m->env->reply->has_payload != (m->payload != NULL)) {
        rl_drv_future_fail(f, c->index, RL_EPROTO, "%s: reply to '%s' %s a payload but %s",
                           s->label, f->method, m->env->reply->has_payload ? "announces" : "has",
                           m->env->reply->has_payload ? "none came" : "does not announce it");
    } else {
        f->results[c->index] = m->payload;
        m->payload = NULL;
        f->pending--;
        s->calls_ok++;
        double cs = s_compute_s(m->env->reply->result);
        s->handler_s += cs;
        if (cs > f->compute_s)
            f->compute_s = cs;
        if (f->pending == 0 && !f->failed && !f->accounted) {
            f->accounted = 1;
            s->d->calls_wall_s += (double)(uv_hrtime() - f->t_issue) / 1e9;
            s->d->calls_compute_s += f->compute_s;
            s->d->calls_done++;
        }
    }
    if (f->pending == 0 || f->failed)
        s->d->drain_wake = 1; /* its waiter may go on */
    rl_drv_subcall_free(c);
}

static void s_on_worker_error(rl_drv_slot *s, const Rl__Error *e)
{
    const char *msg = e->message ? e->message : "";
    if (e->call_id == 0) {
        rl_log_error("%s: %s", s->label, msg);
        if (s->state == RL_SLOT_CONFIGURING) { /* init failed: retrying will not help */
            s->state = RL_SLOT_FAILED;
            rl_drv_set_fatal(s->d, "role %s cannot start: %s: %s", s->d->groups[s->group].name,
                             s->label, msg);
        }
        return;
    }
    rl_drv_subcall *c = rl_drv_take_subcall(s, e->call_id);
    if (!c) { /* e.g. a call whose future already failed on another rank */
        rl_log_debug("%s: error for unknown call %llu dropped: %s", s->label,
                     (unsigned long long)e->call_id, msg);
        return;
    }
    /* a worker's code is an rl_status; anything else becomes RL_EPEER */
    int code = e->code < 0 && e->code >= RL_EPEER ? e->code : RL_EPEER;
    s->calls_failed++;
    rl_drv_future_fail(c->f, c->index, code, "%s: method '%s' failed: %s", s->label,
                       c->f->method, msg);
    rl_drv_subcall_free(c);
}

/* 0 when nothing was there to receive, else 1 (see rl_zuv_readable_fn). */
static int s_on_readable_locked(rl_driver *d, void *sock)
{
    rl_msg m;
    int rc = rl_msg_recv(sock, 1, &m);
    if (rc && m.bytes == 0) /* EAGAIN: drained (or a socket error: nothing read) */
        return 0;
    d->msgs_in++;
    d->bytes_in += (int64_t)m.bytes;
    long dropped = 0;
    if (rc && m.id_len == 0) { /* not even an identity: nobody to answer */
        if (rl_net_ratelimit_allow(&d->log_limit, &dropped))
            rl_log_warn("receive on the ROUTER: %s%s", rl_error_message(),
                        dropped ? " (more were not logged)" : "");
        rl_msg_clear(&m);
        return 1;
    }
    rl_drv_slot *s = s_slot_by_id(d, m.id, m.id_len);
    if (s)
        s->last_seen = uv_now(&d->loop);
    if (!s || !m.env || (m.env->body_case != RL__ENVELOPE__BODY_REPLY &&
                         m.env->body_case != RL__ENVELOPE__BODY_HEARTBEAT))
        d->drain_wake = 1; /* a REPLY sets it when its future completes (s_on_reply) */
    if (!m.env) {
        char idbuf[64];
        if (rl_net_ratelimit_allow(&d->log_limit, &dropped))
            rl_log_warn("garbage from %s %s: %s%s", s ? s->label : "peer",
                        rl_msg_id_str(m.id, m.id_len < 16 ? m.id_len : 16, idbuf, sizeof idbuf),
                        rl_error_message(), dropped ? " (more were not logged)" : "");
        if (!s)
            rl_drv_send_disconnect(d, m.id, m.id_len, "unknown peer; send HELLO first");
        rl_msg_clear(&m);
        return 1;
    }
    if (m.env->protocol_version != RL_PROTOCOL_VERSION) {
        char why[256];
        snprintf(why, sizeof why,
                 "refused: worker speaks protocol version %u, driver speaks %d",
                 m.env->protocol_version, RL_PROTOCOL_VERSION);
        d->refused++;
        if (rl_net_ratelimit_allow(&d->log_limit, &dropped))
            rl_log_error("%s%s", why, dropped ? " (more refusals were not logged)" : "");
        rl_drv_send_error_to(d, m.id, m.id_len, RL_EPROTO, why);
        rl_drv_send_disconnect(d, m.id, m.id_len, why);
        rl_msg_clear(&m);
        return 1;
    }
    if (m.env->body_case == RL__ENVELOPE__BODY_HELLO) {
        s_on_hello(d, &m);
    } else if (!s) {
        rl_drv_send_disconnect(d, m.id, m.id_len, "unknown peer; send HELLO first");
    } else {
        switch (m.env->body_case) {
        case RL__ENVELOPE__BODY_READY: s_on_ready(s, m.env->ready); break;
        case RL__ENVELOPE__BODY_REPLY: s_on_reply(s, &m); break;
        case RL__ENVELOPE__BODY_ERROR: s_on_worker_error(s, m.env->error); break;
        case RL__ENVELOPE__BODY_HEARTBEAT: break;
        case RL__ENVELOPE__BODY_DISCONNECT:
            if (!d->shutting_down) {
                char why[300];
                snprintf(why, sizeof why, "left (%.250s)",
                         m.env->disconnect->reason ? m.env->disconnect->reason : "");
                rl_drv_slot_dead(s, why);
            }
            break;
        default:
            rl_log_warn("%s: unexpected %s", s->label, rl_msg_kind_name(m.env->body_case));
        }
    }
    rl_msg_clear(&m);
    return 1;
}

int rl_drv_on_readable(void *sock, void *arg) { return s_on_readable_locked(arg, sock); }

/* I/O thread: SHUTDOWN to every connected worker. */
void rl_drv_send_shutdown(rl_driver *d)
{
    for (int i = 0; i < d->n_slots; i++) {
        rl_drv_slot *s = &d->slots[i];
        uv_timer_stop(&s->restart_timer);
        if (!s->has_id)
            continue;
        Rl__Envelope env = RL__ENVELOPE__INIT;
        Rl__Shutdown sd = RL__SHUTDOWN__INIT;
        sd.reason = d->interrupted ? "driver interrupted" : "job finished";
        env.body_case = RL__ENVELOPE__BODY_SHUTDOWN;
        env.shutdown = &sd;
        rl_drv_send(s, &env, NULL);
    }
}
