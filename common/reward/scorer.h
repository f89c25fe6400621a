/* common/reward/scorer.h — the client of the remote-scorer protocol (proto/scorer.proto):
 * images and prompts to a scoring server (HPSv3 on a GPU host, or any server
 * speaking the protocol, e.g. deploy/scorer_server.py), one score per image
 * back.
 *
 * The server is a peer like any other and may be hostile or broken: every
 * reply is decoded with protobuf-c and checked (version, request id, a score
 * per image, finite scores, info count, sizes). A timeout closes and reopens
 * the socket and sends again, at most `retries` more times (Lazy Pirate); a
 * reply whose `error` is set, a malformed reply or the last timeout fails
 * the call with RL_EPEER / RL_ETIMEOUT / RL_EPROTO naming the endpoint. No
 * call ever returns invented scores.
 *
 * Ownership: rl_scorer_client_new() returns a client freed with
 * rl_scorer_client_free(); one thread at a time. info strings returned by
 * rl_scorer_score() are malloc'd (the caller frees each and the array).
 */
#ifndef RLRT_SCORER_H
#define RLRT_SCORER_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define RL_SCORER_PROTOCOL_VERSION 1

typedef enum rl_scorer_format { RL_SCORER_PNG = 0, RL_SCORER_RAW = 1 } rl_scorer_format;

typedef struct rl_scorer_client rl_scorer_client;

/* A client of `endpoint` (tcp://host:port, ipc://…); timeout_ms > 0 per
 * attempt, retries >= 0 further attempts after a timeout. Connecting is
 * lazy: a server that is not up yet is a timeout at the first call. */
rl_scorer_client *rl_scorer_client_new(const char *endpoint, int timeout_ms, int retries,
                                       rl_scorer_format format);
void rl_scorer_client_free(rl_scorer_client *c);

/* Scores n images (n, h, w, ch) u8 with their prompts: scores (n) out;
 * info (may be NULL) receives NULL or an array of n strings. */
int rl_scorer_score(rl_scorer_client *c, const uint8_t *px, int64_t n, int w, int h, int ch,
                    const char *const *prompts, float *scores, char ***info);

#ifdef __cplusplus
}
#endif
#endif
