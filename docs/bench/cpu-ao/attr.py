#!/usr/bin/env python3
"""Self Ir per instruction address from a callgrind --dump-instr=yes file
(object = the caustic binary), attributed through addr2line -i inline chains."""
import sys, subprocess, collections, re
cg, binary = sys.argv[1], sys.argv[2]
names = {}
def name(kind, s):
    m = re.match(r'\((\d+)\)(?: (.*))?', s)
    if m.group(2) is not None: names[(kind, m.group(1))] = m.group(2)
    return names.get((kind, m.group(1)), '?')
cost = collections.Counter()
ob = None; skip = False; last = [0, 0]
def num(tok, prev):
    if tok == '*': return prev
    sign = 0
    if tok[0] in '+-': sign = 1 if tok[0] == '+' else -1; tok = tok[1:]
    v = int(tok, 16) if tok.startswith('0x') else int(tok)
    return prev + sign * v if sign else v
for line in open(cg):
    line = line.rstrip('\n')
    if not line: continue
    if line.startswith('ob='): ob = name('ob', line[3:]); continue
    if line.startswith('cob='): name('ob', line[4:]); continue
    if line.startswith('calls='): skip = True; continue
    if re.match(r'^[a-z]+=', line): continue
    if not (line[0].isdigit() or line[0] in '+-*'): continue
    toks = line.split()
    a = num(toks[0], last[0]); l = num(toks[1], last[1]) if len(toks) > 1 else last[1]
    last = [a, l]
    if skip: skip = False; continue
    if ob and ob.endswith(binary.split('/')[-1]) and len(toks) > 2:
        cost[a] += int(toks[2])
addrs = sorted(cost)
out = subprocess.run(['addr2line', '-e', binary, '-i', '-f', '-C', '-a'] + [hex(a) for a in addrs],
                     capture_output=True, text=True).stdout.splitlines()
chains = {}; cur = None; i = 0
while i < len(out):
    if out[i].startswith('0x'):
        cur = int(out[i], 16); chains[cur] = []; i += 1; continue
    fn, loc = out[i], out[i+1]; i += 2
    loc = re.sub(r' \(discriminator \d+\)', '', loc)
    chains[cur].append((fn, loc.split('/')[-1]))
import json
json.dump({hex(a): [cost[a], chains.get(a, [])] for a in addrs}, open(sys.argv[3], 'w'))
print(sum(cost.values()), len(addrs))
