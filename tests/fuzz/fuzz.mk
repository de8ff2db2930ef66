# tests/fuzz/fuzz.mk — the analyzer's fuzz target, included by the top-level Makefile.
# $(FUZZ_BIN) is built with clang's libFuzzer (+ASan/UBSan) when clang can link one, otherwise
# with $(CC) and tests/fuzz/standalone.c (a small random mutator). `make fuzz-run` fuzzes for
# about ten seconds; `make test-run` passes $(FUZZ_BIN) to the unit tests, which run it briefly.

FUZZ_DIR    := $(BUILD)/fuzz
FUZZ_SRC    := tests/fuzz/fuzz_reader.c $(filter-out analyzer/main.c,$(wildcard analyzer/*.c))
FUZZ_CORPUS := tests/fuzz/corpus
FUZZ_FLAGS  := -std=c11 -g -O1 -D_GNU_SOURCE -Ishim -Ianalyzer -fno-omit-frame-pointer -pthread

# Can clang link a libFuzzer target here? (Asked once per make run.)
FUZZ_LIBFUZZER := $(shell printf 'int LLVMFuzzerTestOneInput(const unsigned char *d, unsigned long n){(void)d;(void)n;return 0;}\n' \
    | clang -x c -fsanitize=fuzzer,address,undefined - -o /dev/null >/dev/null 2>&1 && echo yes)
# Can $(CC) link the sanitizers (for the standalone build)?
FUZZ_CC_SAN := $(shell printf 'int main(void){return 0;}\n' \
    | $(CC) -x c -fsanitize=address,undefined - -o /dev/null >/dev/null 2>&1 && echo -fsanitize=address,undefined)

FUZZ_BIN := $(FUZZ_DIR)/fuzz_reader

.PHONY: fuzz fuzz-run
fuzz: $(FUZZ_BIN)

ifneq ($(strip $(FUZZ_BIN)),)
$(FUZZ_BIN): $(FUZZ_SRC) tests/fuzz/standalone.c $(wildcard analyzer/*.h) shim/gmlog.h
	$(Q)mkdir -p $(dir $@)
ifeq ($(FUZZ_LIBFUZZER),yes)
	@[ "$(V)" != 0 ] || echo "  FUZZ    $@ (libFuzzer)"
	$(Q)clang $(FUZZ_FLAGS) -fsanitize=fuzzer,address,undefined $(FUZZ_SRC) -o $@ -lm
else
	@[ "$(V)" != 0 ] || echo "  FUZZ    $@ (standalone mutator)"
	$(Q)$(CC) $(FUZZ_FLAGS) $(FUZZ_CC_SAN) $(FUZZ_SRC) tests/fuzz/standalone.c -o $@ -lm
endif
endif

# libFuzzer writes new inputs into its first corpus directory: give it a scratch copy.
fuzz-run: $(FUZZ_BIN)
	$(Q)mkdir -p $(FUZZ_DIR)/corpus
	$(Q)cp -f $(FUZZ_CORPUS)/* $(FUZZ_DIR)/corpus/
	$(Q)ASAN_OPTIONS=detect_leaks=1 $(FUZZ_BIN) -max_total_time=10 -artifact_prefix=$(FUZZ_DIR)/ \
	    $(FUZZ_DIR)/corpus $(FUZZ_CORPUS)
