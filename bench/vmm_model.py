#!/usr/bin/env python3
"""A model of GMSHIM_SEGMENTS=vmm on a recorded trace (../shared/traces format), without the shim:
one range of addresses per class (requests up to 1 MiB, larger ones), best fit across it with
exact splits, physical memory in 2 MiB pages, frees taken at once (no GPU to wait for). Prints
the peak of pages mapped for two policies:
  keep   pages stay mapped once mapped (what gmshim does until a cache release or an OOM)
  move   a request that needs a page takes an idle one (wholly inside free blocks, idle the
         longest) before the driver is asked for more: the least any page-moving pool could
         reserve for this placement, and how many pages it moves to get there
Usage: xz -dc trace.txt.xz > t.txt; bench/vmm_model.py t.txt   (needs sortedcontainers)"""
import sys
from collections import OrderedDict

from sortedcontainers import SortedList

PAGE, SMALL = 2 << 20, 1 << 20


class Range:
    def __init__(self, base, size):
        self.free, self.at, self.end = SortedList(), {}, {}
        self.put(base, size)

    def put(self, a, n):  # a free block, merged with free neighbours
        if a in self.end:
            p = self.end.pop(a)
            pn = self.at.pop(p)
            self.free.remove((pn, p))
            a, n = p, n + pn
        if a + n in self.at:
            nn = self.at.pop(a + n)
            del self.end[a + n + nn]
            self.free.remove((nn, a + n))
            n += nn
        self.at[a], self.end[a + n] = n, a
        self.free.add((n, a))

    def take(self, n):  # best fit: smallest free block that holds n, lowest address first
        fn, fa = self.free[self.free.bisect_left((n, 0))]
        self.free.remove((fn, fa))
        del self.at[fa], self.end[fa + fn]
        if fn > n:
            self.at[fa + n], self.end[fa + fn] = fn - n, fa + n
            self.free.add((fn - n, fa + n))
        return fa


def model(path, move):
    ranges = {0: Range(0, 1 << 40), 1: Range(1 << 41, 1 << 40)}
    users, mapped, idle, live = {}, set(), OrderedDict(), {}
    pages = peak = moves = alloc = peak_alloc = 0
    for line in open(path):
        f = line.split()
        if f[0] == "a":
            n = max(512, (int(f[4]) + 511) // 512 * 512)
            cls = 1 if n <= SMALL else 0
            a = ranges[cls].take(n)
            live[f[3]] = (a, n, cls)
            alloc += n
            peak_alloc = max(peak_alloc, alloc)
            for pg in range(a // PAGE, (a + n - 1) // PAGE + 1):
                users[pg] = users.get(pg, 0) + 1
                if pg in mapped:
                    idle.pop(pg, None)
                    continue
                if move and idle:
                    mapped.discard(idle.popitem(last=False)[0])
                    moves += 1
                else:
                    pages += 1
                mapped.add(pg)
            peak = max(peak, pages)
        elif f[3] in live:
            a, n, cls = live.pop(f[3])
            alloc -= n
            ranges[cls].put(a, n)
            for pg in range(a // PAGE, (a + n - 1) // PAGE + 1):
                users[pg] -= 1
                if not users[pg]:
                    idle[pg] = 1
    return peak * PAGE, peak_alloc, moves


for path in sys.argv[1:]:
    for move in (False, True):
        res, alloc, moves = model(path, move)
        print(f"{path} {'move' if move else 'keep'}: peak reserved {res} ({res / alloc:.4f} x peak allocated "
              f"{alloc}), {moves} pages moved")
