/* fuzz_wire_decode.c — libFuzzer target for the DataProto wire decoder.
 *
 * Input: frames packed as (u32 little-endian length, bytes)... — the format
 * of rl_wire_decode_packed() and of the files in fuzz/seeds/fuzz_wire_decode/.
 *
 * Two decode paths per input: the copying one (rl_wire_decode_packed) and the
 * zero-copy one (frames owned by an rl_storage over the input, at an odd
 * offset so misaligned frames occur). Oracles beyond "no crash": both paths
 * agree; every storage reference taken is given back; a batch that decodes
 * re-encodes and decodes to an equal batch.
 *
 * Run: make fuzz [FUZZ_SECONDS=60]; crashes land in fuzz/regressions/.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "rlrt/error.h"
#include "rlrt/tensor.h"
#include "rlrt/dataproto.h"
#include "rlrt/wire.h"

static int s_released;

static void s_release(void *data, void *ctx)
{
    (void)data;
    (void)ctx;
    s_released = 1;
}

static int s_split(const uint8_t *p, size_t len, rl_wire_frame *fr, int max, rl_storage *own)
{
    int n = 0;
    size_t off = 0;
    while (off < len) {
        if (len - off < 4 || n == max)
            return -1;
        uint32_t fl = (uint32_t)p[off] | (uint32_t)p[off + 1] << 8 |
                      (uint32_t)p[off + 2] << 16 | (uint32_t)p[off + 3] << 24;
        off += 4;
        if (fl > len - off)
            return -1;
        fr[n].data = p + off;
        fr[n].len = fl;
        fr[n].owner = own;
        n++;
        off += fl;
    }
    return n;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    rl_dataproto *a = NULL, *b = NULL;
    int rc_a = rl_wire_decode_packed(data, size, &a);
    if (rc_a != 0 && (a != NULL || rl_error_message()[0] == 0))
        abort(); /* an error must leave no object and say why */

    /* zero-copy path over a private, oddly aligned copy */
    uint8_t *buf = malloc(size + 1);
    if (!buf)
        return 0;
    memcpy(buf + 1, data, size);
    s_released = 0;
    rl_storage *own = rl_storage_wrap(buf + 1, size, s_release, NULL);
    enum { MAXF = 64 };
    rl_wire_frame fr[MAXF];
    int n = s_split(buf + 1, size, fr, MAXF, own);
    if (n >= 0) {
        int rc_b = rl_wire_decode(fr, n, &b);
        /* the packed path also allows up to RL_WIRE_MAX_TENSORS frames; with
         * at most MAXF frames both must agree */
        if ((rc_b == 0) != (rc_a == 0))
            abort();
        if (rc_b == 0 && !rl_dataproto_equal(a, b))
            abort();
        rl_dataproto_free(b);
    }
    if (atomic_load(&own->refcount) != 1)
        abort(); /* a reference leaked or was dropped twice */
    rl_storage_release(own);
    if (!s_released)
        abort();
    free(buf);

    if (rc_a == 0) {
        void *pk;
        size_t pl;
        if (rl_wire_encode_packed(a, &pk, &pl) != 0)
            abort();
        rl_dataproto *c = NULL;
        if (rl_wire_decode_packed(pk, pl, &c) != 0 || !rl_dataproto_equal(a, c))
            abort();
        rl_dataproto_free(c);
        free(pk);
    }
    rl_dataproto_free(a);
    return 0;
}
