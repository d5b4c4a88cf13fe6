#!/usr/bin/env python3
"""Median (and mean) Mrays/s of primary, AO and diffuse rays per scene and
variant of an ab.sh log, and the after/before ratio of the medians."""
import sys, collections, statistics as st
acc = collections.defaultdict(list); key = None
for line in open(sys.argv[1]):
    if line.startswith('# round'):
        f = line.split(); key = (f[5].split('/')[0], f[3])
    elif '| bvh-wide |' in line and key:
        c = [x.strip() for x in line.split('|')]
        acc[key].append([float(c[8]), float(c[9]), float(c[10])])
med = {k: [st.median(r[i] for r in v) for i in range(3)] for k, v in acc.items()}
for (scene, v), rows in sorted(acc.items()):
    m = med[(scene, v)]
    base = med.get((scene, 'before:stream'))
    ratio = ' '.join(f"{m[i] / base[i]:.2f}" for i in range(3)) if base else ''
    print(f"{scene:16s} {v:14s} n={len(rows)} median primary {m[0]:6.2f} AO {m[1]:6.2f} "
          f"diffuse {m[2]:6.2f}   / before: {ratio}")
