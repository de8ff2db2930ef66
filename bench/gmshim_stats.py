# gmshim's statistics from Python through ctypes (the preload exports gmshim_get_stats); None when
# the program runs without gmshim. Shared by the benchmark and check scripts.
import ctypes

_lib = ctypes.CDLL(None)


class _Stat(ctypes.Structure):
    _fields_ = [("current", ctypes.c_ulonglong), ("peak", ctypes.c_ulonglong), ("total", ctypes.c_ulonglong)]


class _Stats(ctypes.Structure):
    _fields_ = [("size", ctypes.c_uint), ("device", ctypes.c_int)] + \
        [(n, _Stat) for n in ("requested", "allocated", "reserved", "cached", "pending")] + \
        [(n, ctypes.c_ulonglong) for n in (
            "allocs", "frees", "cache_hits", "cache_misses", "driver_mallocs", "driver_frees",
            "oom_retries", "ooms", "fences", "fence_waits", "fence_wait_ns", "unpooled_allocs",
            "foreign_frees", "bad_frees", "limit", "arenas", "fence_ns", "fence_polls", "fence_poll_ns",
            "plan_allocs", "plan_online", "plan_busy", "plan_period", "plan_bytes")]


# Version 1 of the struct ends at `arenas` (a library from before the fences' times), version 2 at
# `fence_poll_ns` (before GMSHIM_PLAN's counters).
_V1_SIZE = _Stats.arenas.offset + ctypes.sizeof(ctypes.c_ulonglong)
_V2_SIZE = _Stats.fence_poll_ns.offset + ctypes.sizeof(ctypes.c_ulonglong)


def stats(device=0):
    if not hasattr(_lib, "gmshim_get_stats"):
        return None
    st = _Stats()
    st.size = ctypes.sizeof(_Stats)
    for size in (_V2_SIZE, _V1_SIZE):
        if _lib.gmshim_get_stats(device, ctypes.byref(st)) == 0:
            break
        st = _Stats()
        st.size = size
    else:
        if _lib.gmshim_get_stats(device, ctypes.byref(st)) != 0:
            return None
    out = {}
    for name, _ in _Stats._fields_[2:]:
        v = getattr(st, name)
        if isinstance(v, _Stat):
            out[name] = {"current": v.current, "peak": v.peak, "total": v.total}
        else:
            out[name] = v
    return out


def mark(label):
    if hasattr(_lib, "gmshim_mark"):
        _lib.gmshim_mark(label.encode())
