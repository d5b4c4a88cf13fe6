#!/usr/bin/env python3
"""Summarises `caustic render --frames` logs (scripts/animation-table.sh).

usage: animation_table.py LOG...   (LOG named SCENE-DEVICE-UPDATE.log)

One row per log: frames, the median update (build or refit) ms, the median
frame ms (posing, update, upload and render, without the image's write) and
the frames per second it makes, over the frames after the first (which
opens the device and loads its kernels).
"""
import os
import re
import statistics
import sys

FRAME = re.compile(r"^frame (\d+) \(t = [-\d.]+ s, update (\w+) ?([\d.]+)? ?(?:ms)?.*?, frame ([\d.]+) ms\)")
BUILD = re.compile(r"triangles, (\S+) build ([\d.]+) ms")
DEVICE = re.compile(r"^device: (.*)")


def summarise(path):
    frames, updates, device = [], [], ""
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
    return device, frames, updates


def main():
    print("| scene | device | update | frames | update ms | frame ms | fps |")
    print("|---|---|---|---:|---:|---:|---:|")
    for path in sys.argv[1:]:
        scene, dev, update = os.path.basename(path)[:-4].rsplit("-", 2)
        device, frames, updates = summarise(path)
        if len(frames) < 2:
            print(f"| {scene} | {dev} | {update} | {len(frames)} | - | - | - |")
            continue
        frame_ms = statistics.median(frames[1:])
        update_ms = statistics.median(updates[1:])
        print(f"| {scene} | {device or dev} | {update} | {len(frames)} | {update_ms:.1f} | {frame_ms:.1f} | {1e3 / frame_ms:.1f} |")


if __name__ == "__main__":
    main()
