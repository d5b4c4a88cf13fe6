import json, sys, collections
d = json.load(open(sys.argv[1])); lo = int(sys.argv[2],16); hi = lo + int(sys.argv[3],16); rays = float(sys.argv[4])
by = collections.Counter(); ex = {}
for a, (c, chain) in d.items():
    a = int(a, 16)
    if not (lo <= a < hi): continue
    sl = [(fn,loc) for fn, loc in chain if loc.startswith(sys.argv[5] if len(sys.argv)>5 else 'stream.rs')]
    key = (sl[-3][1] if len(sl) >= 3 else sl[0][1]) if sl else 'none:' + (chain[-1][1] if chain else '?')
    by[key] += c
    ex.setdefault(key, chain)
for k, v in sorted(by.items(), key=lambda kv: -kv[1])[:40]:
    print('%-22s %7.1f   %s' % (k, v / rays, ' <- '.join(l for f, l in ex[k][:4])))
