"""The few lines a user adds, run by tests/setup/wheel.sh from a venv holding only gmshim's wheel:
`use_module.py preloaded FAKE_CUDART` under gmshim (the marks must reach the log, the counters
see the allocations made through the fake CUDA runtime), `use_module.py absent` without it
(everything a silent no-op, nothing loaded, nothing printed)."""

import sys

import gmshim


def check(cond, what):
    if not cond:
        sys.stderr.write("use_module: FAIL %s\n" % what)
        sys.exit(1)


def preloaded(fake_cudart):
    import ctypes
    check(gmshim.active(), "gmshim.active() is False under the preload")
    check(gmshim.mark("epoch 3") is True, "mark('epoch 3') was not written")
    # Allocations through the hooks: the fake runtime loaded globally, the calls looked up in the
    # process (where the preloaded cudaMalloc comes first).
    ctypes.CDLL(fake_cudart, mode=ctypes.RTLD_GLOBAL)
    proc = ctypes.CDLL(None)
    ptrs = []
    with gmshim.phase("eval"):
        for _ in range(4):
            p = ctypes.c_void_p()
            check(proc.cudaMalloc(ctypes.byref(p), ctypes.c_size_t(1 << 20)) == 0, "cudaMalloc failed")
            ptrs.append(p)
    s = gmshim.stats(0)
    check(isinstance(s, dict), "stats(0) is %r" % (s,))
    check(s["allocs"] == 4 and s["requested"]["current"] == 4 << 20,
          "stats(0): allocs %d, requested %r (want 4 and 4 MiB)" % (s["allocs"], s["requested"]))
    check(gmshim.stats(-1) is None, "stats(-1) is not None")
    for p in ptrs:
        check(proc.cudaFree(p) == 0, "cudaFree failed")
    check(proc.cudaDeviceSynchronize() == 0, "cudaDeviceSynchronize failed")
    released = gmshim.empty_cache()
    check(isinstance(released, int) and released > 0, "empty_cache() released %r bytes" % (released,))
    check(gmshim.stats(0)["reserved"]["current"] == 0, "memory still reserved after empty_cache()")
    check(gmshim.mark(u"done \u2713"), "mark of a non-ASCII label was not written")
    print("use_module: preloaded ok, %d bytes released" % released)


def absent():
    check(not gmshim.active(), "gmshim.active() is True without the preload")
    check(gmshim.mark("epoch 3") is False, "mark() without gmshim did not return False")
    with gmshim.phase("eval"):
        pass
    check(gmshim.empty_cache() == 0, "empty_cache() without gmshim is not 0")
    check(gmshim.stats() is None, "stats() without gmshim is not None")
    check(gmshim.set_limit(0, 1 << 30) is False, "set_limit() without gmshim is not False")
    with open("/proc/self/maps") as f:
        check("libgmshim" not in f.read(), "libgmshim.so was loaded into the process")
    # Nothing printed: wheel.sh checks that stdout and stderr stay empty.


if __name__ == "__main__":
    if sys.argv[1] == "preloaded":
        preloaded(sys.argv[2])
    else:
        absent()
