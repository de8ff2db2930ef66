#!/usr/bin/env python3
"""P1 before and after: runs build A's and build B's p1_hotpath under their own libgmshim.so, in
alternating rounds (A B A B ...) so that a drift of the machine's speed falls on both, and
prints, per size, the min and median over rounds of each round's median ns per pair, and the
median of the A/B ratios taken round by round. Against the fake runtime of each build (no GPU).

  bench/p1_ab.py BUILD_A BUILD_B [--rounds N] [--log] [sizes...]

BUILD_A, BUILD_B: build directories (`make build/libgmshim.so build/bench/p1_hotpath` in each).
--log: with the log on (into a temporary directory, no call sites); default GMSHIM_LOG=off.
"""
import argparse, json, os, shutil, statistics, subprocess, sys, tempfile


def one_round(build, sizes, log_dir):
    env = dict(os.environ, LD_PRELOAD=os.path.join(build, "libgmshim.so"))
    if log_dir:
        env.update(GMSHIM_LOG=os.path.join(log_dir, "p1-%p.gmlog"), GMSHIM_STACK_DEPTH="0")
    else:
        env["GMSHIM_LOG"] = "off"
    cmd = [os.path.join(build, "bench", "p1_hotpath"), "--reps", "7", "--batch-ms", "25"] + sizes
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, check=True).stdout
    if log_dir:
        for f in os.listdir(log_dir):
            os.unlink(os.path.join(log_dir, f))
    return {r["size"]: r["median_ns"] for r in map(json.loads, out.split("\n")[:-1])}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("build_a")
    ap.add_argument("build_b")
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--log", action="store_true")
    ap.add_argument("sizes", nargs="*", default=["512", "4096", "65536"])
    a = ap.parse_intermixed_args()
    log_dir = tempfile.mkdtemp(prefix="p1ab-") if a.log else None
    try:
        one_round(a.build_a, a.sizes, log_dir)  # warm-up, not counted
        one_round(a.build_b, a.sizes, log_dir)
        runs = {"A": [], "B": []}
        for _ in range(a.rounds):
            runs["A"].append(one_round(a.build_a, a.sizes, log_dir))
            runs["B"].append(one_round(a.build_b, a.sizes, log_dir))
    finally:
        if log_dir:
            shutil.rmtree(log_dir, ignore_errors=True)
    print("%d rounds, A = %s, B = %s, log %s" % (a.rounds, a.build_a, a.build_b, "on" if a.log else "off"))
    print("| size | A min | A median | B min | B median | A/B median [min–max] |")
    print("|---|---|---|---|---|---|")
    for size in sorted(runs["A"][0]):
        xa = [r[size] for r in runs["A"]]
        xb = [r[size] for r in runs["B"]]
        ratio = [x / y for x, y in zip(xa, xb)]
        print("| %d B | %.1f | %.1f | %.1f | %.1f | %.3f [%.3f–%.3f] |" % (
            size, min(xa), statistics.median(xa), min(xb), statistics.median(xb),
            statistics.median(ratio), min(ratio), max(ratio)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
