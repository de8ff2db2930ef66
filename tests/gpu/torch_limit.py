# GMSHIM_DEVICE_LIMIT on an H200 answers "does this fit on a 24 GB card?": the largest ResNet-50
# training batch that runs under GMSHIM_DEVICE_LIMIT=24G (found by bisection, one process per
# trial), against the largest batch whose peak reserved memory, measured without the cap, stays
# within 24 GiB. Both under PYTORCH_NO_CUDA_MEMORY_CACHING=1 and gmshim.
#   python3 tests/gpu/torch_limit.py            (the driver)
#   python3 tests/gpu/torch_limit.py --trial B  (one trial: prints ok/oom and gmshim's peaks)
import json, os, subprocess, sys

LIMIT = 24 << 30

if len(sys.argv) > 2 and sys.argv[1] == "--trial":
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bench"))
    import gmshim_stats, torch, torchvision
    batch = int(sys.argv[2])
    model = torchvision.models.resnet50(weights=None).cuda()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    x = torch.randn(batch, 3, 224, 224, device="cuda")
    y = torch.randint(0, 1000, (batch,), device="cuda")
    status = "ok"
    try:
        for _ in range(2):
            with torch.autocast("cuda", dtype=torch.bfloat16):
                loss = torch.nn.functional.cross_entropy(model(x), y)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
        torch.cuda.synchronize()
    except Exception as e:  # torch.AcceleratorError (out of memory) without PyTorch's cache
        status = "oom" if "out of memory" in str(e) else f"error: {str(e).splitlines()[0]}"
    st = gmshim_stats.stats() or {}
    print(json.dumps({"batch": batch, "status": status,
                      "peak_reserved": st.get("reserved", {}).get("peak"),
                      "peak_requested": st.get("requested", {}).get("peak"),
                      "ooms": st.get("ooms")}))
    sys.exit(0)

lib = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "build", "libgmshim.so")


def trial(batch, capped):
    env = dict(os.environ, PYTORCH_NO_CUDA_MEMORY_CACHING="1", LD_PRELOAD=os.path.abspath(lib),
               GMSHIM_LOG=os.environ.get("LIMIT_LOG", "off"))
    if capped:
        env["GMSHIM_DEVICE_LIMIT"] = "24G"
    p = subprocess.run([sys.executable, __file__, "--trial", str(batch)], env=env, capture_output=True,
                       text=True, timeout=300)
    for line in reversed(p.stdout.splitlines()):
        if line.startswith("{"):
            return json.loads(line)
    return {"batch": batch, "status": "crash: " + p.stderr[-200:]}


def bisect(ok, lo, hi):
    # ok(lo) holds, ok(hi) does not: the largest multiple of 8 in between that is ok
    while hi - lo > 8:
        mid = (lo + hi) // 2 // 8 * 8
        if ok(mid):
            lo = mid
        else:
            hi = mid
    return lo


seen = {}


def capped_ok(b):
    r = trial(b, True)
    seen[("cap", b)] = r
    return r["status"] == "ok"


def fits(b):
    r = seen.get(("free", b)) or trial(b, False)
    seen[("free", b)] = r
    return r["status"] == "ok" and r["peak_reserved"] is not None and r["peak_reserved"] <= LIMIT


# Without the cap, peak requested and peak reserved are linear in the batch: two runs place
# 24 GiB for each. A 24 GiB device holds at least what fits when gmshim may grow freely
# (reserved) and at most what the live tensors allow (requested); under the cap gmshim waits
# and releases instead of growing, so the answer lies between.
p1, p2 = trial(256, False), trial(512, False)
seen[("free", 256)], seen[("free", 512)] = p1, p2


def at_limit(key):
    slope = (p2[key] - p1[key]) / 256
    return int(256 + (LIMIT - p1[key]) / slope) // 8 * 8


b_res, b_req = at_limit("peak_reserved"), at_limit("peak_requested")
lo, hi = b_res - 16, b_req + 32
b_cap = bisect(capped_ok, lo, hi) if capped_ok(lo) and not capped_ok(hi) else None
res = {"limit": "24G", "largest_batch_under_cap": b_cap, "from_uncapped_reserved": b_res,
       "from_uncapped_requested": b_req, "trials": {f"{k[0]}:{k[1]}": v for k, v in sorted(seen.items())}}
print(json.dumps(res))
print(f"device_limit_24G: largest batch under the cap {b_cap}; from uncapped peaks: reserved {b_res}, "
      f"requested {b_req}")
