"""The result table of the comparison benchmark, and a description of the machine.

Pure formatting of the JSON document that compare.py builds.
"""
from __future__ import annotations

import os
import platform
import statistics
import subprocess
from typing import Any, Dict, List, Optional

from runner import MEASURES
from systems import NETWORKED_ALTERNATIVES

__all__ = ["format_table", "machine_info", "ROW_TITLES"]

ROW_TITLES: Dict[str, str] = {key: m.title for key, m in MEASURES.items()}
ROW_TITLES["mixed_explorer"] = "(e) mixed: explorer 1/call"
ROW_TITLES["mixed_learner"] = "(e) mixed: learner sampling"
SOLO_OF = {"mixed_explorer": "insert1_writer", "mixed_learner": "sample_prefetch"}
W2_ITEM_BYTES = 56_457  # workloads.W2.item_bytes


def machine_info() -> Dict[str, Any]:
    model = "?"
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    model = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    info: Dict[str, Any] = {"nproc": os.cpu_count(), "cpu_model": model,
                            "kernel": platform.release(), "loadavg_start": os.getloadavg()}
    try:
        out = subprocess.run(["redis-server", "--version"], capture_output=True, text=True,
                             timeout=5).stdout.split()
        info["redis"] = next((w[2:] for w in out if w.startswith("v=")), "?")
    except (OSError, subprocess.SubprocessError):
        pass
    return info


def human(value: Optional[float]) -> str:
    if value is None:
        return "-"
    for scale, suffix in ((1e6, "M"), (1e3, "k")):
        if value >= scale:
            return f"{value / scale:.3g}{suffix}"
    return f"{value:.3g}"


def format_table(doc: Dict[str, Any], systems: List[str], markdown: bool = False) -> str:
    """Rows = workload x measure; a column per system (median, min-max), then ratios.
    `markdown`: a Markdown table instead of aligned text."""
    index: Dict[tuple, Dict[str, Any]] = {}
    for r in doc["results"]:
        index[(r["workload"], r["measure"], r["system"])] = r
    workloads = sorted({r["workload"] for r in doc["results"]})
    measures = [k for k in ROW_TITLES if any(r["measure"] == k for r in doc["results"])]
    networked = [s for s in systems if s in NETWORKED_ALTERNATIVES]
    header = ["workload", "measure"] + systems
    if "replayd" in systems and networked:
        header.append("replayd/best net")
    if "replayd" in systems and "shm" in systems:
        header.append("replayd/shm")
    if "replayd" in systems and "replayd-socket" in systems:
        header.append("replayd/socket")
    rows = [header]
    notes = set()
    for w in workloads:
        for m in measures:
            cells = [w, ROW_TITLES[m]]
            medians: Dict[str, float] = {}
            for s in systems:
                r = index.get((w, m, s))
                if r is None:
                    cells.append("-")
                    continue
                t = r["transitions_per_s"]
                medians[s] = t["median"]
                mark = "*" if r.get("substituted_by") else ""
                if mark:
                    notes.add("* the system has no such mode; its synchronous number")
                cells.append(f"{human(t['median'])}{mark} ({human(t['min'])}-{human(t['max'])})")
            if "replayd/best net" in header:
                best = max((medians[s] for s in networked if s in medians), default=None)
                cells.append(f"{medians['replayd'] / best:.2f}x"
                             if best and "replayd" in medians else "-")
            if "replayd/shm" in header:
                cells.append(f"{medians['replayd'] / medians['shm']:.2f}x"
                             if "replayd" in medians and "shm" in medians else "-")
            if "replayd/socket" in header:
                cells.append(f"{medians['replayd'] / medians['replayd-socket']:.2f}x"
                             if "replayd" in medians and "replayd-socket" in medians else "-")
            rows.append(cells)
    if markdown:
        lines = ["| " + " | ".join(row) + " |" for row in rows]
        lines.insert(1, "|" + "|".join(["---"] * 2 + ["---:"] * (len(header) - 2)) + "|")
    else:
        widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
        lines = ["  ".join(c.ljust(widths[i]) if i < 2 else c.rjust(widths[i])
                           for i, c in enumerate(row)) for row in rows]
        lines.insert(1, "  ".join("-" * wd for wd in widths))
    lines.insert(0, f"transitions/s, median of {doc['reps']} (min-max); "
                    f"{doc['duration_s']:g} s per measure, mixed {doc['mixed_duration_s']:g} s")
    memcpy = doc.get("memcpy_gb_per_s")
    if memcpy:
        lines += ["", f"memcpy, one core (the workers' CPU): {memcpy['median']:.2f} GB/s "
                      f"(median of {len(memcpy['runs'])})"]
        for s in systems:
            r = index.get(("W2", "sample_prefetch", s))
            if r:
                gb = r["transitions_per_s"]["median"] * W2_ITEM_BYTES / 1e9
                lines.append(f"  W2 sample into one learner, {s}: {gb:.2f} GB/s = "
                             f"{gb / memcpy['median']:.2f} of memcpy")
    if doc.get("pinned"):
        lines += ["", "pinned: replayd's server on CPU 0, every worker process on CPU 1"]
    paired = _paired_ratios(index, workloads, measures, systems) if doc.get("interleaved") else []
    if paired:
        lines += ["", "per-repetition ratios (interleaved: repetition i ran on every system in "
                      "turn), median (min-max):"] + paired
    mixed = _mixed_share(index, workloads, systems)
    if mixed:
        lines += ["", "(e) mixed, each side as a share of its own solo rate "
                      "(explorer vs (a) writer, learner vs (c) prefetch):"] + mixed
    lines += [""] + sorted(notes) if notes else []
    return "\n".join(lines)


def _mixed_share(index: Dict[tuple, Dict[str, Any]], workloads: List[str],
                 systems: List[str]) -> List[str]:
    out = []
    for w in workloads:
        parts = []
        for s in systems:
            shares = []
            for side, solo in SOLO_OF.items():
                r, base = index.get((w, side, s)), index.get((w, solo, s))
                if r and base:
                    shares.append(f"{100 * r['transitions_per_s']['median'] / base['transitions_per_s']['median']:.0f}%")
            if len(shares) == 2:
                parts.append(f"{s} {shares[0]}/{shares[1]}")
        if parts:
            out.append(f"  {w}: " + ", ".join(parts))
    return out


def _paired_ratios(index: Dict[tuple, Dict[str, Any]], workloads: List[str],
                   measures: List[str], systems: List[str]) -> List[str]:
    """replayd (and replayd-writer) over shm, replayd-socket and the real cpprb's buffers,
    repetition by repetition: a drift of the machine between repetitions moves both sides
    of each ratio alike."""
    out = []
    others = [s for s in ("shm", "replayd-socket", "cpprb", "cpprb-mp") if s in systems]
    for w in workloads:
        for m in measures:
            parts = []
            for name in ("replayd", "replayd-writer"):
                mine = index.get((w, m, name))
                for other in others:
                    theirs = index.get((w, m, other))
                    if not mine or not theirs:
                        continue
                    ratios = sorted(a / b for a, b in zip(mine["transitions_per_s"]["runs"],
                                                          theirs["transitions_per_s"]["runs"])
                                    if b)
                    if ratios:
                        median = statistics.median(ratios)
                        label = "socket" if other == "replayd-socket" else other
                        parts.append(f"{name}/{label} {median:.2f} "
                                     f"({ratios[0]:.2f}-{ratios[-1]:.2f})")
            if parts:
                out.append(f"  {w} {ROW_TITLES[m]}: " + ", ".join(parts))
    return out
