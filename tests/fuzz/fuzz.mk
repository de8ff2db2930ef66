# tests/fuzz/fuzz.mk — the analyzer's fuzz target, included by the top-level Makefile.
# $(FUZZ_BIN) is built with clang's libFuzzer (+ASan/UBSan) when clang can link one, otherwise
# with $(CC) and tests/fuzz/standalone.c (a small random mutator, with the sanitizers when $(CC)
# has them). The probes run in the recipe, so other targets never pay for them.
# `make fuzz` builds it, `make fuzz-run` fuzzes for about ten seconds. The seeds in
# tests/fuzz/corpus are real logs named *.seed (the repository ignores *.gmlog files).

FUZZ_DIR    := $(BUILD)/fuzz
FUZZ_SRC    := tests/fuzz/fuzz_reader.c $(filter-out analyzer/main.c,$(wildcard analyzer/*.c))
FUZZ_CORPUS := tests/fuzz/corpus
FUZZ_FLAGS  := -std=c11 -g -O1 -D_GNU_SOURCE -Ishim -Ianalyzer -fno-omit-frame-pointer -pthread
FUZZ_PROBE  := int LLVMFuzzerTestOneInput(const unsigned char *d, unsigned long n){(void)d;(void)n;return 0;}

FUZZ_BIN := $(FUZZ_DIR)/fuzz_reader

# A generator of large valid logs (tests/fuzz/genlog.c), for the analyzer's tests and benchmarks.
GENLOG := $(FUZZ_DIR)/genlog
$(GENLOG): tests/fuzz/genlog.c shim/gmlog.h
	$(Q)mkdir -p $(dir $@)
	@[ "$(V)" != 0 ] || echo "  CC      $@"
	$(Q)$(CC) $(ALL_CFLAGS) -Ishim $< -o $@
all gpu-build: $(GENLOG)

.PHONY: fuzz fuzz-run
fuzz: $(FUZZ_BIN)

ifneq ($(strip $(FUZZ_BIN)),)
$(FUZZ_BIN): $(FUZZ_SRC) tests/fuzz/standalone.c $(wildcard analyzer/*.h) shim/gmlog.h
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
