/* test_handshake.c — the slot-token proofs, challenges and the claim key
 * exchange of common/runtime/handshake.h, against peer input of every wrong
 * shape: another nonce, job, role, rank, routing id or token, a tampered,
 * truncated, expired or spent challenge, a key of the wrong length. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "common/runtime/handshake.h"
#include "rlrt/error.h"

static const char *s_tok = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

static void test_proof_binds_every_field(void **state)
{
    (void)state;
    assert_int_equal(rl_hs_init(), 0);
    uint8_t nonce[RL_HS_NONCE_BYTES], other[RL_HS_NONCE_BYTES], p[RL_HS_PROOF_BYTES];
    rl_hs_random(nonce, sizeof nonce);
    memcpy(other, nonce, sizeof other);
    other[5] ^= 1;
    rl_hs_proof(s_tok, nonce, sizeof nonce, "job1", "actor", 3, "id-a", 4, p);
    assert_true(rl_hs_proof_ok(s_tok, nonce, sizeof nonce, "job1", "actor", 3, "id-a", 4, p, sizeof p));
    assert_false(rl_hs_proof_ok(s_tok, other, sizeof other, "job1", "actor", 3, "id-a", 4, p, sizeof p));
    assert_false(rl_hs_proof_ok(s_tok, nonce, sizeof nonce, "job2", "actor", 3, "id-a", 4, p, sizeof p));
    assert_false(rl_hs_proof_ok(s_tok, nonce, sizeof nonce, "job1", "reward", 3, "id-a", 4, p, sizeof p));
    assert_false(rl_hs_proof_ok(s_tok, nonce, sizeof nonce, "job1", "actor", 4, "id-a", 4, p, sizeof p));
    assert_false(rl_hs_proof_ok(s_tok, nonce, sizeof nonce, "job1", "actor", 3, "id-b", 4, p, sizeof p));
    /* fields cannot run into each other: "job1"+"actor" != "job1a"+"ctor" */
    assert_false(rl_hs_proof_ok(s_tok, nonce, sizeof nonce, "job1a", "ctor", 3, "id-a", 4, p, sizeof p));
    char tok2[RL_HS_TOKEN_HEX + 1];
    rl_hs_new_token(tok2);
    assert_int_equal(strlen(tok2), RL_HS_TOKEN_HEX);
    assert_false(rl_hs_proof_ok(tok2, nonce, sizeof nonce, "job1", "actor", 3, "id-a", 4, p, sizeof p));
    /* peer lengths: truncated or empty proofs, no token */
    assert_false(rl_hs_proof_ok(s_tok, nonce, sizeof nonce, "job1", "actor", 3, "id-a", 4, p, sizeof p - 1));
    assert_false(rl_hs_proof_ok(s_tok, nonce, sizeof nonce, "job1", "actor", 3, "id-a", 4, NULL, 0));
    assert_false(rl_hs_proof_ok("", nonce, sizeof nonce, "job1", "actor", 3, "id-a", 4, p, sizeof p));
    p[31] ^= 0x80;
    assert_false(rl_hs_proof_ok(s_tok, nonce, sizeof nonce, "job1", "actor", 3, "id-a", 4, p, sizeof p));
}

static void test_challenge_for_one_slot_epoch_peer_and_time(void **state)
{
    (void)state;
    assert_int_equal(rl_hs_init(), 0);
    rl_hs_issuer is, is2;
    rl_hs_issuer_init(&is);
    rl_hs_issuer_init(&is2);
    uint8_t n[RL_HS_NONCE_BYTES], n2[RL_HS_NONCE_BYTES];
    uint64_t t = 1000000;
    rl_hs_challenge(&is, t, 2, 7, "peer", 4, n);
    rl_hs_challenge(&is, t, 2, 7, "peer", 4, n2);
    assert_memory_not_equal(n, n2, sizeof n); /* fresh per HELLO */
    assert_int_equal(rl_hs_challenge_check(&is, n, sizeof n, t + 10, 2, 7, "peer", 4, 30000), 0);
    /* another slot, a later epoch (spent), another peer, another driver */
    assert_int_equal(rl_hs_challenge_check(&is, n, sizeof n, t, 3, 7, "peer", 4, 30000), RL_EPROTO);
    assert_int_equal(rl_hs_challenge_check(&is, n, sizeof n, t, 2, 8, "peer", 4, 30000), RL_EPROTO);
    assert_non_null(strstr(rl_error_message(), "answers no open challenge"));
    assert_int_equal(rl_hs_challenge_check(&is, n, sizeof n, t, 2, 7, "peeR", 4, 30000), RL_EPROTO);
    assert_int_equal(rl_hs_challenge_check(&is2, n, sizeof n, t, 2, 7, "peer", 4, 30000), RL_EPROTO);
    /* expired, or from the future */
    assert_int_equal(rl_hs_challenge_check(&is, n, sizeof n, t + 30001, 2, 7, "peer", 4, 30000),
                     RL_EPROTO);
    assert_non_null(strstr(rl_error_message(), "made 30.0 s ago"));
    assert_int_equal(rl_hs_challenge_check(&is, n, sizeof n, t - 1, 2, 7, "peer", 4, 30000), RL_EPROTO);
    /* tampered time (the MAC covers it), truncated, absent */
    n[9] ^= 1;
    assert_int_equal(rl_hs_challenge_check(&is, n, sizeof n, t, 2, 7, "peer", 4, 30000), RL_EPROTO);
    n[9] ^= 1;
    assert_int_equal(rl_hs_challenge_check(&is, n, sizeof n - 1, t, 2, 7, "peer", 4, 30000), RL_EPROTO);
    assert_non_null(strstr(rl_error_message(), "challenge of 31 bytes, expected 32"));
    assert_int_equal(rl_hs_challenge_check(&is, NULL, 0, t, 2, 7, "peer", 4, 30000), RL_EPROTO);
}

static void test_claim_key_exchange(void **state)
{
    (void)state;
    assert_int_equal(rl_hs_init(), 0);
    uint8_t wpk[RL_HS_KX_BYTES], wsk[RL_HS_KX_BYTES], dpk[RL_HS_KX_BYTES];
    char dtok[RL_HS_TOKEN_HEX + 1], wtok[RL_HS_TOKEN_HEX + 1], otok[RL_HS_TOKEN_HEX + 1];
    rl_hs_kx_keypair(wpk, wsk);
    assert_int_equal(rl_hs_kx_driver(wpk, sizeof wpk, dpk, dtok), 0);
    assert_int_equal(rl_hs_kx_worker(wpk, wsk, dpk, sizeof dpk, wtok), 0);
    assert_string_equal(dtok, wtok);
    assert_int_equal(strlen(dtok), RL_HS_TOKEN_HEX);
    /* a listener who saw both public keys but has another secret key */
    uint8_t opk[RL_HS_KX_BYTES], osk[RL_HS_KX_BYTES];
    rl_hs_kx_keypair(opk, osk);
    assert_int_equal(rl_hs_kx_worker(wpk, osk, dpk, sizeof dpk, otok), 0);
    assert_string_not_equal(otok, dtok);
    /* a new claim gives a new token */
    uint8_t dpk2[RL_HS_KX_BYTES];
    char dtok2[RL_HS_TOKEN_HEX + 1];
    assert_int_equal(rl_hs_kx_driver(wpk, sizeof wpk, dpk2, dtok2), 0);
    assert_string_not_equal(dtok2, dtok);
    /* peer keys of the wrong length */
    assert_int_equal(rl_hs_kx_driver(wpk, 31, dpk, dtok), RL_EPROTO);
    assert_non_null(strstr(rl_error_message(), "kx_public of 31 bytes, expected 32"));
    assert_int_equal(rl_hs_kx_driver(NULL, 0, dpk, dtok), RL_EPROTO);
    assert_int_equal(rl_hs_kx_worker(wpk, wsk, dpk, 33, wtok), RL_EPROTO);
    /* the all-zero key (a low-order point) is refused by libsodium */
    uint8_t zero[RL_HS_KX_BYTES] = {0};
    assert_int_equal(rl_hs_kx_driver(zero, sizeof zero, dpk, dtok), RL_EPROTO);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_proof_binds_every_field),
        cmocka_unit_test(test_challenge_for_one_slot_epoch_peer_and_time),
        cmocka_unit_test(test_claim_key_exchange),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
