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
    "dragon_vrip x36": "dragon-x36",
}


def main():
    # usage: gpu_vs_optix.py CAUSTIC.json [MORE_CAUSTIC.json ...] OPTIX.jsonl
    caustic = json.load(open(sys.argv[1]))
    for more in sys.argv[2:-1]:
        caustic["scenes"] += json.load(open(more))["scenes"]
    optix = {}
    for line in open(sys.argv[-1]):
        row = json.loads(line)
        if "scene" in row:
            optix[row["scene"]] = row
    device = caustic["device"]["name"]
    print(f"\ncaustic vs OptiX (Mitsuba 3.9.1 cuda_ad_rgb) on {device}, "
          f"{caustic['settings']['width']}x{caustic['settings']['height']}; Mrays/s and ms median (best); "
          "ratio = caustic's speed / OptiX's (> 1: caustic is faster)\n")
    print("| scene | structure | triangles | rays | caustic | OptiX | ratio (median) | ratio (best) |")
    print("|---|---|---:|---|---:|---:|---:|---:|")
    frames = []
    for s in caustic["scenes"]:
        o = optix.get(NAMES.get(s["scene"], s["scene"]))
        if o is None:
            continue
        accel = s.get("accel", "cpu:bvh-binned")
        passes = [
            ("primary", s["primary"]["tiles_8x4"], o["primary"]),
            ("AO", s["ao"]["pass"], o["ao"]),
            ("diffuse", s["diffuse"]["pass"], o["diffuse"]),
        ]
        for kind, c, x in passes:
            cm, cb = c["mrays_s"]["median"], c["mrays_s"]["best"]
            xb = x["mrays_s"]
            xm = x.get("mrays_s_median", xb)
            print(f"| {s['scene']} | {accel} | {s['tris']} | {kind} | {cm:.0f} ({cb:.0f}) | {xm:.0f} ({xb:.0f}) "
                  f"| {cm / xm:.2f} | {cb / xb:.2f} |")
        if "build" in s and "build_ms" in o:
            frames.append((s, accel, o))
    if not frames:
        return
    print("\nBuild, and build + one primary frame (tiles for caustic), ms median (best); "
          "ratio = OptiX's time / caustic's (> 1: caustic is faster)\n")
    print("| scene | structure | triangles | caustic build | OptiX build | ratio | caustic build + primary | OptiX build + primary | ratio |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|")
    for s, accel, o in frames:
        cb = s["build"]
        ob = o["build_ms"]
        # OptiX's primary pass time from its throughput and ray count.
        rays = s["primary"]["tiles_8x4"]["rays"]
        x = o["primary"]
        o_primary = rays / x.get("mrays_s_median", x["mrays_s"]) / 1e3
        o_frame = ob["median"] + o_primary
        c_frame = s["frame_ms"]
        print(f"| {s['scene']} | {accel} | {s['tris']} | {cb['median_ms']:.2f} ({cb['best_ms']:.2f}) "
              f"| {ob['median']:.2f} ({ob['best']:.2f}) | {ob['median'] / cb['median_ms']:.2f} "
              f"| {c_frame:.2f} | {o_frame:.2f} | {o_frame / c_frame:.2f} |")


if __name__ == "__main__":
    main()
