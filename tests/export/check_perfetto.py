#!/usr/bin/env python3
"""Checks a Chrome trace-event JSON file (what ui.perfetto.dev and chrome://tracing open).

usage: check_perfetto.py TRACE.json [--processes N] [--peak-allocated BYTES...] [--ooms N]
                         [--resolution-ns NS] [--outside] [--peak SERIES=BYTES] [--last SERIES=BYTES]
                         [--card TERM]

The format's rules as the viewers apply them: a top object with a "traceEvents" list; every
event an object with a known "ph", a string "name", integer "pid" and "tid", a numeric "ts"
(microseconds) except metadata; counters ("C") with numeric args; complete slices ("X") with a
"dur" of zero or more; instants ("i") with a scope of g, p or t; metadata ("M") naming
processes and threads with the args each takes. Then what gmshim promises: per device the
counter tracks requested, allocated, reserved, cached and pending; one named process per log;
the OOMs as instants with cause and request; counters never past the peaks the reports give;
the card's ledger ("device N card: TERM" counters, written together at each sample) adding up
to the device's total at every sample.
Prints one summary line; exits 1 naming the first problem.
"""
import collections
import json
import sys

PHASES = {"B", "E", "X", "i", "I", "C", "M", "b", "e", "n", "s", "t", "f", "P", "O", "N", "D"}
METADATA = {"process_name": "name", "thread_name": "name", "process_sort_index": "sort_index",
            "thread_sort_index": "sort_index", "process_labels": "labels"}


def fail(msg):
    print("check_perfetto: " + msg)
    sys.exit(1)


def number(v):
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def check_event(i, e):
    if not isinstance(e, dict):
        fail(f"event {i} is not an object")
    ph = e.get("ph")
    if ph not in PHASES:
        fail(f"event {i}: unknown ph {ph!r}")
    if not isinstance(e.get("name"), str):
        fail(f"event {i}: name is not a string")
    for k in ("pid", "tid"):
        if not isinstance(e.get(k), int) or isinstance(e.get(k), bool):
            fail(f"event {i}: {k} is not an integer")
    if ph != "M" and (not number(e.get("ts")) or e["ts"] < 0):
        fail(f"event {i}: ts {e.get('ts')!r}")
    if ph == "C":
        if not isinstance(e.get("args"), dict) or not e["args"] or not all(number(v) for v in e["args"].values()):
            fail(f"event {i}: a counter without numeric args: {e}")
    if ph == "X" and (not number(e.get("dur")) or e["dur"] < 0):
        fail(f"event {i}: a complete event with dur {e.get('dur')!r}")
    if ph in ("i", "I") and e.get("s", "t") not in ("g", "p", "t"):
        fail(f"event {i}: instant scope {e.get('s')!r}")
    if ph == "M":
        key = METADATA.get(e["name"])
        if not key or not isinstance(e.get("args"), dict) or key not in e["args"]:
            fail(f"event {i}: metadata {e['name']!r} with args {e.get('args')!r}")


def check_card(tracks):
    """The card's terms of a device, as they stand at each sample, add up to its total."""
    by_dev = collections.defaultdict(dict)
    for (pid, name), s in tracks.items():
        if " card: " in name:
            by_dev[(pid, name.split()[1])][name] = sorted(s, key=lambda p: p[0])
    samples = 0
    for (pid, dev), terms in by_dev.items():
        total = tracks.get((pid, f"device {dev} total"))
        if not total:
            fail(f"pid {pid} device {dev}: card terms without a total counter")
        total = total[-1][1]
        for ts in sorted({t for s in terms.values() for t, _ in s}):
            now = sum(next((v for t, v in reversed(s) if t <= ts), 0) for s in terms.values())
            if now != total:
                fail(f"pid {pid} device {dev}: the card's terms add up to {now} at {ts}, the device has {total}")
            samples += 1
    return samples


def main():
    args = sys.argv[1:]
    if not args:
        fail("usage: check_perfetto.py TRACE.json [options]")
    with open(args[0], encoding="utf-8") as f:
        doc = json.load(f)
    if not isinstance(doc, dict) or not isinstance(doc.get("traceEvents"), list):
        fail("no traceEvents list at the top")
    events = doc["traceEvents"]
    for i, e in enumerate(events):
        check_event(i, e)
    procs = {e["pid"]: e["args"]["name"] for e in events if e["ph"] == "M" and e["name"] == "process_name"}
    tracks = collections.defaultdict(list)
    for e in events:
        if e["ph"] == "C":
            tracks[(e["pid"], e["name"])].append((e["ts"], e["args"]["bytes"]))
    for (pid, name), samples in tracks.items():
        if pid not in procs:
            fail(f"counter {name!r} of pid {pid}, a process without a name")
    devices = {(pid, n.split()[1]) for pid, n in tracks if n.startswith("device ")}
    for pid, dev in devices:
        for series in ("requested", "allocated", "reserved", "cached", "pending"):
            if (pid, f"device {dev} {series}") not in tracks:
                fail(f"pid {pid} device {dev}: no {series} counter")
    ooms = [e for e in events if e["ph"] == "i" and e["name"].startswith("OOM")]
    for o in ooms:
        if "cause" not in o["args"] or "request" not in o["args"]:
            fail(f"an OOM instant without cause and request: {o}")
    peaks = sorted(max(v for _, v in s) for (pid, n), s in tracks.items() if n.endswith(" allocated"))
    outside = [n for _, n in tracks if "outside the pool" in n]
    card = check_card(tracks)
    print(f"events {len(events)} processes {len(procs)} counter tracks {len(tracks)} "
          f"samples {sum(len(s) for s in tracks.values())} ooms {len(ooms)} peak_allocated {peaks} "
          f"outside {sorted(set(outside))} card samples {card}")
    i = 1
    while i < len(args):
        opt = args[i]
        if opt == "--processes" and len(procs) != int(args[i + 1]):
            fail(f"{len(procs)} processes, {args[i + 1]} expected")
        elif opt == "--ooms" and len(ooms) != int(args[i + 1]):
            fail(f"{len(ooms)} OOM instants, {args[i + 1]} expected")
        elif opt == "--peak-allocated":
            want = sorted(int(x) for x in args[i + 1].split(","))
            if peaks != want:
                fail(f"allocated counters peak at {peaks}, the reports say {want}")
        elif opt == "--resolution-ns":
            res_us = int(args[i + 1]) / 1000
            for (pid, name), s in tracks.items():
                ts = [t for t, _ in s]
                most = 2 * ((max(ts) - min(ts)) / res_us + 2)
                if len(ts) != len(set(ts)) or len(ts) > most:
                    fail(f"{name}: {len(ts)} samples over {max(ts) - min(ts)} us: not downsampled to {res_us} us")
        elif opt in ("--peak", "--last"):  # SERIES=BYTES: a device's counter at its peak / at the end
            series, want = args[i + 1].split("=")
            got = sorted(max(v for _, v in s) if opt == "--peak" else sorted(s, key=lambda p: p[0])[-1][1]
                         for (pid, n), s in tracks.items() if n.startswith("device ") and n.endswith(" " + series))
            if got != [int(want)]:
                fail(f"{series} counters {'peak at' if opt == '--peak' else 'end at'} {got}, {want} expected")
        elif opt == "--outside" and not outside:
            fail("no counter of the memory outside the pool")
        elif opt == "--card":
            if not card:
                fail("no sample of the card's ledger")
            if not any(n.split(" card: ", 1)[-1].startswith(args[i + 1]) for _, n in tracks if " card: " in n):
                fail(f"no card term {args[i + 1]!r} among {sorted(n for _, n in tracks if ' card: ' in n)}")
        i += 1 if opt == "--outside" else 2


if __name__ == "__main__":
    main()
