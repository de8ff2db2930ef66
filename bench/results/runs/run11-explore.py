#!/usr/bin/env python3
# The exploration script of run 11 (docs/gpu-results.md), kept as the record of what ran: an A/B of
# the code before (build/variants/base.so, commit 76467c1) and after (build/libgmshim.so, 43dc369)
# the first pool changes of that day, fence-policy variants on PyTorch, and P1/P5/P6 splits.
# It needs a build/ carrying both libraries and the GMSHIM_NOPOP switch of that build (a trial
# of MADV_POPULATE_WRITE on log chunks, not kept); run as `python3 build/explore.py`.
import json, os, subprocess, sys, time
ROOT = "/work/main" if os.path.isdir("/work/main/build") else os.getcwd()
B = os.path.join(ROOT, "build"); G = os.path.join(B, "gpu")
NEW = os.path.join(B, "libgmshim.so"); BASE = os.path.join(B, "variants", "base.so")
OUT = os.environ.get("OUT", "/tmp/out"); os.makedirs(OUT, exist_ok=True)
res = {}
def sh(c): return subprocess.run(c, shell=True, capture_output=True, text=True).stdout.strip()
res["env"] = {"df": sh(f"df -T {OUT} /tmp /dev/shm"), "clock": sh("cat /sys/devices/system/clocksource/clocksource0/current_clocksource"),
              "cpus": os.cpu_count(), "mounts": sh(f"findmnt -T {OUT}; findmnt -T /tmp")}
print(res["env"], flush=True)
def run(cmd, env=None, lib=None, timeout=300):
    e = dict(os.environ); e["LD_LIBRARY_PATH"] = "/usr/local/cuda/lib64:" + e.get("LD_LIBRARY_PATH", "")
    for k in list(e):
        if k.startswith("GMSHIM_") or k == "LD_PRELOAD": del e[k]
    e.update(env or {})
    if lib: e["LD_PRELOAD"] = lib
    t0 = time.time()
    p = subprocess.run(cmd, env=e, capture_output=True, text=True, timeout=timeout)
    if p.returncode: print("!!", cmd, p.returncode, p.stderr[-500:], flush=True)
    out = [json.loads(l) for l in p.stdout.splitlines() if l.startswith("{")]
    return out, round(time.time() - t0, 1)
def log(k, v):
    res[k] = v; print(k, json.dumps(v)[:600], flush=True)
    json.dump(res, open(os.path.join(OUT, "explore.json"), "w"), indent=1)
run(["python3", "-c", "import torch; x = torch.randn(4096, 4096, device='cuda'); [x @ x for _ in range(200)]; torch.cuda.synchronize()"])
sizes = ["512", "65536", "2097152", "1073741824"]
p1 = os.path.join(G, "p1_hotpath")
a = ["--reps", "5", "--batch-ms", "20"] + sizes
log("p1 async", run([p1, "--async"] + a)[0])
for name, lib, env in (("base log off", BASE, {"GMSHIM_LOG": "off"}), ("new log off", NEW, {"GMSHIM_LOG": "off"}),
                       ("base log OUT nostack", BASE, {"GMSHIM_LOG": OUT + "/p1b-%p.gmlog", "GMSHIM_STACK_DEPTH": "0"}),
                       ("new log OUT nostack", NEW, {"GMSHIM_LOG": OUT + "/p1n-%p.gmlog", "GMSHIM_STACK_DEPTH": "0"}),
                       ("new log shm nostack", NEW, {"GMSHIM_LOG": "/dev/shm/p1-%p.gmlog", "GMSHIM_STACK_DEPTH": "0"}),
                       ("new log shm nostack nopop", NEW, {"GMSHIM_LOG": "/dev/shm/p1x-%p.gmlog", "GMSHIM_STACK_DEPTH": "0", "GMSHIM_NOPOP": "1"}),
                       ("new trust log off", NEW, {"GMSHIM_LOG": "off", "GMSHIM_TRUST_STREAM_ORDER": "1"})):
    log("p1 " + name, {r["size"]: r["median_ns"] for r in run([p1] + a, env, lib)[0]})
sh(f"rm -f {OUT}/p1*.gmlog /dev/shm/p1*.gmlog")
w = os.path.join(B, "bench", "p5_writer")
for where in (OUT, "/dev/shm", "/tmp"):
    for threads in (1, 4):
        for pop in ("", "1"):
            env = {"GMSHIM_NOPOP": "1"} if pop else {}
            r, _ = run([w, "--out", f"{where}/p5x.gmlog", "--threads", str(threads), "--events", "40000000"], env)
            log(f"p5 {where} t{threads} nopop={pop}", r[0]["events_per_s_per_thread"] if r else None)
            sh(f"rm -f {where}/p5x.gmlog*")
for name, lib, env in (("base", BASE, {"GMSHIM_LOG": "off"}), ("new", NEW, {"GMSHIM_LOG": "off"}),
                       ("new log", NEW, {"GMSHIM_LOG": OUT + "/p6-%p.gmlog", "GMSHIM_STACK_DEPTH": "0"})):
    log("p6 " + name, {r["threads"]: [r["pairs_per_s"], r["speedup"]] for r in run([os.path.join(G, "p6_threads"), "--seconds", "0.5"], env, lib)[0]})
sh(f"rm -f {OUT}/p6*.gmlog")
P2 = os.path.join(ROOT, "bench", "p2_torch.py")
UN = {"PYTORCH_NO_CUDA_MEMORY_CACHING": "1", "GMSHIM_LOG": OUT + "/p2-%p.gmlog"}
def keep(r):
    if not r: return None
    r = r[-1]; g = r.get("gm", {})
    return {"step": r.get("step_ms"), "min": r.get("min_ms"), "max": r.get("max_ms"), "ratio": g.get("reserved_over_allocated"),
            "torch_ratio": r.get("torch_reserved_over_allocated"), "fences": g.get("fences"), "waits": g.get("fence_waits"),
            "wait_ms": g.get("fence_wait_ms"), "pending": g.get("peak_pending"), "us": r.get("empty_del_us")}
for wl, extra in (("resnet50", ["--blocks", "5", "--block-steps", "4", "--warmup", "3"]),
                  ("gpt2", ["--blocks", "4", "--block-steps", "3", "--warmup", "2"])):
    for name, lib, env in (("torch cache", None, {}), ("base", BASE, UN), ("new", NEW, UN),
                           ("new ff8", NEW, {**UN, "GMSHIM_FENCE_FREES": "8"}),
                           ("new ff1", NEW, {**UN, "GMSHIM_FENCE_FREES": "1"})):
        r, secs = run(["python3", P2, wl] + extra, env, lib)
        log(f"p2 {wl} {name}", {**(keep(r) or {}), "wall": secs})
        sh(f"rm -f {OUT}/p2-*.gmlog")
for name, lib, env in (("torch cache", None, {}), ("uncached", None, {"PYTORCH_NO_CUDA_MEMORY_CACHING": "1"}),
                       ("new", NEW, UN), ("new log off", NEW, {**UN, "GMSHIM_LOG": "off"}),
                       ("new nostacks", NEW, {**UN, "GMSHIM_STACK_DEPTH": "0", "GMSHIM_PYTHON_DEPTH": "0"}),
                       ("base", BASE, UN)):
    r, secs = run(["python3", P2, "empty"], env, lib)
    log(f"p2 empty {name}", {**(keep(r) or {}), "wall": secs})
    sh(f"rm -f {OUT}/p2-*.gmlog")
print("DONE", flush=True)
