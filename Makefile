# gmshim — build, test, install.
# `make` builds build/libgmshim.so, build/gmshim and the fake CUDA runtime; `make test` checks the
# packages it needs (installing them with apt-get when run as root), builds and runs every test.

CUDA_HOME ?= /usr/local/cuda
PREFIX    ?= /usr/local
DESTDIR   ?=
BUILD     ?= build
CC        ?= cc
V         ?= 0

ifeq ($(V),0)
Q := @
else
Q :=
endif

# Our flags first, the user's CFLAGS/LDFLAGS last so they win.
GM_WARN    := -Wall -Wextra -Wshadow -Wstrict-prototypes -Wmissing-prototypes -Wno-unused-parameter
GM_OPT     ?= -O2 -g
GM_SAN     ?=
# The shim and the analyzer share only common/ (the log format, the pool's policy code, the
# version): the analyzer is built without -Ishim.
GM_CPPFLAGS := -D_GNU_SOURCE -I$(CUDA_HOME)/include -Icommon
GM_CFLAGS  := -std=c11 $(GM_OPT) $(GM_WARN) -pthread -fno-omit-frame-pointer $(GM_SAN)
ALL_CFLAGS  = $(GM_CPPFLAGS) $(GM_CFLAGS) $(CFLAGS)
ALL_LDFLAGS = -pthread $(GM_SAN) $(LDFLAGS)

PKG_CONFIG   ?= pkg-config
CHECK_CFLAGS := $(shell $(PKG_CONFIG) --cflags check 2>/dev/null)
CHECK_LIBS   := $(shell $(PKG_CONFIG) --libs check 2>/dev/null)

# ---- sources -------------------------------------------------------------------------------
COMMON_SRC   := $(wildcard common/*.c)
COMMON_OBJ   := $(COMMON_SRC:%.c=$(BUILD)/%.o)
SHIM_SRC     := $(wildcard shim/*.c)
SHIM_OBJ     := $(SHIM_SRC:%.c=$(BUILD)/%.o)
# Unit tests link every shim module except the exported hooks (they would interpose the test).
SHIM_LIB_OBJ := $(filter-out $(BUILD)/shim/hooks.o,$(SHIM_OBJ))
ANALYZER_SRC := $(wildcard analyzer/*.c)
ANALYZER_OBJ := $(ANALYZER_SRC:%.c=$(BUILD)/%.o)
ANALYZER_LIB_OBJ := $(filter-out $(BUILD)/analyzer/main.o,$(ANALYZER_OBJ))
UNIT_SRC     := $(wildcard tests/unit/*.c)
UNIT_OBJ     := $(UNIT_SRC:%.c=$(BUILD)/%.o)
INTEG_SRC    := $(wildcard tests/integration/*.c)
INTEG_BIN    := $(INTEG_SRC:tests/integration/%.c=$(BUILD)/tests/integration/%)
BENCH_SRC    := $(wildcard bench/*.c)
BENCH_BIN    := $(BENCH_SRC:bench/%.c=$(BUILD)/bench/%)

LIB      := $(BUILD)/libgmshim.so
CLI      := $(BUILD)/gmshim
RUNNER   := $(BUILD)/tests/check_gmshim

.PHONY: all test test-run test-asan test-tsan deps install uninstall clean demo bench fuzz
all: $(LIB) $(CLI) fake $(INTEG_BIN) $(BENCH_BIN)

include tests/fake/fake.mk
-include tests/fuzz/fuzz.mk
-include tests/fake_cupti/fake_cupti.mk

$(BUILD) $(BUILD)/common $(BUILD)/shim $(BUILD)/analyzer $(BUILD)/tests/unit $(BUILD)/tests/integration $(BUILD)/bench:
	$(Q)mkdir -p $@

# Prerequisites, checked before the first compile (every object waits for its directory): one
# line for each missing one instead of a compiler error. `+`: `make -n` checks them too.
.PHONY: prereqs prereqs-test
prereqs:
	+$(Q)CC="$(CC)" CPPFLAGS="$(CPPFLAGS)" CFLAGS="$(CFLAGS)" CUDA_HOME="$(CUDA_HOME)" sh scripts/check-prereqs build
prereqs-test:
	+$(Q)PKG_CONFIG="$(PKG_CONFIG)" sh scripts/check-prereqs test
$(BUILD)/common $(BUILD)/shim $(BUILD)/analyzer $(BUILD)/tests/integration $(BUILD)/bench $(BUILD)/fake $(BUILD)/gpu: | prereqs
$(BUILD)/tests/unit: | prereqs prereqs-test

$(BUILD)/shim/%.o: shim/%.c | $(BUILD)/shim
	@[ "$(V)" != 0 ] || echo "  CC      $@"
	$(Q)$(CC) $(ALL_CFLAGS) -Ishim -fPIC -fvisibility=hidden -MMD -MP -c $< -o $@

# common/: one object, linked into the library, the CLI and the unit runner alike.
$(BUILD)/common/%.o: common/%.c | $(BUILD)/common
	@[ "$(V)" != 0 ] || echo "  CC      $@"
	$(Q)$(CC) $(ALL_CFLAGS) -fPIC -fvisibility=hidden -MMD -MP -c $< -o $@

$(LIB): $(SHIM_OBJ) $(COMMON_OBJ)
	@[ "$(V)" != 0 ] || echo "  LD      $@"
	$(Q)$(CC) -shared -Wl,-soname,libgmshim.so -Wl,--no-undefined -Wl,-z,now $^ -o $@ $(ALL_LDFLAGS) -ldl

$(BUILD)/analyzer/%.o: analyzer/%.c | $(BUILD)/analyzer
	@[ "$(V)" != 0 ] || echo "  CC      $@"
	$(Q)$(CC) $(ALL_CFLAGS) -Ianalyzer -MMD -MP -c $< -o $@

$(CLI): $(ANALYZER_OBJ) $(COMMON_OBJ)
	@[ "$(V)" != 0 ] || echo "  LD      $@"
	$(Q)$(CC) $^ -o $@ $(ALL_LDFLAGS) -lm

# ---- tests ---------------------------------------------------------------------------------
$(BUILD)/tests/unit/%.o: tests/unit/%.c | $(BUILD)/tests/unit
	@[ "$(V)" != 0 ] || echo "  CC      $@"
	$(Q)$(CC) $(ALL_CFLAGS) $(CHECK_CFLAGS) -Itests -Ishim -Ianalyzer -MMD -MP -c $< -o $@

$(RUNNER): $(UNIT_OBJ) $(SHIM_LIB_OBJ) $(ANALYZER_LIB_OBJ) $(COMMON_OBJ) $(FAKE_LIB)
	@[ "$(V)" != 0 ] || echo "  LD      $@"
	$(Q)$(CC) $(UNIT_OBJ) $(SHIM_LIB_OBJ) $(ANALYZER_LIB_OBJ) $(COMMON_OBJ) -o $@ $(ALL_LDFLAGS) \
	    -L$(BUILD)/fake -Wl,-rpath,'$$ORIGIN/../fake' -lcudart $(CHECK_LIBS) -ldl -lm

$(BUILD)/tests/integration/%: tests/integration/%.c tests/integration/itest.h shim/gmshim.h \
                               tests/fakecuda.h $(FAKE_LIB) | $(BUILD)/tests/integration
	@[ "$(V)" != 0 ] || echo "  CC      $@"
	$(Q)$(CC) $(ALL_CFLAGS) -Ishim -Itests $< -o $@ $(ALL_LDFLAGS) \
	    -L$(BUILD)/fake -Wl,-rpath,'$$ORIGIN/../../fake' -Wl,--as-needed -lcudart -Wl,--no-as-needed -ldl

$(BUILD)/bench/%: bench/%.c shim/gmshim.h $(FAKE_LIB) | $(BUILD)/bench
	@[ "$(V)" != 0 ] || echo "  CC      $@"
	$(Q)$(CC) $(ALL_CFLAGS) -Ishim -Itests $< -o $@ $(ALL_LDFLAGS) \
	    -L$(BUILD)/fake -Wl,-rpath,'$$ORIGIN/../fake' -lcudart -ldl -lm

# The writer benchmark links the shim's modules directly (no CUDA needed).
$(BUILD)/bench/p5_writer: bench/p5_writer.c $(SHIM_LIB_OBJ) $(COMMON_OBJ) | $(BUILD)/bench
	@[ "$(V)" != 0 ] || echo "  CC      $@"
	$(Q)$(CC) $(ALL_CFLAGS) -Ishim $< $(SHIM_LIB_OBJ) $(COMMON_OBJ) -o $@ $(ALL_LDFLAGS) -ldl -lm

# ---- programs for the GPU machine (built here, carried there with build/) ------------------
NVCC      ?= $(CUDA_HOME)/bin/nvcc
GPU_ARCH  ?= -gencode arch=compute_90,code=sm_90
GPU_CU    := $(wildcard tests/gpu/*.cu)
GPU_BIN   := $(GPU_CU:tests/gpu/%.cu=$(BUILD)/gpu/%) \
             $(filter-out $(BUILD)/gpu/p5_writer,$(BENCH_SRC:bench/%.c=$(BUILD)/gpu/%))

.PHONY: gpu-build
gpu-build: $(LIB) $(CLI) $(GPU_BIN)
	$(Q)git describe --always --dirty > $(BUILD)/commit.txt 2>/dev/null || true

$(BUILD)/gpu:
	$(Q)mkdir -p $@

# -cudart shared: nvcc's default static cudart would be invisible to the preload.
$(BUILD)/gpu/%: tests/gpu/%.cu tests/gpu/gpu_common.h | $(BUILD)/gpu
	@[ "$(V)" != 0 ] || echo "  NVCC    $@"
	$(Q)$(NVCC) -cudart shared -O2 $(GPU_ARCH) -Xcompiler -pthread $< -o $@

# The device-switching check also calls the driver API (libcuda; the stub to link, the driver's
# own at run time).
$(BUILD)/gpu/gpu_devices: tests/gpu/gpu_devices.cu tests/gpu/gpu_common.h | $(BUILD)/gpu
	@[ "$(V)" != 0 ] || echo "  NVCC    $@"
	$(Q)$(NVCC) -cudart shared -O2 $(GPU_ARCH) -Xcompiler -pthread $< -o $@ -L$(CUDA_HOME)/lib64/stubs -lcuda

$(BUILD)/gpu/%: bench/%.c | $(BUILD)/gpu
	@[ "$(V)" != 0 ] || echo "  CC      $@ (real libcudart)"
	$(Q)$(CC) $(ALL_CFLAGS) -Ishim $< -o $@ $(ALL_LDFLAGS) -L$(CUDA_HOME)/lib64 -lcudart -ldl -lm \
	    -Wl,-rpath,/usr/local/cuda/lib64

# `make test`: packages first (a separate make, so that pkg-config is asked after installing).
# The unit runner goes last: its Check summary is the closing line of `make test`.
test: deps
	$(Q)$(MAKE) --no-print-directory prereqs prereqs-test
	$(Q)$(MAKE) --no-print-directory test-setup
	$(Q)$(MAKE) --no-print-directory test-run

test-run: all $(RUNNER) $(FUZZ_BIN) corrupt-smoke
	$(Q)[ -z "$(FUZZ_BIN)" ] || { mkdir -p $(BUILD)/fuzz/scratch && $(FUZZ_BIN) -max_total_time=5 $(BUILD)/fuzz/scratch tests/fuzz/corpus > $(BUILD)/fuzz/run.log 2>&1 || { tail -40 $(BUILD)/fuzz/run.log; exit 1; }; }
	$(Q)GMSHIM_BUILD=$(abspath $(BUILD)) GMSHIM_TEST_PRELOAD="$(TEST_PRELOAD)" \
	    GMSHIM_FUZZ_BIN="$(abspath $(FUZZ_BIN))" $(RUNNER)

# `make golden-update`: rewrites tests/golden/ (the CLI's output that the golden suite compares
# byte for byte) after a change that alters the output on purpose; review the diff.
.PHONY: golden-update
golden-update: $(CLI) $(GENLOG)
	$(Q)sh tests/golden/golden.sh update $(BUILD)

deps:
	$(Q)sh scripts/install-deps

# The set-up as a user meets it: the prerequisite checks, and the wheel installed into a fresh
# venv running the demo and the Python module (not part of test-run: the sanitizer builds'
# library cannot be preloaded into Python without their runtime).
.PHONY: test-setup test-prereqs test-wheel
test-setup: test-prereqs test-wheel
test-prereqs:
	$(Q)sh tests/setup/prereqs.sh
test-wheel: wheel $(CLI) $(INTEG_BIN)
	$(Q)BUILD=$(BUILD) WHEEL_DIR=$(WHEEL_DIR) PYTHON=$(PYTHON) sh tests/setup/wheel.sh

# Sanitizer builds go to their own directories; the preloaded library needs the sanitizer
# runtime loaded first, hence TEST_PRELOAD.
test-asan: deps
	$(Q)$(MAKE) --no-print-directory test-run BUILD=build/asan GM_OPT="-O1 -g" \
	    GM_SAN="-fsanitize=address,undefined -fno-sanitize-recover=undefined" \
	    TEST_PRELOAD="$$($(CC) -print-file-name=libasan.so)" FUZZ_BIN=
test-tsan: deps
	$(Q)$(MAKE) --no-print-directory test-run BUILD=build/tsan GM_OPT="-O1 -g" \
	    GM_SAN="-fsanitize=thread" \
	    TEST_PRELOAD="$$($(CC) -print-file-name=libtsan.so)" FUZZ_BIN=

demo: all
	$(Q)sh scripts/demo

# The long trials of docs/limits.md, on demand: 1 000 kill -9 trials; an hour of a bounded log.
.PHONY: kill-trials soak
KILL_TRIALS ?= 1000
SOAK_SECONDS ?= 3600
kill-trials: all $(RUNNER)
	$(Q)GMSHIM_BUILD=$(abspath $(BUILD)) KILL_TRIALS=$(KILL_TRIALS) CK_RUN_SUITE=evlog CK_RUN_CASE=kill $(RUNNER)
soak: all
	$(Q)BUILD=$(BUILD) bash tests/stress/soak.sh $(SOAK_SECONDS)

# `make wheel`: a Python wheel (the gmshim module, the CLI and libgmshim.so inside it), written by
# a standard-library script: nothing is downloaded. `pip install .` runs this target too.
PYTHON    ?= python3
WHEEL_DIR ?= $(BUILD)/dist
.PHONY: wheel
wheel: $(LIB) $(CLI)
	$(Q)$(PYTHON) scripts/gmshim_wheel.py --build $(BUILD) --out $(WHEEL_DIR)

install: $(LIB) $(CLI)
	install -d $(DESTDIR)$(PREFIX)/lib $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/include
	install -m 0755 $(LIB) $(DESTDIR)$(PREFIX)/lib/libgmshim.so
	install -m 0755 $(CLI) $(DESTDIR)$(PREFIX)/bin/gmshim
	install -m 0644 shim/gmshim.h $(DESTDIR)$(PREFIX)/include/gmshim.h

uninstall:
	rm -f $(DESTDIR)$(PREFIX)/lib/libgmshim.so $(DESTDIR)$(PREFIX)/bin/gmshim \
	      $(DESTDIR)$(PREFIX)/include/gmshim.h

clean:
	rm -rf $(BUILD)

-include $(wildcard $(BUILD)/*/*.d $(BUILD)/tests/*/*.d)
