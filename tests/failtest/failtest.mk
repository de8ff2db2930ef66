# tests/failtest/failtest.mk — the malloc failer, included by the top-level Makefile.
# $(BUILD)/failtest/libgmshim.so is the library built from the same sources with
# tests/failtest/failtest.h forced in: gmshim's own malloc/calloc/realloc/posix_memalign/strdup
# fail every GMFAIL_EVERY-th call. Only the tests preload it; `make fail-trials` runs the long form.

FAILTEST_DIR := $(BUILD)/failtest
FAILTEST_LIB := $(FAILTEST_DIR)/libgmshim.so
FAILTEST_OBJ := $(SHIM_SRC:%.c=$(FAILTEST_DIR)/%.o) $(COMMON_SRC:%.c=$(FAILTEST_DIR)/%.o) \
                $(FAILTEST_DIR)/tests/failtest/failtest.o
FAILTEST_FLAGS := -include tests/failtest/failtest.h -fPIC -fvisibility=hidden -MMD -MP

$(FAILTEST_DIR)/shim $(FAILTEST_DIR)/common $(FAILTEST_DIR)/tests/failtest:
	$(Q)mkdir -p $@
$(FAILTEST_DIR)/shim $(FAILTEST_DIR)/common $(FAILTEST_DIR)/tests/failtest: | prereqs

$(FAILTEST_DIR)/shim/%.o: shim/%.c tests/failtest/failtest.h | $(FAILTEST_DIR)/shim
	@[ "$(V)" != 0 ] || echo "  CC      $@"
	$(Q)$(CC) $(ALL_CFLAGS) -Ishim -I$(BUILD)/shim $(FAILTEST_FLAGS) -c $< -o $@
$(FAILTEST_DIR)/shim/torchbuild.o: $(BUILD)/shim/torch_bridge_src.h

$(FAILTEST_DIR)/common/%.o: common/%.c tests/failtest/failtest.h | $(FAILTEST_DIR)/common
	@[ "$(V)" != 0 ] || echo "  CC      $@"
	$(Q)$(CC) $(ALL_CFLAGS) $(FAILTEST_FLAGS) -c $< -o $@

$(FAILTEST_DIR)/tests/failtest/failtest.o: tests/failtest/failtest.c | $(FAILTEST_DIR)/tests/failtest
	@[ "$(V)" != 0 ] || echo "  CC      $@"
	$(Q)$(CC) $(ALL_CFLAGS) -fPIC -fvisibility=hidden -MMD -MP -c $< -o $@

$(FAILTEST_LIB): $(FAILTEST_OBJ)
	@[ "$(V)" != 0 ] || echo "  LD      $@"
	$(Q)$(CC) -shared -Wl,-soname,libgmshim.so -Wl,--no-undefined -Wl,-z,now $^ -o $@ $(ALL_LDFLAGS) -ldl

# The long form: FAIL_TRIALS runs of the failer (half classic, half GMSHIM_SEGMENTS=vmm).
.PHONY: fail-trials
FAIL_TRIALS ?= 1000
fail-trials: all $(RUNNER) $(FAILTEST_LIB)
	$(Q)GMSHIM_BUILD=$(abspath $(BUILD)) GMSHIM_TEST_PRELOAD="$(TEST_PRELOAD)" FAIL_TRIALS=$(FAIL_TRIALS) \
	    CK_RUN_SUITE=failtest CK_RUN_CASE=trials $(RUNNER)

-include $(wildcard $(FAILTEST_DIR)/*/*.d $(FAILTEST_DIR)/tests/*/*.d)
