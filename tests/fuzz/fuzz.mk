# tests/fuzz/fuzz.mk — the analyzer's fuzz target, included by the top-level Makefile.
# $(FUZZ_BIN) is built with clang's libFuzzer (+ASan/UBSan) when clang can link one, otherwise
# with $(CC) and tests/fuzz/standalone.c (a small random mutator, with the sanitizers when $(CC)
# has them). The probes run in the recipe, so other targets never pay for them.
# `make fuzz` builds it, `make fuzz-run` fuzzes for about ten seconds, `make fuzz-long` for an
# hour (new finds in $(BUILD)/fuzz/long; merge the good ones into the corpus with -merge=1). The
# seeds in tests/fuzz/corpus are real logs named *.seed (the repository ignores *.gmlog files),
# and inputs libFuzzer found, kept by -merge=1 (named by their SHA-1).
# `make corrupt-smoke` runs every command on damaged copies of the fixtures and of a wrapped log
# (corrupt-smoke.sh) under ASan and UBSan; `make corrupt-long CORRUPT_SECONDS=N` for longer.

FUZZ_DIR    := $(BUILD)/fuzz
FUZZ_SRC    := tests/fuzz/fuzz_reader.c $(wildcard common/*.c) $(filter-out analyzer/main.c,$(wildcard analyzer/*.c))
FUZZ_CORPUS := tests/fuzz/corpus
FUZZ_FLAGS  := -std=c11 -g -O1 -D_GNU_SOURCE -Icommon -Ianalyzer -fno-omit-frame-pointer -pthread
FUZZ_PROBE  := int LLVMFuzzerTestOneInput(const unsigned char *d, unsigned long n){(void)d;(void)n;return 0;}

FUZZ_BIN := $(FUZZ_DIR)/fuzz_reader

# A generator of large valid logs (tests/fuzz/genlog.c), for the analyzer's tests and benchmarks.
GENLOG := $(FUZZ_DIR)/genlog
$(GENLOG): tests/fuzz/genlog.c common/gmlog.h
	$(Q)mkdir -p $(dir $@)
	@[ "$(V)" != 0 ] || echo "  CC      $@"
	$(Q)$(CC) $(ALL_CFLAGS) $< -o $@
all gpu-build: $(GENLOG)

# Damaged copies of a log, one per seed, for the corruption smoke test.
CORRUPT := $(FUZZ_DIR)/corrupt
$(CORRUPT): tests/fuzz/corrupt.c common/gmlog.h
	$(Q)mkdir -p $(dir $@)
	@[ "$(V)" != 0 ] || echo "  CC      $@"
	$(Q)$(CC) $(ALL_CFLAGS) $< -o $@
all: $(CORRUPT)

.PHONY: fuzz fuzz-run fuzz-long corrupt-smoke
fuzz: $(FUZZ_BIN)

ifneq ($(strip $(FUZZ_BIN)),)
$(FUZZ_BIN): $(FUZZ_SRC) tests/fuzz/standalone.c $(wildcard analyzer/*.h) common/gmlog.h
	$(Q)mkdir -p $(dir $@)
	$(Q)if printf '%s\n' '$(FUZZ_PROBE)' | clang -x c -fsanitize=fuzzer,address,undefined - \
	        -o $(dir $@).probe >/dev/null 2>&1; then \
	    [ "$(V)" != 0 ] || echo "  FUZZ    $@ (libFuzzer)"; \
	    clang $(FUZZ_FLAGS) -fsanitize=fuzzer,address,undefined $(FUZZ_SRC) -o $@ -lm; \
	else \
	    san=; printf 'int main(void){return 0;}\n' | $(CC) -x c -fsanitize=address,undefined - \
	        -o $(dir $@).probe >/dev/null 2>&1 && san=-fsanitize=address,undefined; \
	    [ "$(V)" != 0 ] || echo "  FUZZ    $@ (standalone mutator)"; \
	    $(CC) $(FUZZ_FLAGS) $$san $(FUZZ_SRC) tests/fuzz/standalone.c -o $@ -lm; \
	fi; rc=$$?; rm -f $(dir $@).probe; exit $$rc
endif

# libFuzzer writes new inputs into its first corpus directory: give it a scratch one.
fuzz-run: $(FUZZ_BIN)
	$(Q)mkdir -p $(FUZZ_DIR)/corpus
	$(Q)$(FUZZ_BIN) -max_total_time=10 -artifact_prefix=$(FUZZ_DIR)/ $(FUZZ_DIR)/corpus $(FUZZ_CORPUS)

# An hour of fuzzing; what it finds goes to a scratch directory, never into the seeds.
fuzz-long: $(FUZZ_BIN)
	$(Q)mkdir -p $(FUZZ_DIR)/long
	$(Q)$(FUZZ_BIN) -max_total_time=3600 -artifact_prefix=$(FUZZ_DIR)/long- $(FUZZ_DIR)/long $(FUZZ_CORPUS)

# The CLI built with ASan and UBSan (any report aborts the run), for the corruption runs.
SAN_CLI   := $(FUZZ_DIR)/gmshim-san
SAN_FLAGS := -fsanitize=address,undefined -fno-sanitize-recover=undefined
SAN_OBJ   := $(patsubst %.c,$(FUZZ_DIR)/san/%.o,$(wildcard common/*.c) $(wildcard analyzer/*.c))
$(FUZZ_DIR)/san/%.o: %.c | prereqs
	$(Q)mkdir -p $(dir $@)
	@[ "$(V)" != 0 ] || echo "  CC      $@"
	$(Q)$(CC) $(GM_CPPFLAGS) -std=c11 -O1 -g $(GM_WARN) -pthread -fno-omit-frame-pointer -Ianalyzer \
	    $(SAN_FLAGS) -MMD -MP -c $< -o $@
-include $(SAN_OBJ:.o=.d)
$(SAN_CLI): $(SAN_OBJ)
	@[ "$(V)" != 0 ] || echo "  LD      $@"
	$(Q)$(CC) $^ -o $@ -pthread $(SAN_FLAGS) -ldl -lm

# A wrapped log (the writer's own bounded log past its 64 MiB limit, from a checkpoint on), to
# damage beside the fixtures.
WRAPPED := $(FUZZ_DIR)/wrapped.gmlog
$(WRAPPED): $(LIB) $(BUILD)/tests/integration/log_bounded
	@[ "$(V)" != 0 ] || echo "  GEN     $@"
	$(Q)rm -f $@ && GMSHIM_LOG=$@ GMSHIM_LOG_LIMIT=64M PAIRS=400000 THREADS=4 LEAK_EVERY=50000 FAKECUDA_MEM=1G \
	    LD_PRELOAD="$(strip $(TEST_PRELOAD) $(abspath $(LIB)))" $(BUILD)/tests/integration/log_bounded > /dev/null && \
	    $(CLI) --json summary $@ | grep -q '"wrapped":true' || { echo "$@: the log did not wrap" >&2; rm -f $@; exit 1; }

# Damaged copies of each fixture, of the ledger seed and of a wrapped log through every command that reads logs, on
# the sanitized CLI (tests/fuzz/corrupt-smoke.sh): CORRUPT_N copies of each in `make test` (a few
# seconds a fixture; the wrapped log, 64 MiB, gets CORRUPT_N_WRAPPED), or for CORRUPT_SECONDS
# with `make corrupt-long` (the first failures' logs stay in $(FUZZ_DIR)/corrupt-*/failed).
CORRUPT_N         ?= 2
CORRUPT_N_WRAPPED ?= 1
CORRUPT_SECONDS   ?= 3600
# The fixtures, and a log with the card's LEDGER samples, a library's mapped memory and an OOM.
CORRUPT_LOGS      := $(sort $(wildcard tests/fixtures/*.gmlog)) tests/fuzz/corpus/ledger_card.seed
.PHONY: corrupt-long
corrupt-smoke: $(SAN_CLI) $(CLI) $(CORRUPT) $(WRAPPED)
	$(Q)sh tests/fuzz/corrupt-smoke.sh $(SAN_CLI) $(CORRUPT) $(FUZZ_DIR)/corrupt-smoke $(CORRUPT_N) $(CORRUPT_LOGS)
	$(Q)sh tests/fuzz/corrupt-smoke.sh $(SAN_CLI) $(CORRUPT) $(FUZZ_DIR)/corrupt-wrapped $(CORRUPT_N_WRAPPED) $(WRAPPED)
corrupt-long: $(SAN_CLI) $(CLI) $(CORRUPT) $(WRAPPED)
	$(Q)SECONDS_LIMIT=$(CORRUPT_SECONDS) sh tests/fuzz/corrupt-smoke.sh $(SAN_CLI) $(CORRUPT) \
	    $(FUZZ_DIR)/corrupt-long 1000000000 $(CORRUPT_LOGS) $(WRAPPED)
