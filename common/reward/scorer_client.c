/* scorer_client.c — the remote-scorer client (see common/reward/scorer.h). */
#include "common/reward/scorer.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zmq.h>

#include "common/core/util.h"
#include "rlrt/error.h"
#include "common/image/image.h"
#include "scorer.pb-c.h"

#define RL_SCORER_MAX_INFO 4096 /* bytes per info string */

struct rl_scorer_client {
    void *ctx, *sock;
    char endpoint[256];
    int timeout_ms, retries;
    rl_scorer_format format;
    uint64_t next_id;
};

static int s_connect(rl_scorer_client *c)
{
    if (c->sock)
        zmq_close(c->sock);
    c->sock = zmq_socket(c->ctx, ZMQ_REQ);
    if (!c->sock)
        return rl_error_set(RL_EIO, "scorer %s: cannot create a socket: %s", c->endpoint,
                            zmq_strerror(zmq_errno()));
    int linger = 0;
    int64_t maxmsg = 64 << 20; /* a reply larger than 64 MiB is refused by libzmq */
    zmq_setsockopt(c->sock, ZMQ_LINGER, &linger, sizeof linger);
    zmq_setsockopt(c->sock, ZMQ_MAXMSGSIZE, &maxmsg, sizeof maxmsg);
    if (zmq_connect(c->sock, c->endpoint) != 0)
        return rl_error_set(RL_EINVAL, "scorer: cannot connect to '%s': %s", c->endpoint,
                            zmq_strerror(zmq_errno()));
    return RL_OK;
}

rl_scorer_client *rl_scorer_client_new(const char *endpoint, int timeout_ms, int retries,
                                       rl_scorer_format format)
{
    if (!endpoint || !*endpoint || strlen(endpoint) >= 256 || timeout_ms < 1 || retries < 0 ||
        (format != RL_SCORER_PNG && format != RL_SCORER_RAW)) {
        rl_error_set(RL_EINVAL, "scorer: need an endpoint (< 256 characters), timeout_ms >= 1, "
                                "retries >= 0 and format png or raw");
        return NULL;
    }
    rl_scorer_client *c = rl_zalloc(sizeof *c, "scorer");
    if (!c)
        return NULL;
    snprintf(c->endpoint, sizeof c->endpoint, "%s", endpoint);
    c->timeout_ms = timeout_ms;
    c->retries = retries;
    c->format = format;
    c->next_id = 1;
    c->ctx = zmq_ctx_new();
    if (!c->ctx || s_connect(c)) {
        if (!c->ctx)
            rl_error_set(RL_EIO, "scorer: cannot create a ZeroMQ context");
        rl_scorer_client_free(c);
        return NULL;
    }
    return c;
}

void rl_scorer_client_free(rl_scorer_client *c)
{
    if (!c)
        return;
    if (c->sock)
        zmq_close(c->sock);
    if (c->ctx)
        zmq_ctx_term(c->ctx);
    free(c);
}

/* The encoded request (malloc'd). */
static int s_request(const rl_scorer_client *c, uint64_t id, const uint8_t *px, int64_t n, int w,
                     int h, int ch, const char *const *prompts, uint8_t **out, size_t *len)
{
    Rl__ScoreRequest req = RL__SCORE_REQUEST__INIT;
    req.version = RL_SCORER_PROTOCOL_VERSION;
    req.request_id = id;
    req.format = c->format == RL_SCORER_PNG ? RL__IMAGE_FORMAT__IMAGE_PNG : RL__IMAGE_FORMAT__IMAGE_RAW;
    req.width = (uint32_t)w;
    req.height = (uint32_t)h;
    req.channels = (uint32_t)ch;
    size_t per = (size_t)w * (size_t)h * (size_t)ch;
    ProtobufCBinaryData *imgs = calloc((size_t)(n > 0 ? n : 1), sizeof *imgs);
    int rc = imgs ? RL_OK : rl_error_set(RL_ENOMEM, "scorer: out of memory");
    for (int64_t i = 0; !rc && i < n; i++) {
        if (c->format == RL_SCORER_RAW) {
            imgs[i].data = (uint8_t *)px + (size_t)i * per;
            imgs[i].len = per;
        } else {
            rc = rl_image_png_encode(px + (size_t)i * per, w, h, ch, &imgs[i].data, &imgs[i].len);
        }
    }
    if (!rc) {
        req.n_images = (size_t)n;
        req.images = imgs;
        req.n_prompts = (size_t)n;
        req.prompts = (char **)prompts;
        *len = rl__score_request__get_packed_size(&req);
        *out = malloc(*len ? *len : 1);
        if (!*out)
            rc = rl_error_set(RL_ENOMEM, "scorer: out of memory for a %zu-byte request", *len);
        else
            rl__score_request__pack(&req, *out);
    }
    for (int64_t i = 0; imgs && c->format == RL_SCORER_PNG && i < n; i++)
        free(imgs[i].data);
    free(imgs);
    return rc;
}

/* Checks and copies a reply. */
static int s_reply(const rl_scorer_client *c, uint64_t id, const uint8_t *buf, size_t len,
                   int64_t n, float *scores, char ***info)
{
    /* protobuf-c allocates ~40 bytes per 2-byte empty string or unknown
     * field: bound the reply by what n scores can need before decoding */
    size_t cap = 65536 + (size_t)n * (16 + RL_SCORER_MAX_INFO);
    if (len > cap)
        return rl_error_set(RL_EPROTO, "scorer %s: a reply of %zu bytes for %lld images "
                            "(at most %zu)", c->endpoint, len, (long long)n, cap);
    Rl__ScoreReply *r = rl__score_reply__unpack(NULL, len, buf);
    if (!r)
        return rl_error_set(RL_EPROTO, "scorer %s: the reply (%zu bytes) is not a ScoreReply",
                            c->endpoint, len);
    int rc = RL_OK;
    if (r->version != RL_SCORER_PROTOCOL_VERSION)
        rc = rl_error_set(RL_EPROTO, "scorer %s: reply version %u, expected %d", c->endpoint,
                          r->version, RL_SCORER_PROTOCOL_VERSION);
    else if (r->request_id != id)
        rc = rl_error_set(RL_EPROTO, "scorer %s: reply to request %llu, expected %llu", c->endpoint,
                          (unsigned long long)r->request_id, (unsigned long long)id);
    else if (r->error && *r->error)
        rc = rl_error_set(RL_EPEER, "scorer %s failed: %.400s", c->endpoint, r->error);
    else if (r->n_scores != (size_t)n)
        rc = rl_error_set(RL_EPROTO, "scorer %s: scores: expected %lld, got %zu", c->endpoint,
                          (long long)n, r->n_scores);
    else if (r->n_info != 0 && r->n_info != (size_t)n)
        rc = rl_error_set(RL_EPROTO, "scorer %s: info: expected 0 or %lld strings, got %zu",
                          c->endpoint, (long long)n, r->n_info);
    for (int64_t i = 0; !rc && i < n; i++)
        if (!isfinite(r->scores[i]))
            rc = rl_error_set(RL_EPROTO, "scorer %s: score %lld is %g (not finite)", c->endpoint,
                              (long long)i, (double)r->scores[i]);
    if (!rc) {
        memcpy(scores, r->scores, sizeof(float) * (size_t)n);
        if (info) {
            *info = NULL;
            if (r->n_info) {
                char **s = calloc((size_t)n, sizeof *s);
                for (int64_t i = 0; s && i < n; i++)
                    if (!(s[i] = strdup(r->info[i] ? r->info[i] : "")))
                        break;
                if (!s || (n > 0 && !s[n - 1])) {
                    for (int64_t i = 0; s && i < n; i++)
                        free(s[i]);
                    free(s);
                    rc = rl_error_set(RL_ENOMEM, "scorer: out of memory");
                } else {
                    *info = s;
                }
            }
        }
    }
    rl__score_reply__free_unpacked(r, NULL);
    return rc;
}

int rl_scorer_score(rl_scorer_client *c, const uint8_t *px, int64_t n, int w, int h, int ch,
                    const char *const *prompts, float *scores, char ***info)
{
    if (info)
        *info = NULL;
    if (!c || n < 0 || (n > 0 && (!px || !prompts || !scores)) || w < 1 || h < 1 ||
        (ch != 1 && ch != 3))
        return rl_error_set(RL_EINVAL, "scorer: bad arguments (n=%lld, %dx%dx%d)", (long long)n, w,
                            h, ch);
    for (int64_t i = 0; i < n; i++)
        if (!prompts[i])
            return rl_error_set(RL_EINVAL, "scorer: prompt %lld is NULL", (long long)i);
    if (n == 0)
        return RL_OK;
    uint64_t id = c->next_id++;
    uint8_t *req = NULL;
    size_t len = 0;
    int rc = s_request(c, id, px, n, w, h, ch, prompts, &req, &len);
    for (int attempt = 0; !rc && attempt <= c->retries; attempt++) {
        if (zmq_send(c->sock, req, len, 0) < 0) {
            rc = rl_error_set(RL_EIO, "scorer %s: send: %s", c->endpoint, zmq_strerror(zmq_errno()));
            break;
        }
        zmq_pollitem_t it = {c->sock, 0, ZMQ_POLLIN, 0};
        int ready = zmq_poll(&it, 1, c->timeout_ms);
        if (ready < 0) {
            rc = rl_error_set(RL_EIO, "scorer %s: poll: %s", c->endpoint, zmq_strerror(zmq_errno()));
            break;
        }
        if (ready == 0) { /* Lazy Pirate: a fresh socket, then try again */
            rc = s_connect(c);
            if (!rc && attempt == c->retries)
                rc = rl_error_set(RL_ETIMEOUT,
                                  "scorer %s: no reply within %d ms after %d attempts (is the "
                                  "server running?)", c->endpoint, c->timeout_ms, c->retries + 1);
            continue;
        }
        zmq_msg_t msg;
        zmq_msg_init(&msg);
        if (zmq_msg_recv(&msg, c->sock, 0) < 0) {
            zmq_msg_close(&msg);
            rc = rl_error_set(RL_EIO, "scorer %s: receive: %s", c->endpoint,
                              zmq_strerror(zmq_errno()));
            break;
        }
        int more = zmq_msg_more(&msg);
        rc = more ? rl_error_set(RL_EPROTO, "scorer %s: a reply has one frame, got more",
                                 c->endpoint)
                  : s_reply(c, id, zmq_msg_data(&msg), zmq_msg_size(&msg), n, scores, info);
        zmq_msg_close(&msg);
        if (more && s_connect(c)) /* drop the rest of a multi-frame reply with the socket */
            break;
        if (!rc || rc == RL_ENOMEM)
            break;
        /* an error reply or a malformed one: asked again, then the last
         * message fails the call */
        if (attempt < c->retries) {
            rc = RL_OK;
            continue;
        }
        rc = rl_error_wrap(rc, "after %d attempts", c->retries + 1);
    }
    free(req);
    return rc;
}
