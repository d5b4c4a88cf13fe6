#!/usr/bin/env python3
"""Median and best Mrays/s of primary, AO and diffuse rays per scene and variant
of an ab.sh log, and their ratios to the base variant's (argument 2, default
`before:::`). On a loaded machine the best of the runs' best-of-REPS is the
steadier figure (load only slows a run down)."""
import sys, collections, statistics as st
acc = collections.defaultdict(list); key = None
base_name = sys.argv[2] if len(sys.argv) > 2 else 'before:::'
for line in open(sys.argv[1]):
    if line.startswith('# round'):
        f = line.split(); key = (f[5].split('/')[0], f[3])
    elif '| bvh-wide |' in line and key:
        c = [x.strip() for x in line.split('|')]
        acc[key].append([float(c[8]), float(c[9]), float(c[10])])
med = {k: [st.median(r[i] for r in v) for i in range(3)] for k, v in acc.items()}
best = {k: [max(r[i] for r in v) for i in range(3)] for k, v in acc.items()}
for (scene, v), rows in sorted(acc.items()):
    m, b = med[(scene, v)], best[(scene, v)]
    bm, bb = med.get((scene, base_name)), best.get((scene, base_name))
    rm = ' '.join(f"{m[i] / bm[i]:.2f}" for i in range(3)) if bm else ''
    rb = ' '.join(f"{b[i] / bb[i]:.2f}" for i in range(3)) if bb else ''
    print(f"{scene:16s} {v:22s} n={len(rows)} median P/AO/D {m[0]:6.2f} {m[1]:6.2f} {m[2]:5.2f} ({rm})"
          f"  best {b[0]:6.2f} {b[1]:6.2f} {b[2]:5.2f} ({rb})")
