import json, subprocess, sys
# usage: hotdis.py ATTR BIN FUNC_LO FUNC_SIZE PATTERN WINDOW_BEFORE WINDOW_AFTER
d = json.load(open(sys.argv[1])); binp=sys.argv[2]
lo=int(sys.argv[3],16); hi=lo+int(sys.argv[4],16); pat=sys.argv[5]
hot = sorted((int(a,16),c) for a,(c,chain) in d.items() if lo<=int(a,16)<hi and any(pat in l for f,l in chain))
best = max(hot, key=lambda x:x[1]); print('max', hex(best[0]), best[1])
a0 = best[0]-int(sys.argv[6],16); a1 = best[0]+int(sys.argv[7],16)
cnt = {int(a,16):c for a,(c,chain) in d.items()}
dis = subprocess.run(['objdump','-d','--no-show-raw-insn','--start-address=%d'%a0,'--stop-address=%d'%a1,binp],capture_output=True,text=True).stdout
for line in dis.splitlines():
    parts=line.split(':',1)
    try: a=int(parts[0].strip(),16)
    except: continue
    print('%8d  %s' % (cnt.get(a,0), line.strip()[:110]))
