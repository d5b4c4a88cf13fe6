#!/usr/bin/env python3
"""Summarises `caustic render --frames` logs (scripts/animation-table.sh).

usage: animation_table.py LOG...   (LOG named SCENE-DEVICE-UPDATE.log)

One row per log: frames, the median update (build or refit) ms, the median
frame ms (posing, update, upload and render, without the image's write) and
the frames per second it makes, over the frames after the first (which
opens the device and loads its kernels); then the median of each stage of
the frame line (pose, upload KB and ms of a GPU frame that followed the
previous one, render, download).
"""
import os
import re
import statistics
import sys

FRAME = re.compile(r"^frame (\d+) \(t = [-\d.]+ s, update (\w+) ?([\d.]+)? ?(?:ms)?.*?, frame ([\d.]+) ms")
STAGES = {
    "pose": re.compile(r"[;,] pose ([\d.]+) ms"),
    "repose": re.compile(r", repose ([\d.]+) ms"),
    "upload KB": re.compile(r", upload ([\d.]+) KB"),
    "upload ms": re.compile(r", upload [\d.]+ KB ([\d.]+) ms"),
    "render": re.compile(r", render ([\d.]+) ms"),
    "download": re.compile(r", download ([\d.]+) ms"),
}
BUILD = re.compile(r"triangles, (\S+) build ([\d.]+) ms")
DEVICE = re.compile(r"^device: (.*)")


def summarise(path):
    frames, updates, device = [], [], ""
    stages = {name: [] for name in STAGES}
    for line in open(path, errors="replace"):
        m = DEVICE.match(line)
        if m and not device:
            device = m.group(1)
        m = FRAME.match(line)
        if not m:
            continue
        frame_ms = float(m.group(4))
        if m.group(3):  # update refit/rebuild X ms, from a carried CPU tree
            update_ms = float(m.group(3))
        else:
            b = BUILD.search(line)
            update_ms = float(b.group(2)) if b else float("nan")
        frames.append(frame_ms)
        updates.append(update_ms)
        for name, pattern in STAGES.items():
            s = pattern.search(line)
            stages[name].append(float(s.group(1)) if s else float("nan"))
    return device, frames, updates, stages


def median(values):
    values = [v for v in values if v == v]
    return f"{statistics.median(values):.2f}" if values else "-"


def main():
    print("| scene | device | update | frames | update ms | frame ms | fps | " + " | ".join(STAGES) + " |")
    print("|---|---|---|---:|---:|---:|---:|" + "---:|" * len(STAGES))
    for path in sys.argv[1:]:
        scene, dev, update = os.path.basename(path)[:-4].rsplit("-", 2)
        device, frames, updates, stages = summarise(path)
        if len(frames) < 2:
            print(f"| {scene} | {dev} | {update} | {len(frames)} | - | - | - |" + " - |" * len(STAGES))
            continue
        frame_ms = statistics.median(frames[1:])
        update_ms = statistics.median(updates[1:])
        cells = " | ".join(median(v[1:]) for v in stages.values())
        print(f"| {scene} | {device or dev} | {update} | {len(frames)} | {update_ms:.2f} | {frame_ms:.2f} | {1e3 / frame_ms:.1f} | {cells} |")


if __name__ == "__main__":
    main()
