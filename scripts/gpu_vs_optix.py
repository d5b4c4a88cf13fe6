#!/usr/bin/env python3
"""caustic against OptiX (Mitsuba 3's cuda_ad_rgb) on the same GPU, scenes and cameras.

Usage: gpu_vs_optix.py CAUSTIC.json OPTIX.jsonl

CAUSTIC.json is `caustic bench gpu --json`; OPTIX.jsonl is what
anchors/gpu/optix_anchor.py writes (the bundled copy also records medians).
Prints a markdown table per scene and ray kind with both throughputs and the
ratio caustic / OptiX (> 1: caustic is faster), for the medians and the bests.
Timing differs in kind: caustic times the trace launch alone with device
events; the anchor times Dr.Jit's launch with the host clock around a
synchronise, so its numbers carry some launch overhead (tens of microseconds
in a pass of 0.5 to 10 ms).
"""
import json
import sys

# caustic names scenes by file stem, the anchor by its spec's name.
NAMES = {
    "bun_zipper": "bunny",
    "dragon_vrip": "dragon",
    "sponza": "sponza",
    "sibenik": "sibenik",
    "conference": "conference",
    "dragon_vrip x16": "dragon-x16",
}


def main():
    caustic = json.load(open(sys.argv[1]))
    optix = {}
    for line in open(sys.argv[2]):
        row = json.loads(line)
        if "scene" in row:
            optix[row["scene"]] = row
    device = caustic["device"]["name"]
    print(f"\ncaustic vs OptiX (Mitsuba 3.9.1 cuda_ad_rgb) on {device}, "
          f"{caustic['settings']['width']}x{caustic['settings']['height']}; Mrays/s median (best); "
          "ratio = caustic / OptiX\n")
    print("| scene | triangles | rays | caustic | OptiX | ratio (median) | ratio (best) |")
    print("|---|---:|---|---:|---:|---:|---:|")
    for s in caustic["scenes"]:
        o = optix.get(NAMES.get(s["scene"], s["scene"]))
        if o is None:
            continue
        passes = [
            ("primary", s["primary"]["tiles_8x4"], o["primary"]),
            ("AO", s["ao"]["pass"], o["ao"]),
            ("diffuse", s["diffuse"]["pass"], o["diffuse"]),
        ]
        for kind, c, x in passes:
            cm, cb = c["mrays_s"]["median"], c["mrays_s"]["best"]
            xb = x["mrays_s"]
            xm = x.get("mrays_s_median", xb)
            print(f"| {s['scene']} | {s['tris']} | {kind} | {cm:.0f} ({cb:.0f}) | {xm:.0f} ({xb:.0f}) "
                  f"| {cm / xm:.2f} | {cb / xb:.2f} |")


if __name__ == "__main__":
    main()
