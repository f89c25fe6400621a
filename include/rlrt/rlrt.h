/* rlrt/rlrt.h — umbrella header: the whole public C API of librlrt.
 * Each module has its own header; include this one to get all of them. */
#ifndef RLRT_RLRT_H
#define RLRT_RLRT_H

#define RL_VERSION_MAJOR 0
#define RL_VERSION_MINOR 1
#define RL_VERSION_PATCH 0
#define RL_VERSION_STRING "0.1.0"

#include "rlrt/error.h"
#include "rlrt/log.h"
#include "rlrt/rng.h"
#include "rlrt/dtype.h"
#include "rlrt/nn/params.h"
#include "rlrt/nn/ops.h"
#include "rlrt/nn/device.h"
#include "rlrt/nn/lm_config.h"
#include "rlrt/nn/transformer.h"
#include "rlrt/nn/generate.h"
#include "rlrt/tensor.h"
#include "rlrt/dataproto.h"

#endif
