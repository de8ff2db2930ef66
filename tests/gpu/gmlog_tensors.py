"""A small reader of gmshim's log for the GPU checks (independent of the CLI): counts PyTorch's
tensor records (GMLOG_T_*, common/gmlog.h), names the Python line of the sites that hold the most
live bytes, and writes the TraceEntry stream as a fixture for tests/unit/test_torchev.c.

  gmlog_tensors.py LOG                 counts: t_alloc=.. t_free_requested=.. ...
  gmlog_tensors.py LOG --until MARK    the same, of the records before the mark labelled MARK (the
                                       moment a program read PyTorch's statistics; frees at its
                                       exit come after)
  gmlog_tensors.py LOG --live          + the three sites holding the most live tensor bytes
  gmlog_tensors.py LOG --fixture OUT   + OUT: one event a line, "action device addr size stream pool"
"""
import collections
import struct
import sys

CHUNK_MAGIC = 0x4B434D47
NAMES = {24: "alloc", 25: "free_requested", 26: "free_completed", 27: "segment_alloc",
         28: "segment_free", 29: "segment_map", 30: "segment_unmap", 31: "oom"}
T_MARK, T_SITE, T_STRING, T_CLOCK = 10, 12, 13, 16


def records(path):
    data = open(path, "rb").read()
    header_size, chunk_size = struct.unpack_from("<II", data, 16)
    out = []
    for off in range(header_size, len(data) - 31, chunk_size):
        magic, tid, _index, base = struct.unpack_from("<IIQQ", data, off)
        if magic != CHUNK_MAGIC:
            continue
        p, end = off + 32, min(off + chunk_size, len(data))
        while p + 8 <= end:
            rtype, len8, dev, flags, dt = struct.unpack_from("<BBBBI", data, p)
            if rtype == 0 or len8 == 0 or p + len8 * 8 > end:
                break
            body = data[p:p + len8 * 8]
            if rtype == T_CLOCK:
                base = struct.unpack_from("<Q", body, 8)[0]
            out.append((base + dt, tid, rtype, dev, body))
            p += len8 * 8
    out.sort(key=lambda r: r[0])
    return out


def main():
    recs = records(sys.argv[1])
    counted = recs
    if "--until" in sys.argv:
        label = sys.argv[sys.argv.index("--until") + 1].encode()
        for i, (_t, _tid, rtype, _dev, body) in enumerate(recs):
            if rtype == T_MARK and body[16:16 + struct.unpack_from("<I", body, 12)[0]] == label:
                counted = recs[:i]
                break
        else:
            print(f"no mark {label.decode()!r} in the log", file=sys.stderr)
            sys.exit(2)
    counts = collections.Counter(NAMES[r[2]] for r in counted if r[2] in NAMES)
    print(" ".join(f"t_{n}={counts.get(n, 0)}" for n in NAMES.values()))
    if "--live" in sys.argv:
        strings, sites, live = {}, {}, {}
        for _t, _tid, rtype, _dev, body in recs:
            if rtype == T_STRING:
                sid, n = struct.unpack_from("<II", body, 8)
                strings[sid] = body[16:16 + n].decode(errors="replace")
            elif rtype == T_SITE:
                sid, native, python = struct.unpack_from("<IHH", body, 8)
                at = 16 + native * 8
                sites[sid] = [struct.unpack_from("<III", body, at + i * 16) for i in range(python)]
            elif rtype == 24:
                addr, size, _stream, site = struct.unpack_from("<QQQI", body, 8)
                live[addr] = (size, site)
            elif rtype == 25:
                live.pop(struct.unpack_from("<Q", body, 8)[0], None)
        by_site = collections.Counter()
        for size, site in live.values():
            by_site[site] += size
        for site, size in by_site.most_common(3):
            frames = sites.get(site, [])
            where = " <- ".join(f"{strings.get(f, '?').split('/')[-1]}:{line}" for f, _fn, line in frames[:2])
            print(f"live_site site={site} bytes={size} python={where or '-'}")
    if "--fixture" in sys.argv:
        with open(sys.argv[sys.argv.index("--fixture") + 1], "w") as f:
            f.write("# action device addr size stream pool: PyTorch's trace as gmshim logged it\n")
            for _t, _tid, rtype, dev, body in recs:
                if rtype in NAMES:
                    addr, size, stream, _site, pool = struct.unpack_from("<QQQII", body, 8)
                    f.write(f"{rtype - 23} {dev if dev != 255 else -1} {addr:#x} {size} {stream:#x} {pool}\n")


if __name__ == "__main__":
    main()
