#!/usr/bin/env python3
"""Means of the interleaved A/B runs (ab.sh output): Mrays/s best of 5 per run."""
import sys, collections
for f in sys.argv[1:]:
    d = collections.defaultdict(list); cur = None; loads = []
    for l in open(f):
        if l.startswith('#'):
            p = l.split(); cur = (p[5].split('/')[0], 'before' if 'before' in p[3] else 'after')
            loads.append(float(p[7]))
        elif '| bvh-wide |' in l:
            c = [x.strip() for x in l.split('|')]
            d[cur].append((float(c[8]), float(c[9]), float(c[10])))
    print(f, 'load average %.1f-%.1f' % (min(loads), max(loads)))
    for sc in ['bunny', 'sponza-dabrovic', 'conference-69k']:
        for k, name in [(0, 'primary'), (1, 'AO'), (2, 'diffuse')]:
            b = [x[k] for x in d[(sc, 'before')]]; a = [x[k] for x in d[(sc, 'after')]]
            if b and a:
                print(f"{sc:16s} {name:8s} before {', '.join('%.2f' % x for x in b)}  after {', '.join('%.2f' % x for x in a)}  after/before {sum(a)/len(a)/(sum(b)/len(b)):.3f}")
