#!/usr/bin/env python3
"""Tables for docs/BENCHMARKS.md from the JSON lines of scripts/bench-cpu-anchors.sh.

usage: accel_tables.py DIR [--structures bvh-binned,bvh-wide,...]

Prints, in markdown:
1. one table per caustic structure over the scenes, with the columns of
   Zeidan's (2011) tables 4.3-4.9 (build, ray cast = the primary pass, their sum,
   SAH, nodes / MB) plus leaves, leaf sizes, depth and peak build memory;
2. per scene, caustic/peer ratios: build time against Embree medium, and
   Mrays/s per ray kind against Embree's best configuration (the faster of
   medium and high with the best API), Embree single-ray, and obvhs's
   faster preset.
"""
import json
import os
import sys

SCENES = ["bunny", "dragon", "buddha", "sponza", "sibenik", "conference", "cornell", "ring"]
KINDS = ["primary", "ao", "diffuse"]


def load(folder):
    runs = {}
    for scene in SCENES:
        path = os.path.join(folder, scene + ".jsonl")
        if not os.path.exists(path):
            continue
        with open(path) as f:
            rows = [json.loads(line) for line in f if line.strip()]
        runs[scene] = rows
    return runs


def name_of(row):
    if row["library"] == "caustic":
        return row["config"]
    return row.get("run_name", row["library"] + " " + row["config"])


def mrays(row, kind):
    return row[kind]["mrays_s"]["best"]


def structure_tables(runs, wanted):
    names = []
    for rows in runs.values():
        for row in rows:
            if row["library"] == "caustic" and row["config"] not in names:
                names.append(row["config"])
    if wanted:
        names = [n for n in names if n in wanted]
    for name in names:
        print(f"\n#### {name}\n")
        print("| scene | prims | build ms | ray cast ms | build + ray cast ms | SAH | nodes / MB | leaves | avg / max leaf | depth | peak build MB | primary / AO / diffuse Mrays/s |")
        print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|")
        for scene, rows in runs.items():
            for row in rows:
                if row["library"] != "caustic" or row["config"] != name:
                    continue
                build = row["build_ms"]["best"]
                cast = row["primary"]["rays"] / mrays(row, "primary") / 1e3
                sah = row.get("sah_cost", 0.0)
                sah_text = "-" if row.get("nodes", 0) == 0 else f"{sah:.1f}"
                mb = row.get("bytes", 0) / 2**20
                peak = row.get("peak_build_bytes", 0) / 2**20
                print(
                    f"| {scene} | {row['prims']} | {build:.1f} | {cast:.1f} | {build + cast:.1f} | {sah_text} | "
                    f"{row.get('nodes', 0)} / {mb:.1f} | {row.get('leaves', 0)} | "
                    f"{row.get('avg_leaf_size', 0):.2f} / {row.get('max_leaf_size', 0)} | {row.get('max_depth', 0)} | "
                    f"{peak:.1f} | {mrays(row, 'primary'):.2f} / {mrays(row, 'ao'):.2f} / {mrays(row, 'diffuse'):.2f} |"
                )


def best_of(rows, prefix, kind):
    values = [mrays(r, kind) for r in rows if name_of(r).startswith(prefix)]
    return max(values) if values else None


def ratio_tables(runs, structures):
    for name in structures:
        print(f"\n#### {name} over peers (> 1: caustic faster)\n")
        print("| scene | Embree medium build ms / caustic build ms | primary / Embree best | diffuse / Embree best | AO / Embree best | primary / Embree 1-ray | diffuse / Embree 1-ray | primary / obvhs | diffuse / obvhs |")
        print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
        for scene, rows in runs.items():
            mine = [r for r in rows if r["library"] == "caustic" and r["config"] == name]
            if not mine:
                continue
            me = mine[0]
            medium = [r for r in rows if name_of(r) == "embree-medium"]
            single = [r for r in rows if name_of(r) == "embree-medium-1"]
            embree_best = {k: max(mrays(r, k) for r in rows if name_of(r) in ("embree-medium", "embree-high")) for k in KINDS}
            obvhs = {k: best_of(rows, "obvhs", k) for k in KINDS}

            def r(a, b):
                return f"{a / b:.2f}" if a and b else "-"

            build = r(medium[0]["build_ms"]["best"], me["build_ms"]["best"]) if medium else "-"
            cells = [
                build,
                r(mrays(me, "primary"), embree_best["primary"]),
                r(mrays(me, "diffuse"), embree_best["diffuse"]),
                r(mrays(me, "ao"), embree_best["ao"]),
                r(mrays(me, "primary"), mrays(single[0], "primary")) if single else "-",
                r(mrays(me, "diffuse"), mrays(single[0], "diffuse")) if single else "-",
                r(mrays(me, "primary"), obvhs["primary"]),
                r(mrays(me, "diffuse"), obvhs["diffuse"]),
            ]
            print(f"| {scene} | " + " | ".join(cells) + " |")


def main():
    args = sys.argv[1:]
    if not args:
        sys.exit(__doc__)
    folder = args[0]
    wanted = []
    if "--structures" in args:
        wanted = args[args.index("--structures") + 1].split(",")
    runs = load(folder)
    structure_tables(runs, wanted)
    ratio_tables(runs, wanted or ["bvh-binned", "bvh-wide"])


if __name__ == "__main__":
    main()
