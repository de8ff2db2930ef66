#!/usr/bin/env python3
# Reads a gmshim log (the layouts of common/gmlog.h) and prints what CUPTI observation put in it,
# for tests/gpu/cupti-check.sh: one "totals" line (per kind: allocations, frees, bytes live at
# the end, and the peak of live bytes: Python programs free everything at exit), then one line
# per (kind, library). Needs nothing but the standard library, so the check does not depend on
# the gmshim CLI.
import struct
import sys
from collections import defaultdict

KINDS = ["pool", "pass", "managed", "pitched", "host", "async", "observed", "foreign"]
ALLOC, FREE, OOM, CLOCK, STRING = 1, 2, 8, 16, 13


def scan(path):
    data = open(path, "rb").read()
    (magic, _ver, _bo, header_size, chunk_size, _rt, _mono, _pid, _flags, _end, _reason,
     meta_size) = struct.unpack_from("<8sIIIIQQIIQII", data, 0)
    if magic != b"GMSHIMLG":
        sys.exit(f"{path}: not a gmshim log")
    mode, at = "?", 96
    while at + 8 <= 96 + meta_size:
        tag, _r, ln = struct.unpack_from("<HHI", data, at)
        if tag == 0:
            break
        if tag == 7:
            mode = data[at + 8:at + 8 + ln].decode()
        at += 8 + (ln + 7) // 8 * 8
    events, strings, ooms = [], {}, []
    for c in range(header_size, len(data) - chunk_size + 1, chunk_size):
        cmagic, _tid, _idx, base = struct.unpack_from("<IIQQ", data, c)
        if cmagic != 0x4B434D47:
            continue
        at = c + 32
        while at + 8 <= c + chunk_size:
            typ, len8, dev, flags, dt = struct.unpack_from("<BBBBI", data, at)
            if typ == 0 or len8 == 0:
                break
            t = base + dt
            if typ == CLOCK:
                base = struct.unpack_from("<Q", data, at + 8)[0]
            elif typ == ALLOC:
                ptr, size = struct.unpack_from("<QQ", data, at + 8)
                block = struct.unpack_from("<Q", data, at + 32)[0] if len8 >= 5 else 0
                events.append((t, 0, ptr, size & ((1 << 48) - 1), (flags >> 2) & 7, block, dev))
            elif typ == FREE:
                events.append((t, 1, struct.unpack_from("<Q", data, at + 8)[0], 0, (flags >> 2) & 7, 0, dev))
            elif typ == STRING:
                sid, ln = struct.unpack_from("<II", data, at + 8)
                strings[sid] = data[at + 16:at + 16 + ln].decode(errors="replace")
            elif typ == OOM:
                ooms.append(struct.unpack_from("<QQQQ", data, at + 8))
            at += len8 * 8
    live, stats = {}, defaultdict(lambda: [0, 0, 0])  # (kind, lib) -> allocs, frees, live bytes
    now, tot = defaultdict(int), defaultdict(int)
    for t, is_free, ptr, size, kind, block, dev in sorted(events, key=lambda e: (e[0], e[1])):
        if not is_free:
            lib = strings.get(block, "-") if kind >= 6 else "-"
            if ptr in live:  # its free was never seen
                now[live[ptr][0]] -= live[ptr][2]
            live[ptr] = (KINDS[kind], lib, size)
            stats[(KINDS[kind], lib)][0] += 1
            now[KINDS[kind]] += size
            tot[KINDS[kind] + "_peak_bytes"] = max(tot[KINDS[kind] + "_peak_bytes"], now[KINDS[kind]])
        elif ptr in live:
            k, lib, size = live.pop(ptr)
            stats[(k, lib)][1] += 1
            now[k] -= size
    for k, lib, size in live.values():
        stats[(k, lib)][2] += size
    for (k, lib), (a, f, b) in stats.items():
        tot[k + "_allocs"] += a
        tot[k + "_frees"] += f
        tot[k + "_live_bytes"] += b
    print(f"totals mode={mode} ooms={len(ooms)} " + " ".join(f"{k}={v}" for k, v in sorted(tot.items())))
    for (k, lib), (a, f, b) in sorted(stats.items(), key=lambda kv: -kv[1][2]):
        print(f"kind={k} library={lib} allocs={a} frees={f} live_bytes={b}")


if __name__ == "__main__":
    for p in sys.argv[1:]:
        scan(p)
