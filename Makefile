# rlrt — plain GNU make build. Outputs go under build/.
#
#   make                      librlrt.{so,a}, rl-* binaries, tests, benches
#   make test                 set up what the tests need (packages, LIBERO data, PyPI venvs,
#                             cached in build/), build, run every test; ends "N passed, N failed"
#   make run                  the default local job (see README.md)
#   make SANITIZE=address,undefined test
#   make CUDA=1               also compile the .cu sources with nvcc
#   make CUDA=1 test-gpu      CUDA kernels vs CPU + compute-sanitizer (needs a GPU)
#   make CUDA=emu             the .cu sources on the host emulation of CUDA (no GPU; make test runs its GPU tests)
#   make test-gpu-race        the kernel tests under ThreadSanitizer on that emulation (racecheck on the host)
#   make CUDA=1 gpu-bundle    build-gpu/: the GPU tests, bench and their libraries, for a GPU machine
#   make CUDA=1 bench-gpu     the GPU engine against PyTorch on the same GPU (needs a GPU)
#   make CUDA=emu gpu-dryrun  the device run (gpu-bundle + RL_GPU_BENCH=1 tests/gpu_check.sh) as a
#                             dry run on the host emulation, tiny sizes (tests/gpu_dryrun.sh)
#   make golden               regenerate tests/golden with /usr/bin/python3 + torch
#   make config-doc           docs/CONFIG.md from the config schemas (common/schema/)
#   make venv-ref             build/venv-ref: the PyPI packages the references need
#   make venv-data            build/venv-data: examples/prepare_data.py (chat templates, Parquet)
#   make bench-NAME           run bench/bench_NAME.sh, or every bench_NAME* binary
#   make venv-hpsv3           PyPI hpsv3 in build/venv-hpsv3/ (deploy/scorer_server.py --backend hpsv3)
#   make fuzz [FUZZ_SECONDS=60]
#   make install PREFIX=/usr/local
#   make libero-data          LIBERO-Object scenes for the env role (build/libero-data)
#   make MUJOCO=debian        link Debian's libmujoco 2.2.2 instead of the wheel's 3.17
#
# New sources are picked up by wildcard: common/<module>/*.c go into librlrt,
# tests/unit/test_*.c become test binaries, bench/bench_*.c bench binaries.

CC       ?= gcc
PREFIX   ?= /usr/local
SANITIZE ?=
CUDA     ?= 0
# MuJoCo for the env role (common/sim): `wheel` = the C library of PyPI's
# mujoco 3.17.0 wheel (what LIBERO runs; fetched into build/mujoco-3.17.0 by
# deploy/mujoco-wheel.sh), `debian` = libmujoco-dev 2.2.2 (half the speed).
MUJOCO   ?= wheel
MUJOCO_VERSION := 3.17.0
ifeq ($(MUJOCO),debian)
ifeq ($(SANITIZE)$(CUDA),0)
BUILD    ?= build-mjdebian
endif
endif
# Each flavour builds in its own tree so objects never mix.
ifneq ($(SANITIZE),)
BUILD    ?= build-san
else ifeq ($(CUDA),1)
BUILD    ?= build-cuda
else ifeq ($(CUDA)$(EMU_TSAN),emu1)
BUILD    ?= build-cuda-emu-tsan
else ifeq ($(CUDA),emu)
BUILD    ?= build-cuda-emu
else
BUILD    ?= build
endif
OPT      ?= -O2
PYTHON   ?= /usr/bin/python3
FUZZ_SECONDS ?= 60
FUZZ_MAX_LEN ?= 65536

PKGS      := libzmq libczmq libsodium libprotobuf-c libuv yaml-0.1 jansson openblas lapacke libmicrohttpd libsystemd \
             zlib libjpeg libpng libutf8proc libpcre2-8 libcrypto
PKG_CFLAGS := $(shell pkg-config --cflags $(PKGS) 2>/dev/null)
PKG_LIBS   := $(shell pkg-config --libs $(PKGS) 2>/dev/null)

WARN     := -Wall -Wextra -Werror -Wno-unused-parameter
CPPFLAGS := -Iinclude -I. -I$(BUILD)/gen -D_GNU_SOURCE
CFLAGS   := -std=c11 $(OPT) -g -fPIC -pthread -fopenmp $(WARN) $(PKG_CFLAGS)
LDLIBS   := $(PKG_LIBS) -lgif -lm -pthread -fopenmp

ifneq ($(SANITIZE),)
CFLAGS  += -fsanitize=$(SANITIZE) -fno-omit-frame-pointer -fno-sanitize-recover=all
LDFLAGS += -fsanitize=$(SANITIZE)
endif

# Quiet by default; `make V=1` prints every command.
ifeq ($(V),1)
Q :=
say = @true
else
Q := @
say = @printf '  %-6s %s\n' $(1) $(2)
endif

# ---- sources -------------------------------------------------------------
PROTO_SRC := $(wildcard proto/*.proto)
PROTO_C   := $(patsubst proto/%.proto,$(BUILD)/gen/%.pb-c.c,$(PROTO_SRC))
PROTO_H   := $(PROTO_C:.c=.h)

# common/sim (MuJoCo) is its own library, librlrt_sim: librlrt stays free of
# MuJoCo for every user that has no env.
LIB_SRC   := $(filter-out common/sim/%,$(sort $(shell find common -name '*.c')))
LIB_OBJ   := $(patsubst %.c,$(BUILD)/obj/%.o,$(LIB_SRC)) \
             $(patsubst $(BUILD)/gen/%.c,$(BUILD)/obj/gen/%.o,$(PROTO_C))

ifeq ($(CUDA),1)
NVCC      ?= $(shell command -v nvcc 2>/dev/null || echo /usr/local/cuda/bin/nvcc)
CUDA_HOME ?= $(patsubst %/bin/nvcc,%,$(NVCC))
CU_SRC    := $(sort $(shell find common -name '*.cu'))
CU_OBJ    := $(patsubst %.cu,$(BUILD)/obj/%.cu.o,$(CU_SRC))
LIB_OBJ   += $(CU_OBJ)
CPPFLAGS  += -DRL_CUDA=1 -I$(CUDA_HOME)/include
LDLIBS    += -L$(CUDA_HOME)/lib64 -Wl,-rpath,$(CUDA_HOME)/lib64 -lcublas -lcudart -lstdc++
NVCCFLAGS ?= -O2 -std=c++17 -Xcompiler -fPIC,-Wall -Iinclude -I. \
             -gencode arch=compute_90,code=sm_90 -gencode arch=compute_80,code=sm_80
endif

# CUDA=emu: the same CUDA sources on the host, without a GPU (tests/cuda_emu/):
# each .cu rewritten by emu_cu.pl and compiled by g++ against the emulator's
# cuda_runtime.h / cublas_v2.h, the emulator linked into librlrt. The GPU
# tests then run here (`make CUDA=emu test-gpu-emu`). NCCL stays out (its
# collectives report a build without CUDA).
ifeq ($(CUDA),emu)
CU_SRC    := $(sort $(shell find common -name '*.cu'))
CU_OBJ    := $(patsubst %.cu,$(BUILD)/obj/%.cu.o,$(CU_SRC)) $(BUILD)/obj/tests/cuda_emu/cuda_emu.o
LIB_OBJ   += $(CU_OBJ)
CPPFLAGS  += -DRL_CUDA=1 -Itests/cuda_emu/include
LDLIBS    += -lstdc++
EMU_CXXFLAGS := -std=c++17 $(OPT) -g -fPIC -pthread -Wall -Wextra -Werror -Wno-unused-parameter \
                -Wno-unknown-pragmas -Wno-sign-compare $(PKG_CFLAGS)
$(BUILD)/obj/common/runtime/collective_nccl.o: CPPFLAGS += -URL_CUDA
# EMU_TSAN=1: the kernels under ThreadSanitizer, each GPU thread a TSan fiber
# (tests/cuda_emu/cuda_emu.cpp): racecheck's shared-memory hazards, here
ifeq ($(EMU_TSAN),1)
EMU_CU_FLAGS := -fsanitize=thread
$(BUILD)/obj/tests/cuda_emu/cuda_emu.o: CPPFLAGS += -DRL_CUDA_EMU_TSAN
LDFLAGS += -fsanitize=thread
endif
endif

LIB_A  := $(BUILD)/lib/librlrt.a
LIB_SO := $(BUILD)/lib/librlrt.so

# ---- MuJoCo and librlrt_sim (the LIBERO env) ----------------------------------
MJ_HOME := build/mujoco-$(MUJOCO_VERSION)
ifeq ($(MUJOCO),wheel)
MJ_CFLAGS := -I$(MJ_HOME)/include
# rpath: the build tree, then $ORIGIN/../lib (where `make install` puts the
# library next to librlrt, so an installed tree works without the build tree)
MJ_LIBS   := -L$(abspath $(MJ_HOME))/lib -l:libmujoco.so.$(MUJOCO_VERSION) \
             -Wl,-rpath,$(abspath $(MJ_HOME))/lib -Wl,-rpath,'$$ORIGIN/../lib'
MJ_DEP    := $(MJ_HOME)/lib/libmujoco.so.$(MUJOCO_VERSION)
else ifeq ($(MUJOCO),debian)
MJ_CFLAGS :=
MJ_LIBS   := -lmujoco
MJ_DEP    :=
else
$(error MUJOCO must be wheel or debian, got '$(MUJOCO)')
endif
# rendering (common/sim/render.c): headless EGL + libpng
SIM_LIBS := $(MJ_LIBS) -lEGL -lpng
SIM_SRC := $(sort $(wildcard common/sim/*.c))
SIM_OBJ := $(patsubst %.c,$(BUILD)/obj/%.o,$(SIM_SRC))
LIB_SIM := $(BUILD)/lib/librlrt_sim.a
LIBERO_DATA ?= build/libero-data
LIBERO_VENV ?= build/venv-libero

# Binaries: bin/<name>/*.c style folders with a main each.
DRIVER_SRC := $(sort $(shell find driver -name '*.c'))
WORKER_SRC := $(sort $(shell find workers -name '*.c'))
BINS :=
ifneq ($(DRIVER_SRC),)
BINS += $(BUILD)/bin/rl-driver
endif
ifneq ($(WORKER_SRC),)
BINS += $(BUILD)/bin/rl-worker
endif
EXAMPLE_SRC := $(sort $(wildcard examples/*.c))
BINS += $(patsubst examples/%.c,$(BUILD)/bin/rl-%,$(EXAMPLE_SRC))

TEST_COMMON_SRC := $(sort $(wildcard tests/common/*.c))
TEST_COMMON_OBJ := $(patsubst %.c,$(BUILD)/obj/%.o,$(TEST_COMMON_SRC))
TEST_SRC  := $(sort $(wildcard tests/unit/test_*.c))
TEST_BINS := $(patsubst tests/unit/%.c,$(BUILD)/tests/%,$(TEST_SRC))

# Every fuzz target is also compiled into the unit tests, its entry point
# renamed rl_<target>_one (tests/common/fuzz_replay.h), so the tests replay
# fuzz/regressions/<target>/ through the target's own oracles.
FUZZ_SRC        := $(sort $(wildcard fuzz/fuzz_*.c))
FUZZ_REPLAY_OBJ := $(patsubst fuzz/%.c,$(BUILD)/obj/fuzz/%.o,$(FUZZ_SRC))
FUZZ_REPLAY_A   := $(BUILD)/lib/librlrt_fuzz_replay.a

BENCH_SRC  := $(sort $(wildcard bench/bench_*.c))
BENCH_BINS := $(patsubst bench/%.c,$(BUILD)/bench/%,$(BENCH_SRC))

.PHONY: all lib bins tests benches test test-setup test-gpu emu-tests test-gpu-race gpu-bundle gpu-dryrun bench-gpu run deps golden fuzz install clean venv-ref config-doc \
        venv-deploy venv-data fuzz-ci venv-hpsv3 libero-data mujoco
.SECONDARY:
.DELETE_ON_ERROR:

all: lib bins tests benches

lib: $(LIB_A) $(LIB_SO)
ifeq ($(CUDA),emu)
lib: $(BUILD)/CUDA_EMU
# marks the tree as the host emulation's (tests/integration/gpu_jobs.py reads it)
$(BUILD)/CUDA_EMU:
	@mkdir -p $(dir $@)
	@echo "built by make CUDA=emu: CUDA kernels on the host emulation (tests/cuda_emu/)" > $@
endif
bins: $(BINS)
tests: $(TEST_BINS)
benches: $(BENCH_BINS)

# ---- dependencies ----------------------------------------------------------
# Installs missing Debian packages (apt-get as root; prints the line otherwise).
deps:
	@deploy/install-deps.sh --if-missing

# ---- generated protobuf-c code ------------------------------------------------
$(BUILD)/gen/%.pb-c.c $(BUILD)/gen/%.pb-c.h: proto/%.proto
	@mkdir -p $(dir $@)
	$(call say,PROTOC,$<)
	$(Q)protoc-c --proto_path=proto --c_out=$(BUILD)/gen $<

# ---- objects ---------------------------------------------------------------
$(BUILD)/obj/gen/%.o: $(BUILD)/gen/%.c
	@mkdir -p $(dir $@)
	$(call say,CC,$<)
	$(Q)$(CC) $(CPPFLAGS) $(CFLAGS) -Wno-unused-parameter -MMD -MP -c $< -o $@

$(BUILD)/obj/%.o: %.c $(PROTO_H)
	@mkdir -p $(dir $@)
	$(call say,CC,$<)
	$(Q)$(CC) $(CPPFLAGS) $(CFLAGS) -MMD -MP -c $< -o $@

$(BUILD)/obj/fuzz/%.o: fuzz/%.c $(PROTO_H)
	@mkdir -p $(dir $@)
	$(call say,CC,$<)
	$(Q)$(CC) $(CPPFLAGS) $(CFLAGS) -DLLVMFuzzerTestOneInput=rl_$*_one -MMD -MP -c $< -o $@

# Tests find the source tree from their own path; this is the fallback for
# build directories outside it (tests/common/srcdir.h).
$(BUILD)/obj/tests/common/srcdir.o: CPPFLAGS += -DRL_TEST_SOURCE_DIR='"$(CURDIR)"'

ifeq ($(CUDA),emu)
$(BUILD)/obj/%.cu.o: %.cu tests/cuda_emu/emu_cu.pl tests/cuda_emu/include/cuda_runtime.h
	@mkdir -p $(dir $@) $(BUILD)/gen/emu/$(dir $<)
	$(call say,EMU,$<)
	$(Q)perl tests/cuda_emu/emu_cu.pl $< > $(BUILD)/gen/emu/$<.cpp
	$(Q)$(CXX) $(CPPFLAGS) $(EMU_CXXFLAGS) $(EMU_CU_FLAGS) -MMD -MP -c $(BUILD)/gen/emu/$<.cpp -o $@

$(BUILD)/obj/tests/cuda_emu/cuda_emu.o: tests/cuda_emu/cuda_emu.cpp
	@mkdir -p $(dir $@)
	$(call say,CXX,$<)
	$(Q)$(CXX) $(CPPFLAGS) $(EMU_CXXFLAGS) -MMD -MP -c $< -o $@

# the emulator's own checks (tests/cuda_emu/emu_selftest.cu)
$(BUILD)/tests/emu_selftest: $(BUILD)/obj/tests/cuda_emu/emu_selftest.cu.o $(BUILD)/obj/tests/cuda_emu/cuda_emu.o
	@mkdir -p $(dir $@)
	$(call say,LD,$@)
	$(Q)$(CXX) $(LDFLAGS) $^ -o $@ $(PKG_LIBS) -pthread
tests: $(BUILD)/tests/emu_selftest
else
$(BUILD)/obj/%.cu.o: %.cu
	@mkdir -p $(dir $@)
	$(call say,NVCC,$<)
	$(Q)$(NVCC) $(NVCCFLAGS) -DRL_CUDA=1 -MMD -MP -c $< -o $@
endif

$(MJ_HOME)/lib/libmujoco.so.$(MUJOCO_VERSION):
	@deploy/mujoco-wheel.sh $(MUJOCO_VERSION) $(MJ_HOME)

mujoco: $(MJ_DEP)

$(SIM_OBJ): CPPFLAGS += $(MJ_CFLAGS)
$(SIM_OBJ): | $(MJ_DEP)

$(LIB_SIM): $(SIM_OBJ)
	@mkdir -p $(dir $@)
	$(call say,AR,$@)
	$(Q)rm -f $@
	$(Q)ar rcs $@ $^

# The LIBERO-Object scenes (PyPI venv + dump; cached when complete).
libero-data:
	@deploy/libero-data.sh $(LIBERO_DATA) $(LIBERO_VENV)

$(LIB_A): $(LIB_OBJ)
	@mkdir -p $(dir $@)
	$(call say,AR,$@)
	$(Q)rm -f $@
	$(Q)ar rcs $@ $^

$(LIB_SO): $(LIB_OBJ)
	@mkdir -p $(dir $@)
	$(call say,LD,$@)
	$(Q)$(CC) -shared $(LDFLAGS) -Wl,-soname,librlrt.so -o $@ $^ $(LDLIBS)

# the driver replays LIBERO evaluation episodes into GIFs (driver/recipes/embodied/libero_gif.c)
$(BUILD)/bin/rl-driver: $(patsubst %.c,$(BUILD)/obj/%.o,$(DRIVER_SRC)) $(LIB_SIM) $(LIB_A)
	@mkdir -p $(dir $@)
	$(call say,LD,$@)
	$(Q)$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS) $(SIM_LIBS)

$(BUILD)/bin/rl-worker: $(patsubst %.c,$(BUILD)/obj/%.o,$(WORKER_SRC)) $(LIB_SIM) $(LIB_A)
	@mkdir -p $(dir $@)
	$(call say,LD,$@)
	$(Q)$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS) $(SIM_LIBS)

# rl-libero: the env on the command line (replay, expert, render; examples/libero.c)
$(BUILD)/bin/rl-libero: $(BUILD)/obj/examples/libero.o $(LIB_SIM) $(LIB_A)
	@mkdir -p $(dir $@)
	$(call say,LD,$@)
	$(Q)$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS) $(SIM_LIBS)

$(BUILD)/bin/rl-%: $(BUILD)/obj/examples/%.o $(LIB_A)
	@mkdir -p $(dir $@)
	$(call say,LD,$@)
	$(Q)$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)

$(FUZZ_REPLAY_A): $(FUZZ_REPLAY_OBJ)
	@mkdir -p $(dir $@)
	$(call say,AR,$@)
	$(Q)rm -f $@
	$(Q)ar rcs $@ $^

# the env role's methods against a misbehaving policy peer (they live in rl-worker)
$(BUILD)/tests/test_sim_env_worker: $(BUILD)/obj/tests/unit/test_sim_env_worker.o $(BUILD)/obj/workers/env/env.o \
        $(TEST_COMMON_OBJ) $(LIB_SIM) $(LIB_A)
	@mkdir -p $(dir $@)
	$(call say,LD,$@)
	$(Q)$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS) $(SIM_LIBS) -lcmocka

# the actor role's methods called in-process with bad request tensors (they live in rl-worker)
$(BUILD)/tests/test_actor_targets: $(BUILD)/obj/tests/unit/test_actor_targets.o \
        $(patsubst %.c,$(BUILD)/obj/%.o,$(wildcard workers/actor/*.c)) $(TEST_COMMON_OBJ) $(LIB_A)
	@mkdir -p $(dir $@)
	$(call say,LD,$@)
	$(Q)$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS) -lcmocka

# the rollout's CUDA IPC receiver (workers/rollout/weights_ipc.c, in rl-worker) over shared memory
$(BUILD)/tests/test_rollout_weights_ipc: $(BUILD)/obj/tests/unit/test_rollout_weights_ipc.o \
        $(BUILD)/obj/workers/rollout/weights_ipc.o $(TEST_COMMON_OBJ) $(LIB_A)
	@mkdir -p $(dir $@)
	$(call say,LD,$@)
	$(Q)$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS) -lcmocka

# the driver's GIFs of LIBERO evaluation episodes (driver/recipes/embodied/libero_gif.c, in rl-driver)
$(BUILD)/tests/test_sim_libero_gif: $(BUILD)/obj/tests/unit/test_sim_libero_gif.o \
        $(BUILD)/obj/driver/recipes/embodied/libero_gif.o $(TEST_COMMON_OBJ) $(LIB_SIM) $(LIB_A)
	@mkdir -p $(dir $@)
	$(call say,LD,$@)
	$(Q)$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS) $(SIM_LIBS) -lcmocka

$(BUILD)/tests/test_sim_%: $(BUILD)/obj/tests/unit/test_sim_%.o $(TEST_COMMON_OBJ) $(LIB_SIM) $(LIB_A)
	@mkdir -p $(dir $@)
	$(call say,LD,$@)
	$(Q)$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS) $(SIM_LIBS) -lcmocka

$(BUILD)/bench/bench_env: $(BUILD)/obj/bench/bench_env.o $(TEST_COMMON_OBJ) $(LIB_SIM) $(LIB_A)
	@mkdir -p $(dir $@)
	$(call say,LD,$@)
	$(Q)$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS) $(SIM_LIBS) -lcmocka

$(BUILD)/tests/%: $(BUILD)/obj/tests/unit/%.o $(TEST_COMMON_OBJ) $(FUZZ_REPLAY_A) $(LIB_A)
	@mkdir -p $(dir $@)
	$(call say,LD,$@)
	$(Q)$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS) -lcmocka

# the one-step-off prefetch queue of the rlvr recipe (driver/recipes/lm/rlvr_async.c, in rl-driver)
$(BUILD)/tests/test_rlvr_async: $(BUILD)/obj/tests/unit/test_rlvr_async.o \
        $(BUILD)/obj/driver/recipes/lm/rlvr_async.o $(BUILD)/obj/driver/recipes/lm/lm_common.o \
        $(BUILD)/obj/driver/recipes/actor_job.o $(BUILD)/obj/driver/recipes/phases.o \
        $(TEST_COMMON_OBJ) $(LIB_A)
	@mkdir -p $(dir $@)
	$(call say,LD,$@)
	$(Q)$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS) -lcmocka

# the embodied track's pieces, with the demonstrations of driver/recipes/embodied/flow_demos.c (in rl-driver)
$(BUILD)/tests/test_embodied: $(BUILD)/obj/tests/unit/test_embodied.o \
        $(BUILD)/obj/driver/recipes/embodied/flow_demos.o $(TEST_COMMON_OBJ) $(LIB_A)
	@mkdir -p $(dir $@)
	$(call say,LD,$@)
	$(Q)$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS) -lcmocka

# the flow policy's offline self-training drift (driver/recipes/embodied/flow_demos.c: the demonstration pairs)
$(BUILD)/bench/bench_flow_selftrain: $(BUILD)/obj/bench/bench_flow_selftrain.o \
        $(BUILD)/obj/driver/recipes/embodied/flow_demos.o $(TEST_COMMON_OBJ) $(LIB_A)
	@mkdir -p $(dir $@)
	$(call say,LD,$@)
	$(Q)$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS) -lcmocka

$(BUILD)/bench/%: $(BUILD)/obj/bench/%.o $(TEST_COMMON_OBJ) $(LIB_A)
	@mkdir -p $(dir $@)
	$(call say,LD,$@)
	$(Q)$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS) -lcmocka

# ---- the README's two commands ------------------------------------------------
# What the tests need besides the build, so that none of them skips for want
# of a setup step: the Debian packages of the reference checks, the
# LIBERO-Object scenes and the two PyPI venvs, each cached in build/ (the
# first run downloads ~2.4 GB, later runs check the caches in seconds).
# Without PyPI it stops with the command to run.
test-setup:
	@deploy/install-deps.sh --ref
	@$(MAKE) --no-print-directory libero-data venv-ref venv-deploy venv-data || { \
	    echo "make test: the setup above failed; the tests need it (PyPI once, then cached in build/)."; \
	    echo "make test: fix what it says, or run the steps one by one: make libero-data; make venv-ref; make venv-deploy; make venv-data"; \
	    exit 1; }

# The default flavour also builds the host emulation of CUDA (EMU_BUILD,
# `make CUDA=emu`: tests/cuda_emu/) and runs the GPU tests on it (emu_*).
ifeq ($(SANITIZE)$(CUDA),0)
EMU_BUILD ?= build-cuda-emu
endif
test: deps test-setup
	@$(MAKE) --no-print-directory all
	@$(if $(EMU_BUILD),$(MAKE) --no-print-directory CUDA=emu BUILD=$(EMU_BUILD) emu-tests)
	@BUILD=$(BUILD) EMU_BUILD=$(EMU_BUILD) PYTHON=$(PYTHON) LIBERO_DATA=$(LIBERO_DATA) LIBERO_VENV=$(LIBERO_VENV) tests/run.sh

# The checks that need an NVIDIA GPU; use with CUDA=1 (tests/gpu_check.sh).
test-gpu: all tests
	@BUILD=$(BUILD) GPU_TESTS="$(GPU_TESTS)" tests/gpu_check.sh; rc=$$?; [ $$rc = 77 ] || exit $$rc

# The GPU tests, the GPU benchmark and the libraries they load, for a GPU
# machine without Debian's packages (deploy/gpu-bundle.sh): build here with
# `make CUDA=1 gpu-bundle`, then run there `BUILD=build-gpu
# RL_GPU_BENCH=1 tests/gpu_check.sh` with build-gpu carried along.
# LIBERO-Object tasks whose physics-only scenes travel in the bundle
# (deploy/libero-subset.sh: ~0.9 MiB; the full scenes are 109 MB)
GPU_LIBERO_TASKS := 0 1
GPU_TESTS := test_nn_cuda test_nn_lm_cuda test_nn_flow_cuda test_nn_conv_cuda test_nn_cuda_ipc test_channel_ipc test_collective_nccl
# the kernel tests under ThreadSanitizer on the host emulation: intra-block
# races, as compute-sanitizer's racecheck (tests/cuda_emu/race_check.sh)
test-gpu-race:
	@$(MAKE) --no-print-directory CUDA=emu EMU_TSAN=1 BUILD=build-cuda-emu-tsan emu-tests
	@tests/cuda_emu/race_check.sh build-cuda-emu-tsan
# what tests/run.sh runs on the host emulation (make CUDA=emu)
emu-tests: lib bins $(addprefix $(BUILD)/tests/,$(GPU_TESTS)) $(BUILD)/tests/emu_selftest
# the programs tests/gpu_check.sh and bench/bench_gpu.sh run from the bundle
GPU_BUNDLE_PROGS := $(addprefix tests/,$(GPU_TESTS)) bench/bench_gpu_train bench/bench_gpu_weight_sync \
    bin/rl-driver bin/rl-worker
gpu-bundle: all tests benches
	@deploy/gpu-bundle.sh $(BUILD) build-gpu $(GPU_BUNDLE_PROGS)
	@if [ -f build/libero-data/manifest.json ]; then \
	    deploy/libero-subset.sh build/libero-data build-gpu/libero-data $(GPU_LIBERO_TASKS); \
	else echo "gpu-bundle: no build/libero-data (make libero-data): gpu_jobs.py's LIBERO job will skip"; fi
	@kb=$$(du -sk build-gpu | cut -f1); \
	    tkb=$$(git ls-files -z 2>/dev/null | du -ck --files0-from=- 2>/dev/null | tail -1 | cut -f1); \
	    echo "gpu-bundle: build-gpu: $$((kb / 1024)) MiB, with the tracked files $$(((kb + $${tkb:-0}) / 1024)) MiB to carry"; \
	    [ $$((kb + $${tkb:-0})) -le $$((62 * 1024)) ] || { echo "gpu-bundle: build-gpu and the tracked files are over 62 MiB (the device tool carries 64)" >&2; exit 1; }

# The device run as a dry run on the host emulation (CUDA=emu;
# tests/gpu_dryrun.sh): the emulated build bundled as gpu-bundle bundles the
# CUDA one (build-gpu-emu/, the same programs and libraries in bundle.tar.gz, the LIBERO subset),
# then RL_GPU_DRYRUN=1 RL_GPU_BENCH=1 tests/gpu_check.sh on it with tiny
# sizes, its sections into a copy of docs/RESULTS.md. About 2 minutes on 2 cores.
gpu-dryrun: all tests benches
	@deploy/gpu-bundle.sh $(BUILD) build-gpu-emu $(GPU_BUNDLE_PROGS)
	@cp $(BUILD)/CUDA_EMU build-gpu-emu/
	@if [ -f build/libero-data/manifest.json ]; then \
	    deploy/libero-subset.sh build/libero-data build-gpu-emu/libero-data $(GPU_LIBERO_TASKS); \
	else echo "gpu-dryrun: no build/libero-data (make libero-data): the LIBERO jobs will skip"; fi
	@BUILD=build-gpu-emu PYTHON=$(PYTHON) tests/gpu_dryrun.sh

# rlrt's GPU engine against PyTorch on the same GPU (CUDA=1; bench/bench_gpu.sh)
bench-gpu: benches
	@BUILD=$(BUILD) bench/bench_gpu.sh; rc=$$?; [ $$rc = 77 ] || exit $$rc

run: deps
	@$(MAKE) --no-print-directory all
	@BUILD=$(BUILD) examples/run-default.sh

# docs/CONFIG.md from the config schemas (common/schema/)
config-doc: bins
	@$(BUILD)/bin/rl-driver config-doc > docs/CONFIG.md
	@echo "config-doc: docs/CONFIG.md written"

# ---- reference venv ---------------------------------------------------------------
# PyPI packages of the reference generators and format cross-checks, in a
# venv that sees Debian's torch and numpy. Always build/venv-ref (whatever
# BUILD is): the scripts look for it at <repo>/build/venv-ref. Re-made only
# when the requirements (or the script) change.
VENV_REF     := build/venv-ref
VENV_REF_REQ := tests/reference/requirements-ref.txt

venv-ref: $(VENV_REF)/.requirements
	@echo "venv-ref: $(VENV_REF) is up to date with $(VENV_REF_REQ)"

$(VENV_REF)/.requirements: $(VENV_REF_REQ) deploy/venv-ref.sh
	@deploy/venv-ref.sh $(VENV_REF) $(VENV_REF_REQ)

# ---- deployment validator venv ------------------------------------------------------
# kubernetes-validate (PyPI) for tests/integration/deploy_k8s.sh; .ci/run makes
# it. Always build/venv-deploy; re-made only when the requirements change.
VENV_DEPLOY     := build/venv-deploy
VENV_DEPLOY_REQ := deploy/requirements-deploy.txt

venv-deploy: $(VENV_DEPLOY)/.requirements
	@echo "venv-deploy: $(VENV_DEPLOY) is up to date with $(VENV_DEPLOY_REQ)"

$(VENV_DEPLOY)/.requirements: $(VENV_DEPLOY_REQ) deploy/venv-ref.sh
	@RL_VENV_IMPORTS=kubernetes_validate deploy/venv-ref.sh $(VENV_DEPLOY) $(VENV_DEPLOY_REQ)

# ---- data-preparation venv -----------------------------------------------------------
# transformers (chat templates), jinja2 and pyarrow (Parquet) for
# examples/prepare_data.py and tests/integration/hf_model.py. Always
# build/venv-data; re-made only when the requirements change.
VENV_DATA     := build/venv-data
VENV_DATA_REQ := deploy/requirements-data.txt

venv-data: $(VENV_DATA)/.requirements
	@echo "venv-data: $(VENV_DATA) is up to date with $(VENV_DATA_REQ)"

$(VENV_DATA)/.requirements: $(VENV_DATA_REQ) deploy/venv-ref.sh
	@RL_VENV_IMPORTS="transformers tokenizers safetensors jinja2 pyarrow numpy" \
	    deploy/venv-ref.sh $(VENV_DATA) $(VENV_DATA_REQ)

# ---- golden files, benchmarks, fuzzing -------------------------------------------
golden:
	@set -e; for g in $(sort $(wildcard tests/reference/gen_*.py)); do \
	    echo "golden: $$g"; $(PYTHON) $$g; done

# bench-NAME runs bench/bench_NAME.sh, or the bench_NAME* programs; a dash in
# NAME is an underscore in the file name (bench-rl-long: bench_rl_long.sh)
bench-%: deps
	@$(MAKE) --no-print-directory all
	@set -e; if [ -x bench/bench_$(subst -,_,$*).sh ]; then BUILD=$(BUILD) bench/bench_$(subst -,_,$*).sh; \
	else found=0; for b in $(BUILD)/bench/bench_$(subst -,_,$*) $(BUILD)/bench/bench_$(subst -,_,$*)_*; do \
	    [ -x "$$b" ] || continue; found=1; echo "== $$b"; "$$b"; done; \
	    [ $$found = 1 ] || { echo "no benchmark named '$*' (bench/bench_$(subst -,_,$*).c or .sh)"; exit 2; }; fi

FUZZ_BINS := $(patsubst fuzz/%.c,$(BUILD)/fuzz/%,$(FUZZ_SRC))
FUZZ_CFLAGS := -std=c11 -O1 -g -fsanitize=fuzzer-no-link,address,undefined $(CPPFLAGS) $(PKG_CFLAGS)
FUZZ_LIB_OBJ := $(patsubst %.c,$(BUILD)/fuzz/obj/%.o,$(LIB_SRC)) \
                $(patsubst $(BUILD)/gen/%.c,$(BUILD)/fuzz/obj/gen/%.o,$(PROTO_C))

$(BUILD)/fuzz/obj/gen/%.o: $(BUILD)/gen/%.c
	@mkdir -p $(dir $@)
	clang $(FUZZ_CFLAGS) -c $< -o $@

$(BUILD)/fuzz/obj/%.o: %.c $(PROTO_H)
	@mkdir -p $(dir $@)
	clang $(FUZZ_CFLAGS) -fopenmp -c $< -o $@

$(BUILD)/fuzz/%: fuzz/%.c $(FUZZ_LIB_OBJ)
	@mkdir -p $(dir $@)
	clang $(FUZZ_CFLAGS) -fsanitize=fuzzer $^ -o $@ $(PKG_LIBS) -lgif -lm -pthread -fopenmp

# Each target runs FUZZ_SECONDS from the seeds, the kept corpus and its
# regression inputs (read-only); a crash lands in fuzz/regressions/<target>/,
# where the unit tests replay it, and the other targets still run. The end
# prints each target's coverage (libFuzzer's final cov:/ft: counts).
fuzz: deps $(FUZZ_BINS)
	@bad=""; rm -f $(BUILD)/fuzz/coverage.txt; for f in $(FUZZ_BINS); do n=$$(basename $$f); \
	    mkdir -p fuzz/corpus/$$n fuzz/regressions/$$n $(BUILD)/fuzz/work/$$n; \
	    echo "fuzz: $$n for $(FUZZ_SECONDS)s"; \
	    $$f -max_total_time=$(FUZZ_SECONDS) -max_len=$(FUZZ_MAX_LEN) \
	        -artifact_prefix=fuzz/regressions/$$n/ $(BUILD)/fuzz/work/$$n fuzz/corpus/$$n \
	        $$( [ -d fuzz/seeds/$$n ] && echo fuzz/seeds/$$n) fuzz/regressions/$$n \
	        >$(BUILD)/fuzz/$$n.log 2>&1 || { bad="$$bad $$n"; tail -30 $(BUILD)/fuzz/$$n.log; }; \
	    last=$$(grep -E '^#[0-9]+.*cov: ' $(BUILD)/fuzz/$$n.log | tail -1); \
	    printf '%-22s %s\n' $$n "$$(echo "$$last" | sed -n 's/^#\([0-9]*\).*cov: \([0-9]*\) ft: \([0-9]*\).*/coverage edges = \2, features = \3, runs = \1/p')" \
	        >>$(BUILD)/fuzz/coverage.txt; done; \
	echo "fuzz: coverage per target ($(FUZZ_SECONDS) s each; logs in $(BUILD)/fuzz/)"; \
	sed 's/^/  /' $(BUILD)/fuzz/coverage.txt; \
	if [ -n "$$bad" ]; then echo "fuzz: crashes in:$$bad (inputs in fuzz/regressions/)"; exit 1; fi

# CI's bounded run: every target for FUZZ_CI_SECONDS (minutes in all).
FUZZ_CI_SECONDS ?= 20
fuzz-ci:
	@$(MAKE) --no-print-directory fuzz FUZZ_SECONDS=$(FUZZ_CI_SECONDS)

# ---- the HPSv3 scorer's Python environment (optional, a GPU host) -------------------
# PyPI packages live in a venv inside the project tree; Debian's python3-zmq
# and python3-numpy are reused (--system-site-packages).
venv-hpsv3:
	$(PYTHON) -m venv --system-site-packages build/venv-hpsv3
	build/venv-hpsv3/bin/pip install hpsv3
	@echo "start the server with: build/venv-hpsv3/bin/python deploy/scorer_server.py --backend hpsv3 --checkpoint FILE"

# ---- install -------------------------------------------------------------------
install: lib bins $(PROTO_H)
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/lib/pkgconfig \
	    $(DESTDIR)$(PREFIX)/include/rlrt
	for b in $(BINS); do install -m 755 $$b $(DESTDIR)$(PREFIX)/bin/; done
	install -m 644 $(LIB_A) $(DESTDIR)$(PREFIX)/lib/
	install -m 755 $(LIB_SO) $(DESTDIR)$(PREFIX)/lib/
	$(if $(MJ_DEP),install -m 755 $(MJ_DEP) $(DESTDIR)$(PREFIX)/lib/)
	cp -r include/rlrt/. $(DESTDIR)$(PREFIX)/include/rlrt/
	install -m 644 $(PROTO_H) $(DESTDIR)$(PREFIX)/include/
	sed -e 's|@PREFIX@|$(PREFIX)|g' -e 's|@VERSION@|0.1.0|g' \
	    -e 's|@REQUIRES@|$(PKGS)|g' deploy/rlrt.pc.in \
	    > $(DESTDIR)$(PREFIX)/lib/pkgconfig/rlrt.pc

clean:
	rm -rf $(BUILD)

-include $(shell find $(BUILD)/obj -name '*.d' 2>/dev/null)
