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
#include "rlrt/nn/tokenizer.h"
#include "rlrt/nn/optim.h"
#include "rlrt/nn/safetensors.h"
#include "rlrt/nn/checkpoint.h"
#include "rlrt/nn/lm_config.h"
#include "rlrt/nn/ops.h"
#include "rlrt/nn/device.h"
#include "rlrt/nn/transformer.h"
#include "rlrt/nn/generate.h"
#include "rlrt/nn/model.h"
#include "rlrt/nn/lm_model.h"
#include "rlrt/tensor.h"
#include "rlrt/dataproto.h"
#include "rlrt/algo/aepo.h"
#include "rlrt/config.h"
#include "rlrt/util.h"
#include "rlrt/runtime/cluster.h"
#include "rlrt/runtime/collective.h"
#include "rlrt/wire.h"
#include "rlrt/algo/advantage.h"
#include "rlrt/algo/kl.h"
#include "rlrt/algo/policy_loss.h"
#include "rlrt/algo/filter.h"
#include "rlrt/algo/offpolicy.h"
#include "rlrt/tools.h"
#include "rlrt/agent_loop.h"
#include "rlrt/algo/flow.h"
#include "rlrt/algo/diffusion.h"
#include "rlrt/algo/embodied.h"
#include "rlrt/reward.h"
#include "rlrt/data.h"
#include "rlrt/metrics.h"

#endif
