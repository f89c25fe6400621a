/* rlrt/runtime/value.h — rl.Value (proto/rl.proto) <-> jansson, for the small
 * typed arguments control messages carry (CONFIGURE.extra, CALL.args).
 * Ownership: rl_value_from_json() returns a tree freed with rl_value_free()
 * (NULL for a NULL input or when memory runs out); rl_value_to_json() returns
 * a new reference (NULL + message past 64 levels or out of memory). */
#ifndef RLRT_RUNTIME_VALUE_H
#define RLRT_RUNTIME_VALUE_H

#include <jansson.h>

#include "rl.pb-c.h"

Rl__Value *rl_value_from_json(const json_t *j);
void rl_value_free(Rl__Value *v);
json_t *rl_value_to_json(const Rl__Value *v, int depth);

#endif
