"""gmshim from Python: marks, phases, cache release and counters for a program run under gmshim.

Every function is a no-op when libgmshim.so is not preloaded (``gmshim run -- python train.py``
or ``LD_PRELOAD=.../libgmshim.so``): no exception, and nothing is loaded into the process; the
symbols are looked up once, in what the process already has (``ctypes.CDLL(None)``)."""

import contextlib as _contextlib
import os as _os

__all__ = ["active", "mark", "phase", "empty_cache", "stats", "set_limit", "library_path", "executable"]
__version__ = "0.0.0"  # replaced by the wheel's version when the wheel is built

_NATIVE = _os.path.join(_os.path.dirname(_os.path.abspath(__file__)), "_native")
_api = None  # None: not looked up yet; False: gmshim is not in this process; else the symbols


def library_path():
    """The libgmshim.so shipped in this package (to preload by hand), or None in a source tree."""
    path = _os.path.join(_NATIVE, "libgmshim.so")
    return path if _os.path.exists(path) else None


def executable():
    """The gmshim CLI shipped in this package, or None in a source tree."""
    path = _os.path.join(_NATIVE, "gmshim")
    return path if _os.access(path, _os.X_OK) else None


def _lookup():
    global _api
    try:
        import ctypes
        proc = ctypes.CDLL(None)
        # Only a preloaded (or otherwise global) libgmshim.so answers; ctypes raises otherwise.
        mark_fn = proc.gmshim_mark
    except (OSError, AttributeError, ImportError):
        _api = False
        return _api

    class Stat(ctypes.Structure):
        _fields_ = [(n, ctypes.c_ulonglong) for n in ("current", "peak", "total")]

    counts = ("allocs", "frees", "cache_hits", "cache_misses", "driver_mallocs", "driver_frees",
              "oom_retries", "ooms", "fences", "fence_waits", "fence_wait_ns", "unpooled_allocs",
              "foreign_frees", "bad_frees", "limit", "arenas")
    stats_ = ("requested", "allocated", "reserved", "cached", "pending")

    class Stats(ctypes.Structure):  # struct gmshim_stats of shim/gmshim.h (GMSHIM_API_VERSION 1)
        _fields_ = ([("size", ctypes.c_uint), ("device", ctypes.c_int)]
                    + [(n, Stat) for n in stats_] + [(n, ctypes.c_ulonglong) for n in counts])

    mark_fn.argtypes, mark_fn.restype = [ctypes.c_char_p], ctypes.c_int
    end_fn = getattr(proc, "gmshim_phase_end", None) or mark_fn  # an older libgmshim: a plain mark
    end_fn.argtypes, end_fn.restype = [ctypes.c_char_p], ctypes.c_int
    empty = proc.gmshim_empty_cache
    empty.argtypes, empty.restype = [], ctypes.c_ulonglong
    get = proc.gmshim_get_stats
    get.argtypes, get.restype = [ctypes.c_int, ctypes.POINTER(Stats)], ctypes.c_int
    limit = proc.gmshim_set_limit
    limit.argtypes, limit.restype = [ctypes.c_int, ctypes.c_ulonglong], ctypes.c_int
    _api = {"mark": mark_fn, "phase_end": end_fn, "empty_cache": empty, "get_stats": get, "set_limit": limit,
            "Stats": Stats, "stats_fields": stats_, "count_fields": counts, "ctypes": ctypes}
    return _api


def _get():
    return _lookup() if _api is None else _api


def active():
    """True when libgmshim.so is in this process (preloaded), so that the calls below do something."""
    return bool(_get())


def _write_mark(kind, label):
    api = _get()
    if not api:
        return False
    if not isinstance(label, bytes):
        label = str(label).encode("utf-8", "replace")
    return api[kind](label) == 0


def mark(label):
    """Writes a mark (a phase or iteration boundary) into gmshim's log. Returns True when it was
    written, False without gmshim or without a log."""
    return _write_mark("mark", label)


@_contextlib.contextmanager
def phase(name):
    """``with gmshim.phase("eval"):`` marks "eval" at the start and "eval end" at the end (also
    when the block raises), so that reports can tell the phase apart. The end mark is recorded
    as a phase's end, not as a boundary: growth "per mark" stays growth per step."""
    mark(name)
    try:
        yield
    finally:
        _write_mark("phase_end", "%s end" % (name,))


def empty_cache():
    """Returns every whole free cached segment to the driver; the number of bytes released (0
    without gmshim)."""
    api = _get()
    return int(api["empty_cache"]()) if api else 0


def stats(device=0):
    """gmshim's counters for one device as a dict (bytes unless named as counts; each of
    requested, allocated, reserved, cached, pending a dict of current, peak and total), or None
    without gmshim or for a bad device."""
    api = _get()
    if not api:
        return None
    s = api["Stats"]()
    s.size = api["ctypes"].sizeof(s)
    if api["get_stats"](int(device), api["ctypes"].byref(s)) != 0:
        return None
    out = {"device": s.device}
    for n in api["stats_fields"]:
        v = getattr(s, n)
        out[n] = {"current": v.current, "peak": v.peak, "total": v.total}
    for n in api["count_fields"]:
        out[n] = getattr(s, n)
    return out


def set_limit(device, nbytes):
    """Caps what gmshim reserves on a device (0 removes the cap). True when it was set."""
    api = _get()
    return bool(api) and api["set_limit"](int(device), int(nbytes)) == 0
