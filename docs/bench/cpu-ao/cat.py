import json, sys, collections
d = json.load(open(sys.argv[1])); rays = float(sys.argv[2]); ver = sys.argv[3]
if ver == 'base':
    R = [((100,115),'regroup + batch loop'),((136,166),'regroup + batch loop'),((196,247),'stream set-up'),
         ((248,254),'stack pop + mask'),((255,283),'finisher'),((284,285),'node fetch'),((286,286),'interval test'),
         ((287,304),'lane-wise box tests + masks'),((305,316),'push'),((317,330),'stream leaf tests'),((331,340),'results')]
elif ver == 'v3':
    R = [((100,115),'regroup + batch loop'),((136,166),'regroup + batch loop'),((185,207),'push'),((212,291),'stream set-up'),
         ((292,299),'stack pop + mask'),((300,331),'finisher'),((332,335),'node fetch'),((336,336),'interval test'),
         ((337,352),'lane-wise box tests + masks'),((353,353),'push'),((354,374),'stream leaf tests'),((375,379),'results')]
else:
    R = [((100,115),'regroup + batch loop'),((136,166),'regroup + batch loop'),((180,200),'push'),((225,297),'stream set-up'),
         ((298,305),'stack pop + mask'),((306,337),'finisher'),((338,341),'node fetch'),((342,357),'per-ray box tests + masks'),
         ((358,358),'push'),((361,361),'interval test'),((362,377),'lane-wise box tests + masks'),((378,378),'push'),
         ((379,399),'stream leaf tests'),((400,404),'results')]
def cat(line):
    for (a,b),n in R:
        if a <= line <= b: return n
    return 'stream.rs line %d' % line
by = collections.Counter(); total = 0
for a, (c, chain) in d.items():
    total += c
    locs = [loc for fn, loc in chain]
    key = 'unattributed (no source line)'
    # innermost stream.rs frame that is trace_stream's own line: caller is stream.rs:10x
    for i in range(len(chain) - 1, 0, -1):
        if locs[i].startswith('stream.rs:10'):
            l = locs[i-1]
            if l.startswith('stream.rs:') and l[10:].isdigit():
                key = cat(int(l[10:]))
                if key == 'finisher':
                    inner = locs[:i-1]
                    if any(x.startswith('traverse.rs:333') for x in inner): key = 'finisher: node tests'
                    elif any(x.startswith('traverse.rs:376') for x in inner): key = 'finisher: leaf tests'
                    elif any(x.startswith('traverse.rs') for x in inner): key = 'finisher: stack, loop'
                    else: key = 'finisher: set-up (constants)'
            elif l.startswith('stream.rs:'): key = 'unattributed (no source line)'
            else: key = 'regroup + batch loop' if l.startswith('stream.rs') else 'other: ' + l
            break
    else:
        key = 'other: ' + (locs[-1] if locs else '?')
    by[key] += c
print('total', total, 'per ray %.0f' % (total / rays))
for k, c in sorted(by.items(), key=lambda kv: -kv[1]):
    print(f'{c/rays:7.0f} {100*c/total:5.1f}%  {k}')
