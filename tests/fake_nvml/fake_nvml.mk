# tests/fake_nvml/fake_nvml.mk — the fake NVML (libnvidia-ml.so.1, answering from the fake
# runtime's card) and libfakenccl.so (a library that takes memory through the driver functions
# cuGetProcAddress hands it), for the ledger's tests. Both go in $(BUILD)/fake_nvml, which a test
# puts on LD_LIBRARY_PATH. Included by the top-level Makefile; `make fake-nvml` builds them.

FAKE_NVML_DIR  := $(BUILD)/fake_nvml
FAKE_NVML_LIB  := $(FAKE_NVML_DIR)/libnvidia-ml.so.1
FAKE_NCCL_LIB  := $(FAKE_NVML_DIR)/libfakenccl.so

.PHONY: fake-nvml
fake-nvml: $(FAKE_NVML_LIB) $(FAKE_NCCL_LIB)
all: fake-nvml
$(RUNNER): $(FAKE_NVML_LIB) $(FAKE_NCCL_LIB)

$(FAKE_NVML_DIR):
	$(Q)mkdir -p $@

$(FAKE_NVML_LIB): tests/fake_nvml/fake_nvml.c | $(FAKE_NVML_DIR)
	@[ "$(V)" != 0 ] || echo "  LD      $@"
	$(Q)$(CC) $(ALL_CFLAGS) -fPIC -shared -Wl,-soname,libnvidia-ml.so.1 $< -o $@ $(ALL_LDFLAGS) -ldl

$(FAKE_NCCL_LIB): tests/fake_nvml/fake_nccl.c | $(FAKE_NVML_DIR)
	@[ "$(V)" != 0 ] || echo "  LD      $@"
	$(Q)$(CC) $(ALL_CFLAGS) -fPIC -shared -Wl,-soname,libfakenccl.so $< -o $@ $(ALL_LDFLAGS) -ldl
