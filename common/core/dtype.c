/* dtype.c — element type table and half-precision conversions. */
#include "rlrt/dtype.h"
#include "rlrt/error.h"

#include <string.h>
#include <strings.h>

static const struct {
    size_t size;
    const char *name;
    const char *alt;  /* numpy/torch style */
    const char *st;   /* safetensors */
} s_types[RL_DTYPE_MAX + 1] = {
    [RL_F32] = {4, "f32", "float32", "F32"},
    [RL_F64] = {8, "f64", "float64", "F64"},
    [RL_F16] = {2, "f16", "float16", "F16"},
    [RL_BF16] = {2, "bf16", "bfloat16", "BF16"},
    [RL_I8] = {1, "i8", "int8", "I8"},
    [RL_U8] = {1, "u8", "uint8", "U8"},
    [RL_I32] = {4, "i32", "int32", "I32"},
    [RL_I64] = {8, "i64", "int64", "I64"},
    [RL_BOOL] = {1, "bool", "bool", "BOOL"},
};

int rl_dtype_valid(int dtype) { return dtype >= RL_DTYPE_MIN && dtype <= RL_DTYPE_MAX; }

size_t rl_dtype_size(int dtype) { return rl_dtype_valid(dtype) ? s_types[dtype].size : 0; }

const char *rl_dtype_name(int dtype) { return rl_dtype_valid(dtype) ? s_types[dtype].name : "?"; }

int rl_dtype_parse(const char *name, rl_dtype *out)
{
    for (int d = RL_DTYPE_MIN; d <= RL_DTYPE_MAX; d++) {
        if (strcasecmp(name, s_types[d].name) == 0 || strcasecmp(name, s_types[d].alt) == 0 ||
            strcmp(name, s_types[d].st) == 0) {
            *out = (rl_dtype)d;
            return RL_OK;
        }
    }
    return rl_error_set(RL_EDTYPE, "unknown dtype '%s' (expected one of f32, f64, f16, bf16, "
                                   "i8, u8, i32, i64, bool)", name);
}

/* The bits of an f32 and back. */
static float s_f32_of(uint32_t u)
{
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static uint32_t s_bits_of(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

float rl_bf16_to_f32(uint16_t h) { return s_f32_of((uint32_t)h << 16); }

uint16_t rl_f32_to_bf16(float f)
{
    uint32_t u = s_bits_of(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) /* NaN: keep it a quiet NaN */
        return (uint16_t)((u >> 16) | 0x40);
    u += 0x7fffu + ((u >> 16) & 1u); /* round to nearest even */
    return (uint16_t)(u >> 16);
}

float rl_f16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1fu;
    uint32_t man = h & 0x3ffu;
    uint32_t u;
    if (exp == 0) {
        if (man == 0) {
            u = sign;
        } else { /* subnormal: normalise */
            int e = -1;
            do {
                e++;
                man <<= 1;
            } while (!(man & 0x400u));
            u = sign | ((uint32_t)(127 - 15 - e) << 23) | ((man & 0x3ffu) << 13);
        }
    } else if (exp == 31) {
        u = sign | 0x7f800000u | (man << 13);
    } else {
        u = sign | ((exp + 127 - 15) << 23) | (man << 13);
    }
    return s_f32_of(u);
}

uint16_t rl_f32_to_f16(float f)
{
    uint32_t u = s_bits_of(f);
    uint16_t sign = (uint16_t)((u >> 16) & 0x8000u);
    uint32_t absu = u & 0x7fffffffu;
    if (absu > 0x7f800000u)
        return sign | 0x7e00u; /* NaN */
    if (absu >= 0x477ff000u)   /* rounds to >= 65520: Inf */
        return sign | 0x7c00u;
    if (absu < 0x38800000u) { /* below the smallest normal half: subnormal */
        if (absu < 0x33000000u)
            return sign;
        uint32_t man = (absu & 0x7fffffu) | 0x800000u;
        int shift = 126 - (int)(absu >> 23); /* 14..24 */
        uint32_t half = man >> shift;
        uint32_t rem = man & ((1u << shift) - 1);
        uint32_t mid = 1u << (shift - 1);
        if (rem > mid || (rem == mid && (half & 1u)))
            half++;
        return sign | (uint16_t)half;
    }
    uint32_t r = absu + 0xfffu + ((absu >> 13) & 1u);
    return sign | (uint16_t)((r - (112u << 23)) >> 13);
}
