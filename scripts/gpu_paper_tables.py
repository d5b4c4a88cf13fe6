#!/usr/bin/env python3
"""Issue 12's paper tables from one GPU run (scripts/gpu-tables.sh).

usage: gpu_paper_tables.py PAPERS.json [OPTIX.jsonl] [CPU.json ...] [--long]

PAPERS.json is `caustic bench gpu --json` at 1024x1024 (the `papers` part),
OPTIX.jsonl the OptiX anchor's rows from the same call (build times),
CPU.json files `caustic bench accel --json` rows (the CPU builders).

Prints markdown:
1. Zeidan 2011's cross-builder tables 4.3-4.9 as its summary arranges them
   (scenes by builders): build, ray cast (1024x1024 primary rays), their
   sum, SAH, nodes / MB, with the thesis's bunny row; --long adds one table
   per builder with the speed-ups over the thesis;
2. Vinkler et al. 2013's Table 1: HLBVH against the task-pool SAH BVH
   (SAH, build, primary / AO / diffuse Mrays/s) next to the paper's;
3. Zhou et al. 2008's Table 2: the kd-tree built on the CPU and the GPU
   (build, trace, SAH) on the BART frames and the dragon, next to the paper's;
4. the builds against OptiX's from the same call.
"""
import json
import sys

# The thesis's tables (GTX 285): build ms, ray cast ms, SAH, nodes, MB.
THESIS_BUNNY = {
    "kdtree": (74, 71, 150, 133703, 2.3),
    "bvh-sweep": (144.3, 28.8, 61, 115719, 4.4),
    "lbvh": (8.5, 32.9, 72.6, 660731, 25.2),
    "hlbvh": (29.2, 32, 71, 129154, 4.9),
    "bvh-binned-staged": (47.4, 31, 63, 42849, 1.6),
}
THESIS_NAMES = {
    "kdtree": "SAH kd-tree (Zhou'08 reimpl., table 4.3)",
    "bvh-sweep": "SAH BVH, full sweep (Lauterbach'09 reimpl., table 4.5)",
    "lbvh": "LBVH (table 4.6)",
    "hlbvh": "hybrid: Morton top + SAH (tables 4.7, 4.9)",
    "bvh-binned-staged": "binned SAH BVH, five stages (table 4.8)",
    "bvh-binned": "binned SAH BVH, caustic's default schedule",
    "ploc": "PLOC (not in the thesis)",
    "bvh-taskpool": "task-pool SAH BVH (Vinkler 2013)",
    "grid": "uniform grid (Ivson; not in the thesis)",
}
# Vinkler et al. 2013, Table 1 (GTX 680): SAH, build ms, primary, AO,
# diffuse Mrays/s, for HLBVH_4 and the task-pool BVH ("Our").
VINKLER = {
    "sponza": ("Sponza 76k", (188.6, 34.0, 306.5, 182.4, 54.4), (200.8, 24.0, 259.5, 173.4, 51.2)),
    "sibenik": ("Sibenik 80k", (80.6, 34.2, 203.0, 167.7, 42.0), (75.7, 26.6, 231.2, 197.2, 43.2)),
    "conference": ("Conference 282k", (122.3, 37.9, 274.1, 134.0, 63.6), (117.5, 44.2, 303.4, 150.4, 70.2)),
    "dragon_vrip x16": ("Power Plant 12.7M", (171.3, 305.6, 26.3, 77.1, 9.1), (123.4, 1501.1, 55.6, 122.9, 13.7)),
}
# Zhou et al. 2008, Table 2 (8800 Ultra): CPU build s, CPU trace s, CPU SAH,
# GPU build s, GPU trace s, GPU SAH.
ZHOU = {
    "museum": ("Museum 27k", (0.108, 0.109, 76.0, 0.017, 0.108, 38.3)),
    "robot": ("Robots 71k", (0.487, 0.165, 68.6, 0.039, 0.157, 59.7)),
    "kitchen": ("Kitchen 111k", (0.559, 0.26, 49.6, 0.053, 0.207, 77.8)),
    "dragon": ("Dragon 252k (exploding)", (1.354, 0.027, 124.2, 0.093, 0.025, 193.9)),
}
OPTIX_NAMES = {"bun_zipper": "bunny", "dragon_vrip": "dragon", "sponza": "sponza", "sibenik": "sibenik",
               "conference": "conference", "dragon_vrip x16": "dragon-x16"}


def rows_by(doc):
    return {(s["scene"], s["accel"]): s for s in doc["scenes"]}


def scenes_of(doc):
    seen = []
    for s in doc["scenes"]:
        if s["scene"] not in seen:
            seen.append(s["scene"])
    return seen


def mrays(row, kind):
    p = row["primary"]["tiles_8x4"] if kind == "primary" else row[kind]["pass"]
    return p["mrays_s"]["median"]


def primary_ms(row):
    return row["primary"]["tiles_8x4"]["median_ms"]


def sah(row):
    value = row["build"]["sah_cost"]
    return "-" if value is None or value != value else f"{value:.1f}"


def thesis_tables(doc):
    rows = rows_by(doc)
    width, height = doc["settings"]["width"], doc["settings"]["height"]
    print(f"Ray cast: {width}x{height} primary rays, median ms. Build: device ms, median.\n")
    for accel in THESIS_NAMES:
        print(f"#### {THESIS_NAMES[accel]}: `{accel}`\n")
        print("| scene | triangles | build ms | ray cast ms | build + ray cast ms | SAH | nodes / MB |")
        print("|---|---:|---:|---:|---:|---:|---|")
        for scene in scenes_of(doc):
            r = rows.get((scene, accel))
            if r is None:
                continue
            b, t = r["build"]["median_ms"], primary_ms(r)
            print(f"| {scene} | {r['tris']:,} | {b:.2f} | {t:.2f} | {b + t:.2f} | {sah(r)} | "
                  f"{r['build']['nodes']:,} / {r['build']['bytes'] / 2**20:.1f} MB |")
            if scene == "bun_zipper" and accel in THESIS_BUNNY:
                pb, pt, ps, pn, pm = THESIS_BUNNY[accel]
                print(f"| *thesis, bunny (GTX 285)* | 69k | {pb} | {pt} | {pb + pt:.1f} | {ps} | {pn:,} / {pm} MB |")
                print(f"| *speed-up* | | {pb / b:.0f}x | {pt / t:.0f}x | {(pb + pt) / (b + t):.0f}x | | |")
        print()


def cell(value):
    return f"{value:.2f}" if isinstance(value, float) else str(value)


def cross_tables(doc):
    """The thesis's section 12.1 shape: one row per scene, one column per
    builder, for build, ray cast and their sum."""
    rows = rows_by(doc)
    accels = [a for a in THESIS_NAMES if any(k[1] == a for k in rows)]
    for title, value in (("build ms", lambda r: r["build"]["median_ms"]),
                         ("ray cast ms (primary)", primary_ms),
                         ("build + ray cast ms", lambda r: r["build"]["median_ms"] + primary_ms(r)),
                         ("SAH", sah),
                         ("nodes (cells) / MB", lambda r: f"{r['build']['nodes'] / 1e3:,.0f}k / {r['build']['bytes'] / 2**20:.1f}")):
        print(f"{title}:\n")
        print("| scene | " + " | ".join(f"`{a}`" for a in accels) + " |")
        print("|---|" + "---:|" * len(accels))
        for scene in scenes_of(doc):
            cells = [cell(value(rows[(scene, a)])) if (scene, a) in rows else "-" for a in accels]
            print(f"| {scene} | " + " | ".join(cells) + " |")
            if scene == "bun_zipper":
                paper = []
                for a in accels:
                    t = THESIS_BUNNY.get(a)
                    if t is None:
                        paper.append("-")
                    else:
                        paper.append({"build ms": f"{t[0]}", "ray cast ms (primary)": f"{t[1]}",
                                      "build + ray cast ms": f"{t[0] + t[1]:.1f}", "SAH": f"{t[2]}",
                                      "nodes (cells) / MB": f"{t[3] / 1e3:,.0f}k / {t[4]}"}[title])
                print("| *bunny, thesis (GTX 285)* | " + " | ".join(paper) + " |")
        print()


def vinkler_table(doc):
    rows = rows_by(doc)
    print("| scene (paper's / here) | builder | SAH | build ms | primary | AO | diffuse |")
    print("|---|---|---:|---:|---:|---:|---:|")
    for scene, (paper_scene, hl, ours) in VINKLER.items():
        for label, accel, paper in (("HLBVH", "hlbvh", hl), ("task pool", "bvh-taskpool", ours)):
            r = rows.get((scene, accel))
            ps, pb, pp, pa, pd = paper
            print(f"| {paper_scene}, paper (GTX 680) | {label} | {ps} | {pb} | {pp} | {pa} | {pd} |")
            if r is None:
                continue
            b = r["build"]["median_ms"]
            print(f"| {scene} {r['tris'] / 1e3:,.0f}k, H100 | `{accel}` | {sah(r)} | {b:.2f} | "
                  f"{mrays(r, 'primary'):.0f} | {mrays(r, 'ao'):.0f} | {mrays(r, 'diffuse'):.0f} |")
    print("\nSAH: the paper's costs are its own (c_t, c_i unknown); caustic's are C_trav = C_isect = 1, "
          "so compare the ratio of the two builders, not the values.\n")


def zhou_table(doc, cpu_rows):
    rows = rows_by(doc)
    print("| scene | triangles | CPU build s (caustic: 2-core dev machine) | CPU SAH | GPU build s | GPU trace s (caustic: 1024², primary + AO) | GPU SAH | CPU/GPU build |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for key, (paper_scene, p) in ZHOU.items():
        print(f"| *{paper_scene}, paper (8800 Ultra, CPU offline builder)* | | {p[0]} | {p[2]} | {p[3]} | {p[4]} | {p[5]} | {p[0] / p[3]:.1f}x |")
        scene = next((s for s in scenes_of(doc) if key in s.lower() and "x16" not in s), None)
        if scene is None:
            continue
        r = rows.get((scene, "kdtree"))
        c = next((c for c in cpu_rows if key in c["scene"].lower() and c["config"] == "kdtree"), None)
        if r is None:
            continue
        gpu_build = r["build"]["median_ms"] / 1e3
        trace = (primary_ms(r) + r["ao"]["pass"]["median_ms"]) / 1e3
        cpu_build = c["build_ms"]["median"] / 1e3 if c else float("nan")
        cpu_sah = f"{c['sah_cost']:.1f}" if c and "sah_cost" in c else "-"
        print(f"| {scene}, H100 | {r['tris']:,} | {cpu_build:.3f} | {cpu_sah} | {gpu_build:.4f} | {trace:.4f} | "
              f"{sah(r)} | {cpu_build / gpu_build:.0f}x |")
    print()


def optix_table(doc, optix):
    rows = rows_by(doc)
    print("| scene | triangles | OptiX build ms (median) | " + " | ".join(
        ["lbvh", "hlbvh", "ploc", "bvh-binned", "bvh-taskpool", "kdtree", "grid"]) + " |")
    print("|---|---:|---:|" + "---:|" * 7)
    for scene in scenes_of(doc):
        o = next((o for o in optix if o["scene"] == OPTIX_NAMES.get(scene)), None)
        if o is None:
            continue
        cells = []
        for accel in ["lbvh", "hlbvh", "ploc", "bvh-binned", "bvh-taskpool", "kdtree", "grid"]:
            r = rows.get((scene, accel))
            cells.append(f"{r['build']['median_ms']:.2f}" if r else "-")
        print(f"| {scene} | {o['tris']:,} | {o['build_ms']['median']:.2f} | " + " | ".join(cells) + " |")
    print()


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    doc = json.load(open(sys.argv[1]))
    optix, cpu_rows = [], []
    for path in (a for a in sys.argv[2:] if not a.startswith("--")):
        with open(path) as f:
            lines = [json.loads(line) for line in f if line.strip()]
        if path.endswith(".jsonl") and lines and "variant" in lines[0]:
            optix = lines
        else:
            cpu_rows.extend(lines)
    print(f"device: {doc['device']['name']}\n")
    cross_tables(doc)
    if "--long" in sys.argv:
        thesis_tables(doc)
    print("### Vinkler et al. 2013, Table 1\n")
    vinkler_table(doc)
    print("### Zhou et al. 2008, Table 2\n")
    zhou_table(doc, cpu_rows)
    if optix:
        print("### Builds against OptiX's (same call)\n")
        optix_table(doc, optix)


if __name__ == "__main__":
    main()
