# tests/fake/fake.mk — builds the fake CUDA runtime, $(BUILD)/fake/libcudart.so.13, plus a
# libcudart.so link for -lcudart. Included by the top-level Makefile; `make fake` builds it.

FAKE_SRC  := $(wildcard tests/fake/*.c)
FAKE_OBJ  := $(FAKE_SRC:tests/fake/%.c=$(BUILD)/fake/%.o)
FAKE_MAP  := tests/fake/libcudart.map
FAKE_LIB  := $(BUILD)/fake/libcudart.so.13
FAKE_LINK := $(BUILD)/fake/libcudart.so

.PHONY: fake
fake: $(FAKE_LIB) $(FAKE_LINK)

$(BUILD)/fake:
	$(Q)mkdir -p $@

$(BUILD)/fake/%.o: tests/fake/%.c | $(BUILD)/fake
	@[ "$(V)" != 0 ] || echo "  CC      $@"
	$(Q)$(CC) $(ALL_CFLAGS) -fPIC -MMD -MP -c $< -o $@

$(FAKE_LIB): $(FAKE_OBJ) $(FAKE_MAP)
	@[ "$(V)" != 0 ] || echo "  LD      $@"
	$(Q)$(CC) -shared -Wl,-soname,libcudart.so.13 -Wl,--version-script=$(FAKE_MAP) \
	    -Wl,--no-undefined $(FAKE_OBJ) -o $@ $(ALL_LDFLAGS) -ldl -pthread
	$(Q)ln -sf libcudart.so.13 $(FAKE_LINK)

# Made with the library (rules that link -lcudart depend only on $(FAKE_LIB)).
$(FAKE_LINK): $(FAKE_LIB)
