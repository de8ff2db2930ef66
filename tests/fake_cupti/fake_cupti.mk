# tests/fake_cupti/fake_cupti.mk — the fake CUPTI, the fake driver and their helpers for the
# CUPTI tests (see fake_cupti.h), and the rule for tests/integration/cupti_*.c, which link the
# fake driver. Included by the top-level Makefile; `make fake-cupti` builds the libraries.

FAKE_CUPTI_DIR    := $(BUILD)/fake_cupti
FAKE_CUPTI_HOME   := $(FAKE_CUPTI_DIR)/cuda
FAKE_CUPTI_LIB    := $(FAKE_CUPTI_HOME)/lib64/libcupti.so.13
FAKE_DRIVER_LIB   := $(FAKE_CUPTI_DIR)/libcuda.so.1
FAKE_BLAS_LIB     := $(FAKE_CUPTI_DIR)/libfakeblas.so
FAKE_TORCH_SP     := $(FAKE_CUPTI_DIR)/site-packages
FAKE_TORCH_LIB    := $(FAKE_TORCH_SP)/torch/lib/libtorch_cuda.so
FAKE_WHEEL_CUPTI  := $(FAKE_TORCH_SP)/nvidia/cu13/lib/libcupti.so.13
FAKE_CUPTI_ALL    := $(FAKE_CUPTI_LIB) $(FAKE_DRIVER_LIB) $(FAKE_BLAS_LIB) $(FAKE_TORCH_LIB) $(FAKE_WHEEL_CUPTI)
CUPTI_INTEG_BIN   := $(filter $(BUILD)/tests/integration/cupti_%,$(INTEG_BIN))

.PHONY: fake-cupti
fake-cupti: $(FAKE_CUPTI_ALL)
all: fake-cupti
# The unit tests start gmshim's CUPTI side in-process against these.
$(RUNNER): $(FAKE_CUPTI_ALL)

$(FAKE_CUPTI_DIR)/obj $(FAKE_CUPTI_HOME)/lib64 $(FAKE_TORCH_SP)/torch/lib $(FAKE_TORCH_SP)/nvidia/cu13/lib:
	$(Q)mkdir -p $@

$(FAKE_CUPTI_DIR)/obj/%.o: tests/fake_cupti/%.c tests/fake_cupti/fake_cupti.h | $(FAKE_CUPTI_DIR)/obj
	@[ "$(V)" != 0 ] || echo "  CC      $@"
	$(Q)$(CC) $(ALL_CFLAGS) -fPIC -MMD -MP -c $< -o $@

$(FAKE_CUPTI_LIB): $(FAKE_CUPTI_DIR)/obj/fake_cupti.o | $(FAKE_CUPTI_HOME)/lib64
	@[ "$(V)" != 0 ] || echo "  LD      $@"
	$(Q)$(CC) -shared -Wl,-soname,libcupti.so.13 -Wl,--no-undefined $^ -o $@ $(ALL_LDFLAGS) -ldl

$(FAKE_DRIVER_LIB): $(FAKE_CUPTI_DIR)/obj/fake_driver.o
	@[ "$(V)" != 0 ] || echo "  LD      $@"
	$(Q)$(CC) -shared -Wl,-soname,libcuda.so.1 -Wl,--no-undefined $^ -o $@ $(ALL_LDFLAGS) -ldl

$(FAKE_BLAS_LIB): $(FAKE_CUPTI_DIR)/obj/fake_blas.o $(FAKE_DRIVER_LIB)
	@[ "$(V)" != 0 ] || echo "  LD      $@"
	$(Q)$(CC) -shared -Wl,-soname,libfakeblas.so -Wl,--no-undefined $< -o $@ $(ALL_LDFLAGS) \
	    -L$(FAKE_CUPTI_DIR) -Wl,-rpath,'$$ORIGIN' -l:libcuda.so.1

$(FAKE_TORCH_LIB): $(FAKE_CUPTI_DIR)/obj/fake_torch.o | $(FAKE_TORCH_SP)/torch/lib
	@[ "$(V)" != 0 ] || echo "  LD      $@"
	$(Q)$(CC) -shared -Wl,-soname,libtorch_cuda.so $^ -o $@ $(ALL_LDFLAGS)

$(FAKE_WHEEL_CUPTI): $(FAKE_CUPTI_LIB) | $(FAKE_TORCH_SP)/nvidia/cu13/lib
	$(Q)ln -sf ../../../../cuda/lib64/libcupti.so.13 $@

# The fake driver comes before -lcudart: its cudaMalloc/cudaFree (the runtime calling the
# driver) must be found first, and the fake runtime's after it.
$(CUPTI_INTEG_BIN): $(BUILD)/tests/integration/%: tests/integration/%.c $(FAKE_LIB) $(FAKE_DRIVER_LIB) \
                    $(FAKE_BLAS_LIB) | $(BUILD)/tests/integration
	@[ "$(V)" != 0 ] || echo "  CC      $@"
	$(Q)$(CC) $(ALL_CFLAGS) -Itests $< -o $@ $(ALL_LDFLAGS) \
	    -L$(FAKE_CUPTI_DIR) -Wl,-rpath,'$$ORIGIN/../../fake_cupti' -lfakeblas -l:libcuda.so.1 \
	    -L$(BUILD)/fake -Wl,-rpath,'$$ORIGIN/../../fake' -lcudart -ldl

-include $(wildcard $(FAKE_CUPTI_DIR)/obj/*.d)
