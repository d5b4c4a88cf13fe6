#!/usr/bin/env bash
# SPPM on 1, 2, 4, ... GPUs of one process with the passes dealt round the
# GPUs (the default) and split by rows (CAUSTIC_SPPM_SPLIT=rows), against
# an earlier CLI (docs/SCALING.md, "Whole passes dealt round the team"):
# the GPU test binaries sppm_gpu and facade_gpu, 4096² renders of 20
# passes, the steady time a pass ((t(100) - t(20)) / 80), four single-GPU
# renders at once (does a busy neighbour slow a GPU?), 8192² renders, and
# every image compared with one GPU's. Meant for the device tool: a folder
# holding bin.tar.xz (sppm_gpu, facade_gpu, caustic-after, caustic-before)
# and refs.tar.xz (the Cornell references), this script copied beside them:
#
#   run(kind: "nvidia-h100-x4", carry: ["target/h-dealt2"],
#       command: "bash target/h-dealt2/run.sh")
#
# PARTS="tests 4k steady conc 8k" picks the parts (default all).
set -uo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
out="${OUT:-$here/out}"; mkdir -p "$out"
w=/tmp/w; mkdir -p "$w/refs" "$w/img"; cd "$w"
tar -xJf "$here/bin.tar.xz"; tar -xJf "$here/refs.tar.xz" -C refs
export CAUSTIC_REFS="$w/refs" CAUSTIC_KERNEL_CACHE=/tmp/kc
export LD_LIBRARY_PATH="$(dirname "$(ls /usr/local/cuda*/targets/*/lib/libnvrtc.so.* | head -1)")"
nvidia-smi -L | tee "$out/gpus.txt"
gpus="$(nvidia-smi -L | wc -l)"
log="$out/scale.log"
PARTS="${PARTS:-tests 4k steady conc 8k}"
if [[ " $PARTS " == *" tests "* ]]; then
  start=$(date +%s)
  ./sppm_gpu --include-ignored --test-threads 1 >"$out/sppm_gpu.log" 2>&1; echo "sppm_gpu rc=$? ($(($(date +%s)-start)) s): $(grep '^test result' "$out/sppm_gpu.log")"
  grep -E "largest relative" "$out/sppm_gpu.log" | head -20
  start=$(date +%s)
  ./facade_gpu --include-ignored --test-threads 1 >"$out/facade_gpu.log" 2>&1; echo "facade_gpu rc=$? ($(($(date +%s)-start)) s): $(grep '^test result' "$out/facade_gpu.log")"
fi
for c in before after; do ./caustic-$c render cornell-caustics --integrator sppm --device cuda:0 --width 64 --height 64 -q -o img/warm-$c.exr >/dev/null 2>&1; done
secs() { sed -n 's/.*): \([0-9.]*\) s (\(.*\)), [0-9.]* M rays.*/\1/p' | tail -1; }
render() { # label cli devices size passes photons [env...]
  local label=$1 cli=$2 dev=$3 size=$4 passes=$5 photons=$6; shift 6
  echo "== $label $cli $dev $* ($(date +%T))" >>"$log"
  env "$@" ./caustic-$cli render cornell-caustics --integrator sppm --device "$dev" --width $size --height $size \
     --passes $passes --photons-per-pass $photons -o img/$label.exr >>"$log" 2>&1
  local line; line=$(grep '^wrote img/'"$label"'\.exr' "$log" | tail -1)
  echo "$label: $(sed -n 's/.*): \([0-9.]*\) s (\(.*\)), [0-9.]* M rays.*/\1 s (\2)/p' <<<"$line")"
}
t_of() { grep '^wrote img/'"$1"'\.exr' "$log" | tail -1 | secs; }
devs() { case $1 in 1) echo cuda:0;; 2) echo cuda:0,1;; 4) echo cuda:0,1,2,3;; 8) echo cuda:all;; esac; }
cmp_to() { ./caustic-after compare "img/$1.exr" "img/$2.exr" 2>&1 | head -1 | cut -c1-60; }
if [[ " $PARTS " == *" 4k "* ]]; then
  for n in 1 2 4 8; do
    [ $n -le $gpus ] || continue
    d=$(devs $n)
    render b-g$n-4k before $d 4096 20 16000000
    render a-g$n-4k after $d 4096 20 16000000
    [ $n -gt 1 ] && render r-g$n-4k after $d 4096 20 16000000 CAUSTIC_SPPM_SPLIT=rows
  done
  echo "a-g1-4k vs b-g1-4k (cells a pass late): $(cmp_to a-g1-4k b-g1-4k)"
  for f in img/[ar]-g*-4k.exr; do l=$(basename $f .exr); echo "$l vs a-g1-4k: $(cmp_to $l a-g1-4k)"; done
fi
if [[ " $PARTS " == *" steady "* ]]; then
  echo "steady (4096², 16e6 photons a pass): ms a pass = (t(100) - t(20)) / 80, render times"
  for n in 1 2 4 8; do
    [ $n -le $gpus ] || continue
    d=$(devs $n)
    for mode in a r; do
      [ $mode = r ] && [ $n = 1 ] && continue
      envs=(); [ $mode = r ] && envs=(CAUSTIC_SPPM_SPLIT=rows)
      render s$mode-g$n-20 after $d 4096 20 16000000 "${envs[@]}" >/dev/null
      render s$mode-g$n-100 after $d 4096 100 16000000 "${envs[@]}"
      t20=$(t_of s$mode-g$n-20); t100=$(t_of s$mode-g$n-100)
      echo "steady $mode $n GPUs: t20 $t20 s, t100 $t100 s -> $(python3 -c "print(f'{($t100-$t20)/80*1000:.2f} ms a pass')")"
    done
  done
  echo "sa-g4-100 vs sa-g1-100: $(cmp_to sa-g4-100 sa-g1-100)"
fi
if [[ " $PARTS " == *" conc "* ]] && [ $gpus -ge 2 ]; then
  echo "concurrent single-GPU processes, one a GPU (4096², 20 passes):"
  for i in $(seq 0 $((gpus-1))); do
    ./caustic-after render cornell-caustics --integrator sppm --device cuda:$i --width 4096 --height 4096 --passes 20 --photons-per-pass 16000000 -o img/c$i.exr >"$out/conc$i.log" 2>&1 &
  done; wait
  for i in $(seq 0 $((gpus-1))); do echo "  cuda:$i $(grep '^wrote' "$out/conc$i.log" | sed -n 's/.*): \([0-9.]*\) s (\([^,]*\),.*/\1 s (\2)/p')"; done
fi
if [[ " $PARTS " == *" 8k "* ]]; then
  for n in 1 2 4 8; do
    [ $n -le $gpus ] || continue
    render a-g$n-8k after $(devs $n) 8192 16 64000000
  done
  for f in img/a-g*-8k.exr; do l=$(basename $f .exr); echo "$l vs a-g1-8k: $(cmp_to $l a-g1-8k)"; done
fi
echo done
