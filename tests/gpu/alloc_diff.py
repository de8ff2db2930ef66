"""Which of PyTorch's live allocations differ with and without gmshim: ResNet-50 steps
(as tests/gpu/torch_bridge.py trains) with PyTorch's memory history on, then every active block of
its snapshot with its size and the C++/Python frames that made it.

  alloc_diff.py record OUT.json [N]  run N steps (60), write the blocks active at their end
  alloc_diff.py diff A.json B.json   the blocks one run has and the other has not, by size and frames
"""
import collections
import json
import sys


def signature(block):
    names = []
    for f in block.get("frames", []):
        name = f.get("name", "?")
        if name.startswith(("c10::", "torch::", "at::native::", "std::")) or "CachingAllocator" in name:
            continue
        names.append(f"{name}@{f.get('filename', '?').split('/')[-1]}:{f.get('line', 0)}")
        if len(names) == 6:
            break
    return f"{block['size']} " + " <- ".join(names)


def record(out):
    import torch
    sys.path.insert(0, __file__.rsplit("/", 1)[0])
    torch.cuda.init()
    torch.cuda.memory._record_memory_history(max_entries=400000)
    import torch_bridge
    taken = {}
    figures = torch_bridge.stats_line

    def snapshot_then_figures(extra):  # the end of train(): the model and its optimizer still live
        taken["snap"] = torch.cuda.memory._snapshot()
        taken["allocated"] = torch.cuda.memory_allocated()
        figures(extra)

    torch_bridge.stats_line = snapshot_then_figures
    torch_bridge.train(int(sys.argv[3]) if len(sys.argv) > 3 else 60)
    blocks = [b for seg in taken["snap"]["segments"] for b in seg["blocks"] if b["state"] == "active_allocated"]
    json.dump({"allocated": taken["allocated"], "blocks": [signature(b) for b in blocks]}, open(out, "w"))
    print(f"allocated={taken['allocated']} blocks={len(blocks)}")


def diff(a_path, b_path):
    a, b = json.load(open(a_path)), json.load(open(b_path))
    ca, cb = collections.Counter(a["blocks"]), collections.Counter(b["blocks"])
    print(f"allocated {a['allocated']} vs {b['allocated']} (difference {a['allocated'] - b['allocated']})")
    for sig in sorted(set(ca) | set(cb)):
        if ca[sig] != cb[sig]:
            print(f"  {ca[sig]:3d} vs {cb[sig]:3d}  {sig[:400]}")


if __name__ == "__main__":
    if sys.argv[1] == "record":
        record(sys.argv[2])
    else:
        diff(sys.argv[2], sys.argv[3])
