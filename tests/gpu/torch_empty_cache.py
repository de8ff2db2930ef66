"""torch.cuda.empty_cache() and gmshim's periodic release, read from nvidia-smi's figure for this
process (scripts/gpu-empty-cache). Two 10 000 x 10 000 float32 tensors, deleted; then
  empty     torch.cuda.empty_cache(), the figure read at once and 0.5 s later;
  wait      no call at all: the figure after `secs` seconds (GMSHIM_EMPTY_CACHE_INTERVAL /
            GMSHIM_IDLE_RELEASE are to give PyTorch's cache back by themselves);
  limit     under GMSHIM_DEVICE_LIMIT: 1 GiB fits, then 3 GiB must raise PyTorch's own error.
Prints one line of key=value (MiB)."""
import os
import subprocess
import sys
import time

import torch


def used_mib():
    out = subprocess.run(["nvidia-smi", "--query-compute-apps=pid,used_memory", "--format=csv,noheader,nounits"],
                         capture_output=True, text=True).stdout
    for line in out.splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) == 2 and parts[0] == str(os.getpid()):
            return int(parts[1])
    return -1


def main():
    mode = sys.argv[1]
    secs = float(sys.argv[2]) if len(sys.argv) > 2 else 3.0
    torch.cuda.init()
    if mode == "limit":
        a = torch.empty(1 << 28, dtype=torch.float32, device="cuda")  # 1 GiB
        try:
            b = torch.empty(3 << 28, dtype=torch.float32, device="cuda")  # 3 GiB
            err = "none"
            del b
        except Exception as e:  # the type is the check
            err = type(e).__name__
        del a
        print(f"mode=limit error={err} reserved={torch.cuda.memory_reserved() >> 20}")
        return
    x = torch.randn(10000, 10000, device="cuda")
    y = torch.randn(10000, 10000, device="cuda")
    torch.cuda.synchronize()
    before = used_mib()
    del x, y
    if mode == "empty":
        torch.cuda.empty_cache()
        at_once = used_mib()
        time.sleep(0.5)
        after = used_mib()
    else:
        at_once = used_mib()
        time.sleep(secs)
        after = used_mib()
    print(f"mode={mode} before={before} at_once={at_once} after={after} "
          f"reserved={torch.cuda.memory_reserved() >> 20}")


if __name__ == "__main__":
    main()
