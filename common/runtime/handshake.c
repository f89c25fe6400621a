/* handshake.c — slot-token proofs, challenges and the claim key exchange
 * (see common/runtime/handshake.h). */
#include "common/runtime/handshake.h"

#include "rlrt/error.h"

#include <sodium.h>
#include <string.h>

#define S_PROOF_LABEL "rlrt hello proof v2"
#define S_CHALLENGE_LABEL "rlrt challenge v2"

int rl_hs_init(void)
{
    if (sodium_init() < 0)
        return rl_error_set(RL_EIO, "libsodium cannot start (sodium_init failed)");
    return RL_OK;
}

void rl_hs_random(void *buf, size_t n) { randombytes_buf(buf, n); }

static void s_hex(const uint8_t *raw, size_t n, char *out, size_t out_size)
{
    sodium_bin2hex(out, out_size, raw, n);
}

void rl_hs_new_token(char token[RL_HS_TOKEN_HEX + 1])
{
    uint8_t raw[RL_HS_TOKEN_HEX / 2];
    randombytes_buf(raw, sizeof raw);
    s_hex(raw, sizeof raw, token, RL_HS_TOKEN_HEX + 1);
    sodium_memzero(raw, sizeof raw);
}

static void s_put_u64(uint8_t out[8], uint64_t v)
{
    for (int i = 0; i < 8; i++)
        out[i] = (uint8_t)(v >> (8 * i));
}

static uint64_t s_get_u64(const uint8_t in[8])
{
    uint64_t v = 0;
    for (int i = 0; i < 8; i++)
        v |= (uint64_t)in[i] << (8 * i);
    return v;
}

/* A length-prefixed field: the fields cannot run into each other. */
static void s_field(crypto_auth_hmacsha256_state *st, const void *p, size_t n)
{
    uint8_t len[8];
    s_put_u64(len, (uint64_t)n);
    crypto_auth_hmacsha256_update(st, len, sizeof len);
    if (n)
        crypto_auth_hmacsha256_update(st, p, n);
}

void rl_hs_proof(const char *token, const uint8_t *nonce, size_t nonce_len, const char *job_id,
                 const char *role, uint32_t rank, const void *routing_id, size_t id_len,
                 uint8_t out[RL_HS_PROOF_BYTES])
{
    crypto_auth_hmacsha256_state st;
    crypto_auth_hmacsha256_init(&st, (const unsigned char *)token, strlen(token));
    uint8_t r[8];
    s_put_u64(r, rank);
    s_field(&st, S_PROOF_LABEL, sizeof S_PROOF_LABEL - 1);
    s_field(&st, nonce, nonce_len);
    s_field(&st, job_id ? job_id : "", job_id ? strlen(job_id) : 0);
    s_field(&st, role ? role : "", role ? strlen(role) : 0);
    s_field(&st, r, sizeof r);
    s_field(&st, routing_id, id_len);
    crypto_auth_hmacsha256_final(&st, out);
    sodium_memzero(&st, sizeof st);
}

int rl_hs_proof_ok(const char *token, const uint8_t *nonce, size_t nonce_len,
                   const char *job_id, const char *role, uint32_t rank, const void *routing_id,
                   size_t id_len, const uint8_t *proof, size_t proof_len)
{
    if (!token || !token[0] || !proof || proof_len != RL_HS_PROOF_BYTES)
        return 0;
    uint8_t want[RL_HS_PROOF_BYTES];
    rl_hs_proof(token, nonce, nonce_len, job_id, role, rank, routing_id, id_len, want);
    int ok = sodium_memcmp(want, proof, RL_HS_PROOF_BYTES) == 0;
    sodium_memzero(want, sizeof want);
    return ok;
}

void rl_hs_issuer_init(rl_hs_issuer *is) { randombytes_buf(is->key, sizeof is->key); }

/* The MAC part of a nonce: over its random part and time, the slot, the
 * epoch and the peer. */
static void s_challenge_mac(const rl_hs_issuer *is, const uint8_t head[16], uint32_t slot,
                            uint64_t epoch, const void *id, size_t id_len, uint8_t out[16])
{
    crypto_auth_hmacsha256_state st;
    uint8_t full[crypto_auth_hmacsha256_BYTES], s8[8], e8[8];
    s_put_u64(s8, slot);
    s_put_u64(e8, epoch);
    crypto_auth_hmacsha256_init(&st, is->key, sizeof is->key);
    s_field(&st, S_CHALLENGE_LABEL, sizeof S_CHALLENGE_LABEL - 1);
    s_field(&st, head, 16);
    s_field(&st, s8, 8);
    s_field(&st, e8, 8);
    s_field(&st, id, id_len);
    crypto_auth_hmacsha256_final(&st, full);
    memcpy(out, full, 16);
}

void rl_hs_challenge(const rl_hs_issuer *is, uint64_t now_ms, uint32_t slot, uint64_t epoch,
                     const void *id, size_t id_len, uint8_t nonce[RL_HS_NONCE_BYTES])
{
    randombytes_buf(nonce, 8);
    s_put_u64(nonce + 8, now_ms);
    s_challenge_mac(is, nonce, slot, epoch, id, id_len, nonce + 16);
}

int rl_hs_challenge_check(const rl_hs_issuer *is, const uint8_t *nonce, size_t len,
                          uint64_t now_ms, uint32_t slot, uint64_t epoch, const void *id,
                          size_t id_len, uint64_t max_age_ms)
{
    if (!nonce || len != RL_HS_NONCE_BYTES)
        return rl_error_set(RL_EPROTO, "challenge of %zu bytes, expected %d", len,
                            RL_HS_NONCE_BYTES);
    uint8_t mac[16];
    s_challenge_mac(is, nonce, slot, epoch, id, id_len, mac);
    if (sodium_memcmp(mac, nonce + 16, sizeof mac) != 0)
        return rl_error_set(RL_EPROTO, "it answers no open challenge of this driver (a replay, "
                            "or a challenge already used)");
    uint64_t made = s_get_u64(nonce + 8);
    if (made > now_ms || now_ms - made > max_age_ms)
        return rl_error_set(RL_EPROTO, "it answers a challenge made %.1f s ago (at most %.1f s)",
                            made > now_ms ? 0.0 : (double)(now_ms - made) / 1000.0,
                            (double)max_age_ms / 1000.0);
    return RL_OK;
}

void rl_hs_kx_keypair(uint8_t pk[RL_HS_KX_BYTES], uint8_t sk[RL_HS_KX_BYTES])
{
    crypto_kx_keypair(pk, sk);
}

int rl_hs_kx_driver(const uint8_t *worker_pk, size_t len, uint8_t driver_pk[RL_HS_KX_BYTES],
                    char token[RL_HS_TOKEN_HEX + 1])
{
    if (!worker_pk || len != crypto_kx_PUBLICKEYBYTES)
        return rl_error_set(RL_EPROTO, "kx_public of %zu bytes, expected %d", len,
                            crypto_kx_PUBLICKEYBYTES);
    uint8_t sk[crypto_kx_SECRETKEYBYTES], rx[crypto_kx_SESSIONKEYBYTES],
        tx[crypto_kx_SESSIONKEYBYTES];
    crypto_kx_keypair(driver_pk, sk);
    int rc = crypto_kx_server_session_keys(rx, tx, driver_pk, sk, worker_pk);
    sodium_memzero(sk, sizeof sk);
    if (rc != 0)
        return rl_error_set(RL_EPROTO, "kx_public is not a usable X25519 key");
    s_hex(rx, sizeof rx, token, RL_HS_TOKEN_HEX + 1);
    sodium_memzero(rx, sizeof rx);
    sodium_memzero(tx, sizeof tx);
    return RL_OK;
}

int rl_hs_kx_worker(const uint8_t pk[RL_HS_KX_BYTES], const uint8_t sk[RL_HS_KX_BYTES],
                    const uint8_t *driver_pk, size_t len, char token[RL_HS_TOKEN_HEX + 1])
{
    if (!driver_pk || len != crypto_kx_PUBLICKEYBYTES)
        return rl_error_set(RL_EPROTO, "CONFIGURE: kx_public of %zu bytes, expected %d", len,
                            crypto_kx_PUBLICKEYBYTES);
    uint8_t rx[crypto_kx_SESSIONKEYBYTES], tx[crypto_kx_SESSIONKEYBYTES];
    if (crypto_kx_client_session_keys(rx, tx, pk, sk, driver_pk) != 0)
        return rl_error_set(RL_EPROTO, "CONFIGURE: kx_public is not a usable X25519 key");
    s_hex(tx, sizeof tx, token, RL_HS_TOKEN_HEX + 1);
    sodium_memzero(rx, sizeof rx);
    sodium_memzero(tx, sizeof tx);
    return RL_OK;
}
