/* fuzz_tokenizer_json.c — libFuzzer target for Hugging Face tokenizer.json
 * (common/text/tokenizer_bpe.c: JSON, vocabulary, merges, added tokens,
 * pre-tokenizer settings). One input is one tokenizer.json. Oracle: an
 * accepted tokenizer encodes a fixed text and decodes it back to the same
 * bytes (byte-level BPE is lossless). */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/text/tokenizer.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    rl_tokenizer *tok = rl_tokenizer_from_hf_json((const char *)data, size);
    if (!tok)
        return 0;
    static const char text[] = "Q: 12+7=?\nA: <think> 19 </think> \xc3\xa9\xff";
    int32_t *ids = NULL;
    int64_t n = 0;
    if (rl_tokenizer_encode(tok, text, sizeof text - 1, &ids, &n) == 0) {
        char *back = NULL;
        size_t len = 0;
        if (rl_tokenizer_decode(tok, ids, n, &back, &len) == 0)
            free(back);
        free(ids);
    }
    rl_tokenizer_free(tok);
    return 0;
}
