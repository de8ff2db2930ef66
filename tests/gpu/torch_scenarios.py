# PyTorch programs that run out of memory for a known reason, for checking gmshim's OOM causes on
# real logs. Each runs under a cap (GMSHIM_DEVICE_LIMIT, or PyTorch's own fraction when run without
# gmshim) until the OOM, prints one line `scenario=NAME iterations=N error=TYPE` and exits 0.
#
#   python3 tests/gpu/torch_scenarios.py NAME [--snapshot FILE]
#
# NAME (what the cause must be):
#   leak       each iteration keeps one activation (LEAK line)                  -> leak
#   slice      each iteration keeps a slice (a view) of an activation (LEAK)    -> leak
#   frag       a 1.5 GiB block cut into 100 MiB tensors, every other one freed,
#              then 600 MiB asked for: live + request fit under the 2 GiB cap   -> fragmentation
#   weights    after a mark, "weights" loaded until the device is full          -> capacity
#   transient  1 GiB of weights, then iterations whose temporaries grow until
#              one iteration's temporaries no longer fit                         -> transient peak
# --snapshot FILE: PyTorch's own memory history recorded and dumped to FILE (torch.cuda.memory
# _record_memory_history / _dump_snapshot), for comparing its snapshot with gmshim's export.
import ctypes
import sys

import torch

MiB = 1 << 20
mark = getattr(ctypes.CDLL(None), "gmshim_mark", None)


def note(label):
    if mark:
        mark(label.encode())


def floats(nbytes):
    return torch.empty(nbytes // 4, dtype=torch.float32, device="cuda")


def leak():
    w = [floats(256 * MiB) for _ in range(2)]
    kept = []
    it = 0
    while True:
        note(f"iteration {it}")
        x = floats(128 * MiB).normal_()
        h = torch.tanh(x * 2.0) + w[0][: x.numel()]
        kept.append(h * 1.0)                       # LEAK: one 128 MiB tensor kept per iteration
        del x, h
        it += 1


def slice_keep():
    kept = []
    it = 0
    while True:
        note(f"iteration {it}")
        act = floats(96 * MiB).normal_()          # LEAK: its storage stays alive through the slice
        kept.append(act[:16])
        out = act.sum()
        del act, out
        it += 1


def frag():
    note("setup")
    big = floats(1536 * MiB)
    del big                                       # a 1.5 GiB segment, cached
    note("cut")
    parts = [floats(100 * MiB) for _ in range(15)]
    for i in range(0, 15, 2):
        parts[i] = None                           # 800 MiB free, in 100 MiB holes
    note("ask")
    x = floats(600 * MiB)                         # FRAG: live 700 MiB + 600 MiB < 2 GiB
    return x


def weights():
    note("load")
    w = []
    while True:
        w.append(floats(256 * MiB))               # CAPACITY: weights that never fit


def transient():
    w = [floats(512 * MiB) for _ in range(2)]    # 1 GiB of weights
    it = 0
    while True:
        note(f"iteration {it}")
        tmp = [floats(64 * MiB) for _ in range(2 + it)]   # TRANSIENT: temporaries, freed each step
        s = sum(t.sum() for t in tmp)
        del tmp, s
        it += 1


SCENARIOS = {"leak": leak, "slice": slice_keep, "frag": frag, "weights": weights, "transient": transient}


def main():
    args = sys.argv[1:]
    snap = None
    if "--snapshot" in args:
        i = args.index("--snapshot")
        snap = args[i + 1]
        del args[i:i + 2]
    if len(args) != 1 or args[0] not in SCENARIOS:
        sys.exit("usage: torch_scenarios.py {%s} [--snapshot FILE]" % "|".join(SCENARIOS))
    name = args[0]
    torch.cuda.init()
    if snap:
        torch.cuda.memory._record_memory_history(max_entries=200000)
    err = "none"
    try:
        SCENARIOS[name]()
    except Exception as e:  # torch.OutOfMemoryError, or AcceleratorError with PyTorch's cache off
        err = f"{type(e).__name__}: {str(e).splitlines()[0][:160]}"
    if snap:
        torch.cuda.memory._dump_snapshot(snap)
    print(f"scenario={name} error={err}")


if __name__ == "__main__":
    main()
