#!/usr/bin/env python3
"""The spot preemption figures of objectives/catalog/instances.yaml (``spot_preempt_mtbi_h_per_node``,
``spot_reacquire_s`` and their ranges), measured from the published GPU spot traces.

    python tools/spot_traces.py SKYPILOT_SPOT_TRACES_DIR PARCAE_DIR

- SkyPilot's traces (skypilot-org/spot-traces @221da1a, Wu et al., "Can't Be Late", NSDI'24; X21):
  ``preemption/{1,4}-node/aws-*/<zone>_v100_1.json``, the number of p3.2xlarge (1 V100) spot instances held,
  sampled every ``gap_seconds`` (32 s, 300 s) while a launcher kept asking for the target (1 or 4).
- Parcae's trace (JF-D/Parcae @7cb3059, Duan et al., NSDI'24; X22): ``liveput/traces/p3trace.csv``, rows
  ``ms,add|remove,node`` of a 32-instance p3.2xlarge spot fleet over 11.4 h.

A preemption event is a fall in the count between two samples (Parcae: removals within 60 s of the first),
however many nodes it takes: a synchronous job restarts once for it. Node-hours are the count integrated
over time. A restoration is the time from a fall below the target until the count is back at the target.
Prints, per trace and pooled, node-hours, events, node-hours per event and the restorations' mean and median.
Standard library only.
"""
from __future__ import annotations

import csv
import json
import statistics
import sys
from pathlib import Path


def counts_skypilot(path: Path) -> tuple[list[float], float]:
    d = json.loads(path.read_text())
    return [float(v) for v in d["data"]], float(d["metadata"]["gap_seconds"])


def counts_parcae(path: Path, tick_s: float = 60.0) -> tuple[list[float], list[int]]:
    """The fleet's count sampled every ``tick_s`` and the times (ms) of the preemption events."""
    rows = [(int(t), a) for t, a, _ in csv.reader(path.open(newline=""))]
    out, count, k = [], 0, 0
    for i in range(int(rows[-1][0] / 1000 / tick_s)):
        while k < len(rows) and rows[k][0] <= i * tick_s * 1000:
            count += 1 if rows[k][1] == "add" else -1
            k += 1
        out.append(float(count))
    events: list[int] = []
    for t in sorted({t for t, a in rows if a == "remove"}):
        if not events or t - events[-1] > 60_000:
            events.append(t)
    return out, events


def restorations_h(x: list[float], gap_s: float, target: float) -> list[float]:
    """Hours from each fall below ``target`` (after the fleet first reached it) back to ``target``."""
    out, below, reached = [], None, False
    for i, v in enumerate(x):
        if v >= target:
            if below is not None:
                out.append((i - below) * gap_s / 3600.0)
            below, reached = None, True
        elif reached and below is None:
            below = i
    return out


def main() -> None:
    sky, parcae = Path(sys.argv[1]), Path(sys.argv[2])
    node_h = events = 0.0
    back: list[float] = []
    four: list[float] = []
    for f in sorted(sky.glob("preemption/*-node/aws-*/*_v100_1.json")):
        x, gap = counts_skypilot(f)
        h = sum(x) * gap / 3600.0
        n = sum(1 for a, b in zip(x, x[1:]) if b < a)
        r = restorations_h(x, gap, max(x))
        node_h, events, back = node_h + h, events + n, back + r
        four += r if f.parent.parent.name == "4-node" else []
        print(f"{f.parent.parent.name}/{f.name}: {h:.1f} node-h, {n} events, {h / n:.2f} node-h per event, "
              f"restorations mean {statistics.mean(r):.2f} h median {statistics.median(r):.2f} h")
    x, ev = counts_parcae(parcae / "liveput" / "traces" / "p3trace.csv")
    h = sum(x) / 60.0
    r = restorations_h(x, 60.0, 32.0)
    node_h, events, back = node_h + h, events + len(ev), back + r
    print(f"parcae p3trace (32 nodes): {h:.1f} node-h, {len(ev)} events, {h / len(ev):.2f} node-h per event, "
          f"restorations mean {statistics.mean(r):.2f} h median {statistics.median(r):.2f} h")
    print(f"pooled: {node_h:.1f} node-h, {events:.0f} events, {node_h / events:.2f} node-h per event; "
          f"{len(back)} restorations, mean {statistics.mean(back) * 3600:.0f} s, median "
          f"{statistics.median(back) * 3600:.0f} s; 4-node traces' mean {statistics.mean(four) * 3600:.0f} s")


if __name__ == "__main__":
    main()
