#!/usr/bin/env python3
"""Per scene and configuration of knobs.sh output: Mrays/s (best of 5) per round, and the mean."""
import sys, collections, re
for f in sys.argv[1:]:
    d = collections.defaultdict(list); cur = None; loads = []; order = []
    for l in open(f):
        if l.startswith('#'):
            m = re.match(r'# round (\d+) cfg=\[(.*?)\] (\S+) load: (\S+)', l)
            cur = (m.group(3).split('/')[0], m.group(2)); loads.append(float(m.group(4)))
            if m.group(2) not in order: order.append(m.group(2))
        elif '| bvh-wide |' in l:
            c = [x.strip() for x in l.split('|')]
            d[cur].append((float(c[8]), float(c[9]), float(c[10])))
    print(f, 'load average %.1f-%.1f' % (min(loads), max(loads)))
    for sc in ['bunny', 'sponza-dabrovic', 'conference-69k']:
        for k, name in [(1, 'AO'), (2, 'diffuse'), (0, 'primary')]:
            row = []
            for cfg in order:
                v = [x[k] for x in d[(sc, cfg)]]
                row.append(f"[{cfg}] {' '.join('%.2f' % x for x in v)} ({sum(v)/len(v):.2f})")
            print(f"{sc:16s} {name:8s} " + ' | '.join(row))
