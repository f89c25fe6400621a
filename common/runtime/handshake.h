/* common/runtime/handshake.h — how a worker proves its slot token to the
 * driver without the token ever crossing the wire (libsodium).
 *
 * Purpose: every slot of a job has a secret token (a spawned worker gets it
 * in its environment or on stdin; an external worker agrees it with the
 * driver when it claims a free slot). HELLO never carries it:
 *   worker  HELLO {role, rank, job, kx_public}
 *   driver  CHALLENGE {nonce}              the slot is held: prove the token
 *   worker  HELLO {..., challenge = nonce, proof = HMAC-SHA256(token, ...)}
 *   driver  CONFIGURE                      (no token in it)
 * or, for a free external slot, the driver answers the first HELLO with
 * CONFIGURE {kx_public}: both sides derive the slot's token from an X25519
 * key exchange (crypto_kx) of the two public keys, so a listener on the wire
 * learns nothing it could present later.
 *
 *   rl_hs_proof()        the HMAC a HELLO carries: keyed with the token, over
 *                        a label, the nonce, the job id, role, rank and the
 *                        worker's routing id (a proof answers one challenge
 *                        of one connection)
 *   rl_hs_proof_ok()     the driver's check, in constant time
 *   rl_hs_challenge()    a fresh nonce, stateless: 8 random bytes, the time
 *                        it was made, and a MAC under the driver's own key
 *                        of those, the slot, the slot's epoch and the peer's
 *                        routing id; rl_hs_challenge_check() accepts it only
 *                        for that slot, epoch and peer, within max_age_ms.
 *                        The driver bumps the slot's epoch on every accepted
 *                        proof, so a nonce is good for one HELLO at most: a
 *                        recorded HELLO replayed later answers a dead
 *                        challenge. Nonces cost the driver no memory, so a
 *                        flood of HELLOs cannot push a real worker's
 *                        challenge out.
 *   rl_hs_kx_*()         the key exchange of a free external slot.
 *
 * Invariants: every comparison of secret-derived bytes is constant-time
 * (libsodium); tokens are RL_HS_TOKEN_HEX hex characters; functions that
 * take peer input check its length first. rl_hs_init() (sodium_init) must
 * have succeeded before any other call; it is idempotent and thread-safe.
 *
 * Threading: no shared state beyond what the caller passes.
 *
 * Ownership: callers own every buffer; nothing is allocated.
 */
#ifndef RLRT_RUNTIME_HANDSHAKE_H
#define RLRT_RUNTIME_HANDSHAKE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define RL_HS_NONCE_BYTES 32
#define RL_HS_PROOF_BYTES 32
#define RL_HS_KX_BYTES 32   /* an X25519 public or secret key */
#define RL_HS_TOKEN_HEX 64  /* a slot token: 32 bytes as hex */
#define RL_HS_CHALLENGE_MAX_AGE_MS 30000

/* sodium_init(); RL_EIO when libsodium cannot start. */
int rl_hs_init(void);
/* n random bytes (libsodium's CSPRNG). */
void rl_hs_random(void *buf, size_t n);
/* A fresh token: RL_HS_TOKEN_HEX hex characters + NUL. */
void rl_hs_new_token(char token[RL_HS_TOKEN_HEX + 1]);

/* The proof of a HELLO: see the top of this file. */
void rl_hs_proof(const char *token, const uint8_t *nonce, size_t nonce_len, const char *job_id,
                 const char *role, uint32_t rank, const void *routing_id, size_t id_len,
                 uint8_t out[RL_HS_PROOF_BYTES]);
/* 1 when `proof` (proof_len bytes, from the peer) is the proof for these
 * fields under `token`; compared in constant time. */
int rl_hs_proof_ok(const char *token, const uint8_t *nonce, size_t nonce_len,
                   const char *job_id, const char *role, uint32_t rank, const void *routing_id,
                   size_t id_len, const uint8_t *proof, size_t proof_len);

/* The driver's challenge key (random per driver run). */
typedef struct rl_hs_issuer {
    uint8_t key[32];
} rl_hs_issuer;

void rl_hs_issuer_init(rl_hs_issuer *is);
/* A nonce for a HELLO of peer `id` for slot `slot` at `epoch`, made at
 * now_ms (a monotonic clock). */
void rl_hs_challenge(const rl_hs_issuer *is, uint64_t now_ms, uint32_t slot, uint64_t epoch,
                     const void *id, size_t id_len, uint8_t nonce[RL_HS_NONCE_BYTES]);
/* RL_OK when `nonce` (len bytes, from the peer) was made by rl_hs_challenge
 * for this slot, epoch and peer no more than max_age_ms before now_ms;
 * otherwise RL_EPROTO with a message saying which (not ours / expired). */
int rl_hs_challenge_check(const rl_hs_issuer *is, const uint8_t *nonce, size_t len,
                          uint64_t now_ms, uint32_t slot, uint64_t epoch, const void *id,
                          size_t id_len, uint64_t max_age_ms);

/* An ephemeral X25519 key pair. */
void rl_hs_kx_keypair(uint8_t pk[RL_HS_KX_BYTES], uint8_t sk[RL_HS_KX_BYTES]);
/* The driver's side of a claim: from the worker's public key (len bytes,
 * from the peer) makes the driver's key pair, puts its public key in
 * driver_pk and the slot's token in `token`. RL_EPROTO on a key of the wrong
 * length or one libsodium refuses. */
int rl_hs_kx_driver(const uint8_t *worker_pk, size_t len, uint8_t driver_pk[RL_HS_KX_BYTES],
                    char token[RL_HS_TOKEN_HEX + 1]);
/* The worker's side: its own key pair and the driver's public key (len bytes,
 * from the peer) give the same token. RL_EPROTO as above. */
int rl_hs_kx_worker(const uint8_t pk[RL_HS_KX_BYTES], const uint8_t sk[RL_HS_KX_BYTES],
                    const uint8_t *driver_pk, size_t len, char token[RL_HS_TOKEN_HEX + 1]);

#ifdef __cplusplus
}
#endif
#endif
