/* rlrt/rlrt.h — umbrella header: the whole public C API of librlrt.
 *
 * The public API is small on purpose: errors and logging, the config tree
 * and its schemas, tensors and DataProto with their wire format, the runtime
 * (driver core, worker loop and role registration, cluster.yaml, channels,
 * collectives, health), and the model interface over the flat parameter
 * buffer. Everything else (kernels, model kinds, algorithms, tokenizers,
 * rewards, the simulator) is internal to the source tree: its headers live
 * next to their code under common/ and may change without notice. */
#ifndef RLRT_RLRT_H
#define RLRT_RLRT_H

#define RL_VERSION_MAJOR 0
#define RL_VERSION_MINOR 1
#define RL_VERSION_PATCH 0
#define RL_VERSION_STRING "0.1.0"

#include "rlrt/error.h"
#include "rlrt/log.h"
#include "rlrt/dtype.h"
#include "rlrt/config.h"
#include "rlrt/tensor.h"
#include "rlrt/dataproto.h"
#include "rlrt/wire.h"
#include "rlrt/runtime/channel.h"
#include "rlrt/runtime/cluster.h"
#include "rlrt/runtime/collective.h"
#include "rlrt/runtime/cpus.h"
#include "rlrt/runtime/driver.h"
#include "rlrt/runtime/health.h"
#include "rlrt/runtime/relay.h"
#include "rlrt/runtime/worker.h"
#include "rlrt/nn/params.h"
#include "rlrt/nn/model.h"

#endif
