/* fuzz_wire_envelope.c — libFuzzer target for rl_wire_unpack_envelope(), the
 * control plane's only entry point for bytes from peers. Input: one envelope
 * frame. Oracle beyond "no crash": an envelope that unpacks packs back to a
 * frame that unpacks again to the same bytes.
 * Seeds: fuzz/seeds/fuzz_wire_envelope/ (written by test_wire). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "rl.pb-c.h"
#include "rlrt/error.h"
#include "rlrt/wire.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    Rl__Envelope *e = NULL;
    if (rl_wire_unpack_envelope(data, size, &e) != 0) {
        if (e || rl_error_message()[0] == 0)
            abort();
        return 0;
    }
    size_t n = rl__envelope__get_packed_size(e);
    uint8_t *a = malloc(n + 1), *b = malloc(n + 1);
    rl__envelope__pack(e, a);
    Rl__Envelope *f = NULL;
    if (rl_wire_unpack_envelope(a, n, &f) != 0)
        abort();
    if (rl__envelope__get_packed_size(f) != n)
        abort();
    rl__envelope__pack(f, b);
    if (memcmp(a, b, n) != 0)
        abort();
    rl__envelope__free_unpacked(f, NULL);
    rl__envelope__free_unpacked(e, NULL);
    free(a);
    free(b);
    return 0;
}
