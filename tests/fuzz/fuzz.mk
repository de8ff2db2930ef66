# tests/fuzz/fuzz.mk — the analyzer's fuzz target, included by the top-level Makefile.
# $(FUZZ_BIN) is built with clang's libFuzzer (+ASan/UBSan) when clang can link one, otherwise
# with $(CC) and tests/fuzz/standalone.c (a small random mutator, with the sanitizers when $(CC)
# has them). The probes run in the recipe, so other targets never pay for them.
# `make fuzz` builds it, `make fuzz-run` fuzzes for about ten seconds, `make fuzz-long` for an
# hour (new finds in $(BUILD)/fuzz/long; merge the good ones into the corpus with -merge=1). The
# seeds in tests/fuzz/corpus are real logs named *.seed (the repository ignores *.gmlog files),
# and inputs libFuzzer found, kept by -merge=1 (named by their SHA-1).
# `make corrupt-smoke` runs every command on damaged copies of the fixtures (corrupt-smoke.sh).

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

# CORRUPT_N damaged copies of each fixture through every command (about a minute either way: a
# sanitizer build runs fewer); the first failures' logs stay in $(BUILD)/fuzz/corrupt-smoke/failed.
CORRUPT_N ?= $(if $(strip $(GM_SAN)),40,150)
corrupt-smoke: $(CLI) $(CORRUPT)
	$(Q)sh tests/fuzz/corrupt-smoke.sh $(CLI) $(CORRUPT) $(FUZZ_DIR)/corrupt-smoke $(CORRUPT_N) \
	    $(sort $(wildcard tests/fixtures/*.gmlog))
