#!/usr/bin/env python3
"""Checks a memory snapshot pickle the way PyTorch's readers use it (standard library only).

usage: check_memviz.py SNAPSHOT.pickle [--expect-allocs N] [--expect-oom N] [--expect-categories]
                       [--expect-ledger TERM]

It loads the file with Python's pickle module, checks the structure PyTorch's snapshots have
(segments with blocks, device_traces entries, frames as {filename, line, name}), that each
segment's blocks tile it (torch.cuda._memory_viz stats asserts this), and replays the trace
backwards from the segments as pytorch.org/memory_viz does: every block freed must be live
again before its free, inside a segment live then; a block whose free was requested and not
completed (active_pending_free) still holds its place. gmshim's own key, gmshim_ledger (the
card's ledger per device), must add up to each device's total. Prints one summary line; exits 1 on the
first problem, naming it.
"""
import bisect
import collections
import pickle
import sys

ACTIONS = {"alloc", "free_requested", "free_completed", "segment_alloc", "segment_free", "oom", "snapshot"}


def fail(msg):
    print("check_memviz: " + msg)
    sys.exit(1)


def check_frames(frames, where):
    if not isinstance(frames, list):
        fail(f"{where}: frames is {type(frames).__name__}, not a list")
    for f in frames:
        if not isinstance(f, dict) or set(f) != {"filename", "line", "name"}:
            fail(f"{where}: a frame is {f!r}, not {{filename, line, name}}")
        if not isinstance(f["filename"], str) or not isinstance(f["name"], str) or not isinstance(f["line"], int):
            fail(f"{where}: a frame has the wrong types: {f!r}")


pending_all = [0]


def check_segments(snap):
    reserved = allocated = 0
    for i, seg in enumerate(snap["segments"]):
        for k in ("device", "address", "total_size", "allocated_size", "requested_size", "stream", "blocks"):
            if k not in seg:
                fail(f"segment {i} lacks {k}")
        addr, used, pending = seg["address"], 0, 0
        for b in seg["blocks"]:
            if b["address"] != addr:
                fail(f"segment {i}: a block at {b['address']:#x} where {addr:#x} was expected (blocks must tile)")
            if b["state"] not in ("active_allocated", "active_pending_free", "inactive"):
                fail(f"segment {i}: block state {b['state']!r}")
            check_frames(b["frames"], f"segment {i} block {b['address']:#x}")
            if b["state"] == "active_pending_free":
                pending += b["size"]
            if b["state"] == "active_allocated":
                used += b["size"]
                if b["requested_size"] > b["size"]:
                    fail(f"segment {i}: a block requests more than its size")
            addr += b["size"]
        if addr != seg["address"] + seg["total_size"]:
            fail(f"segment {i}: blocks sum to {addr - seg['address']}, the segment has {seg['total_size']}")
        if used != seg["allocated_size"]:
            fail(f"segment {i}: allocated_size {seg['allocated_size']}, its active blocks hold {used}")
        if "active_size" in seg and seg["active_size"] != used + pending:
            fail(f"segment {i}: active_size {seg['active_size']}, its allocated and pending blocks hold {used + pending}")
        reserved += seg["total_size"]
        allocated += used
        pending_all[0] += pending
    return reserved, allocated


def replay_backwards(snap, dev):
    """As MemoryViz.js does for a device: from the end state, undo each event."""
    segs = {s["address"]: s["total_size"] for s in snap["segments"] if s["device"] == dev}
    bases = sorted(segs)
    # a pending free (requested, not completed) still holds its block: live until free_completed
    live = {b["address"]: b["size"] for s in snap["segments"] if s["device"] == dev
            for b in s["blocks"] if b["state"] in ("active_allocated", "active_pending_free")}

    def in_segment(addr):
        i = bisect.bisect_right(bases, addr) - 1
        return i >= 0 and addr < bases[i] + segs[bases[i]]

    trace = snap["device_traces"][dev]
    for n in range(len(trace) - 1, -1, -1):
        e = trace[n]
        a = e["action"]
        if a == "alloc":
            if e["addr"] not in live:
                fail(f"device {dev} entry {n}: alloc of {e['addr']:#x}, which is not live after it")
            del live[e["addr"]]
        elif a == "free_requested":
            if e["addr"] not in live:
                fail(f"device {dev} entry {n}: free_requested of {e['addr']:#x}, whose block is not held after it")
        elif a == "free_completed":
            if e["addr"] in live:
                fail(f"device {dev} entry {n}: free of {e['addr']:#x}, live again after it")
            live[e["addr"]] = e["size"]
            if not in_segment(e["addr"]):
                fail(f"device {dev} entry {n}: the block freed at {e['addr']:#x} lies in no segment then")
        elif a == "segment_alloc":
            if e["addr"] not in segs:
                fail(f"device {dev} entry {n}: segment_alloc of {e['addr']:#x}, which is not there after it")
            del segs[e["addr"]]
            bases.remove(e["addr"])
        elif a == "segment_free":
            if e["addr"] in segs:
                fail(f"device {dev} entry {n}: segment_free of {e['addr']:#x}, where a segment is again after it")
            segs[e["addr"]] = e["size"]
            bisect.insort(bases, e["addr"])


def check_ledger(ledgers):
    """gmshim_ledger: [{device, time_us, total, terms: [{term, label, size, measured}]}], adding up."""
    terms = set()
    if not isinstance(ledgers, list):
        fail(f"gmshim_ledger is {type(ledgers).__name__}, not a list")
    for l in ledgers:
        for k in ("device", "time_us", "total", "terms"):
            if k not in l:
                fail(f"a ledger lacks {k}: {l!r}")
        for t in l["terms"]:
            if not {"term", "label", "size", "measured"} <= set(t) or not isinstance(t["measured"], bool):
                fail(f"device {l['device']}: a ledger term {t!r}")
            terms.add(t["term"])
        if sum(t["size"] for t in l["terms"]) != l["total"]:
            fail(f"device {l['device']}: the ledger's terms add up to {sum(t['size'] for t in l['terms'])}, "
                 f"the device has {l['total']}")
    return terms


def main():
    args = sys.argv[1:]
    if not args:
        fail("usage: check_memviz.py SNAPSHOT.pickle [--expect-allocs N] [--expect-oom N] [--expect-categories]")
    with open(args[0], "rb") as f:
        snap = pickle.load(f)
    for k in ("segments", "device_traces", "external_annotations", "allocator_settings"):
        if k not in snap:
            fail(f"no {k!r} at the top")
    count = collections.Counter()
    categories = set()
    for dev, trace in enumerate(snap["device_traces"]):
        for n, e in enumerate(trace):
            if e.get("action") not in ACTIONS:
                fail(f"device {dev} entry {n}: action {e.get('action')!r}")
            for k in ("size", "stream", "time_us", "frames"):
                if k not in e:
                    fail(f"device {dev} entry {n} ({e['action']}) lacks {k}")
            if e["action"] == "oom" and "device_free" not in e:
                fail(f"device {dev} entry {n}: an oom without device_free")
            if e["action"] not in ("oom", "snapshot") and "addr" not in e:
                fail(f"device {dev} entry {n}: no addr")
            check_frames(e["frames"], f"device {dev} entry {n}")
            if "category" in e:
                categories.add(e["category"])
            count[e["action"]] += 1
        replay_backwards(snap, dev)
    if categories and "unknown" not in categories:
        fail("categories without 'unknown': MemoryViz.js fails on that")
    reserved, allocated = check_segments(snap)
    for a in snap["external_annotations"]:
        if set(a) != {"stage", "name", "device", "time_us"} or a["stage"] not in ("START", "END"):
            fail(f"annotation {a!r}")
    ledger_terms = check_ledger(snap.get("gmshim_ledger", []))
    framed = sum(1 for t in snap["device_traces"] for e in t if e["action"] == "alloc" and e["frames"])
    print(f"segments {len(snap['segments'])} reserved {reserved} allocated {allocated} "
          f"alloc {count['alloc']} free {count['free_completed']} segment_alloc {count['segment_alloc']} "
          f"segment_free {count['segment_free']} oom {count['oom']} pending {pending_all[0]} with_frames {framed} "
          f"annotations {len(snap['external_annotations'])} categories {sorted(categories)} "
          f"ledger {sorted(ledger_terms)}")
    i = 1
    while i < len(args):
        want = args[i]
        if want == "--expect-allocs" and count["alloc"] != int(args[i + 1]):
            fail(f"{count['alloc']} alloc entries, {args[i + 1]} expected")
        if want == "--expect-oom" and count["oom"] != int(args[i + 1]):
            fail(f"{count['oom']} oom entries, {args[i + 1]} expected")
        if want == "--expect-categories" and not categories:
            fail("no categories: the memory outside the pool is not named")
        if want == "--expect-ledger" and args[i + 1] not in ledger_terms:
            fail(f"no ledger term {args[i + 1]!r} among {sorted(ledger_terms)}")
        i += 1 if want == "--expect-categories" else 2


if __name__ == "__main__":
    main()
