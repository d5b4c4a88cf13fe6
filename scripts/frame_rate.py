#!/usr/bin/env python3
"""The GPUs' own frame rate of an animation's log (`caustic render --frames`):
N x 1000 / the median frame time (posing, update, upload, render and download
of a frame; its write left out), the 2 x N slowest frames (each GPU's kernel
loads and first refits) left out.

    frame_rate.py LOG N
"""
import re
import statistics
import sys

log, n = sys.argv[1], int(sys.argv[2])
ms = sorted(float(m.group(1)) for line in open(log)
            if (m := re.search(r"^frame \d+ .*?frame ([\d.]+) ms;", line)))
kept = ms[:max(1, len(ms) - 2 * n)]
print(f"{n * 1000 / statistics.median(kept):.1f}")
