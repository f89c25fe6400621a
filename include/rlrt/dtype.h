/* rlrt/dtype.h — element types shared by tensors, the wire format and
 * safetensors files.
 *
 * The numeric codes are part of the wire format (proto/rl.proto) and must
 * never be renumbered. bf16 and f16 are stored as raw uint16 bit patterns;
 * conversion rounds to nearest even and keeps NaN/Inf.
 */
#ifndef RLRT_DTYPE_H
#define RLRT_DTYPE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum rl_dtype {
    RL_F32 = 1,
    RL_F64 = 2,
    RL_F16 = 3,
    RL_BF16 = 4,
    RL_I8 = 5,
    RL_U8 = 6,
    RL_I32 = 7,
    RL_I64 = 8,
    RL_BOOL = 9
} rl_dtype;

#define RL_DTYPE_MIN 1
#define RL_DTYPE_MAX 9

/* Bytes per element; 0 for an unknown code. */
size_t rl_dtype_size(int dtype);
/* "f32", "bf16", ...; "?" for an unknown code. */
const char *rl_dtype_name(int dtype);
/* Parses "f32"/"float32"/"F32" (also safetensors names "BF16", "I64", "BOOL").
 * Returns RL_OK or RL_EDTYPE with a message. */
int rl_dtype_parse(const char *name, rl_dtype *out);
int rl_dtype_valid(int dtype);

float rl_bf16_to_f32(uint16_t h);
uint16_t rl_f32_to_bf16(float f);
float rl_f16_to_f32(uint16_t h);
uint16_t rl_f32_to_f16(float f);

#ifdef __cplusplus
}
#endif
#endif
