#!/usr/bin/env python3
"""gmshim's memory_viz export against PyTorch's own snapshot, through PyTorch's loader.

usage: memviz_check.py GMSHIM.pickle TORCH.pickle
       memviz_check.py --run OUTDIR     (on the GPU machine: runs tests/gpu/memviz_torch.py under
                                         gmshim with PyTorch's cache and without it, exports both
                                         logs with build/gmshim, then checks the pairs)

For each snapshot it runs torch.cuda._memory_viz's own readers — stats (segsum, which asserts
that blocks tile their segments), trace (the event list), trace_plot and segment_plot (the
pages pytorch.org/memory_viz draws, here as their HTML) — and prints what each holds:
segments, reserved and allocated bytes, entries by action, frames, annotations. Exit 1 when a
loader fails on a snapshot gmshim wrote.
"""
import collections
import glob
import os
import pickle
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def describe(path):
    from torch.cuda import _memory_viz as mv
    with open(path, "rb") as f:
        snap = pickle.load(f)
    actions = collections.Counter(e["action"] for t in snap.get("device_traces", []) for e in t)
    framed = sum(1 for t in snap.get("device_traces", []) for e in t if e.get("frames"))
    print(f"  {path}")
    print(f"    segments {len(snap['segments'])}, reserved {sum(s['total_size'] for s in snap['segments'])}, "
          f"blocks {sum(len(s['blocks']) for s in snap['segments'])}, devices with a trace "
          f"{[i for i, t in enumerate(snap['device_traces']) if t]}")
    print(f"    entries {dict(actions)}, with frames {framed}, annotations {len(snap.get('external_annotations', []))}")
    cats = sorted({e['category'] for t in snap['device_traces'] for e in t if 'category' in e})
    if cats:
        print(f"    categories {cats}")
    failed = 0
    for name, fn in (("stats", lambda: mv.segsum(snap)), ("trace", lambda: mv.trace(snap)),
                     ("trace_plot", lambda: mv.trace_plot(snap)), ("segment_plot", lambda: mv.segment_plot(snap))):
        try:
            out = fn()
            tail = [l for l in out.splitlines() if l.startswith(("segments:", "total_reserved", "total_allocated"))]
            print(f"    {name}: ok, {len(out)} characters" + (f" ({'; '.join(tail)})" if tail else ""))
        except Exception as e:  # the loader's own verdict on the file
            failed += 1
            print(f"    {name}: FAILED: {type(e).__name__}: {e}")
    return failed


def run(out):
    os.makedirs(out, exist_ok=True)
    lib, cli = os.path.join(ROOT, "build", "libgmshim.so"), os.path.join(ROOT, "build", "gmshim")
    pairs = []
    for mode, extra in (("cached", {}), ("uncached", {"PYTORCH_NO_CUDA_MEMORY_CACHING": "1"})):
        env = dict(os.environ, LD_PRELOAD=lib, GMSHIM_LOG=os.path.join(out, mode + "-%p.gmlog"), **extra)
        torch_snap = os.path.join(out, "torch-" + mode + ".pickle")
        r = subprocess.run([sys.executable, os.path.join(ROOT, "tests", "gpu", "memviz_torch.py"), torch_snap],
                           env=env, capture_output=True, text=True)
        print(f"== {mode}: memviz_torch.py exited {r.returncode}\n{r.stdout}{r.stderr[-2000:]}")
        logs = sorted(glob.glob(os.path.join(out, mode + "-*.gmlog")), key=os.path.getsize)
        if not logs:
            print(f"== {mode}: no gmshim log")
            continue
        gm_snap = os.path.join(out, "gmshim-" + mode + ".pickle")
        e = subprocess.run([cli, "export", "memory-viz", "-o", gm_snap, logs[-1]], capture_output=True, text=True)
        print(f"== {mode}: gmshim export memory-viz exited {e.returncode}: {e.stderr.strip()}")
        subprocess.run([cli, "export", "perfetto", "-o", os.path.join(out, "gmshim-" + mode + ".json"), logs[-1]],
                       capture_output=True)
        pairs.append((gm_snap, torch_snap if os.path.exists(torch_snap) else None))
    return pairs


def main():
    args = sys.argv[1:]
    if len(args) == 2 and args[0] == "--run":
        pairs = run(args[1])
    elif len(args) == 2:
        pairs = [(args[0], args[1])]
    else:
        sys.exit(__doc__)
    failed = 0
    for gm, torch_snap in pairs:
        print("gmshim's snapshot:")
        failed += describe(gm) if os.path.exists(gm) else 1
        print("PyTorch's snapshot of the same script:")
        if torch_snap:
            describe(torch_snap)
        else:
            print("  none (PyTorch records no history in this mode)")
    print("memviz_check: " + ("FAILED" if failed else "every loader read gmshim's snapshots"))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
