#!/usr/bin/env python3
"""Mean Mrays/s (primary, AO, diffuse) per scene and variant of an ab.sh log."""
import sys, collections
acc = collections.defaultdict(list); key = None
for line in open(sys.argv[1]):
    if line.startswith('# round'):
        f = line.split(); key = (f[5].split('/')[0], f[3])
    elif '| bvh-wide |' in line and key:
        c = [x.strip() for x in line.split('|')]
        acc[key].append([float(c[8]), float(c[9]), float(c[10])])
for (scene, v), rows in sorted(acc.items()):
    m = [sum(r[i] for r in rows) / len(rows) for i in range(3)]
    print(f"{scene:16s} {v:14s} n={len(rows)} primary {m[0]:6.2f} AO {m[1]:6.2f} diffuse {m[2]:6.2f}")
