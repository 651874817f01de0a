"""The shootout's report: the markdown of benches/RESULTS.md's issue-9 section and PNG plots.

``update_results(text, sub_heading, body)`` replaces one generated subsection ("### Quick
mode", "### Full mode") of the section "## Issue 9 — key-value shootout" and leaves the
rest of the file (other issues' sections, hand-written notes of this section) as it was;
the section is appended when missing. ``render(run)`` makes a subsection's markdown from
a run's JSON; ``plot(run, outdir)`` the PNGs.

Ratios are "rndb ÷ system" in the same run and the same cell, so above 1 means rndb is
faster: networked systems against rndb cluster (two rndbd, NoOfReplicas=2), embedded
ones (SQLite, LMDB) against rndb embedded (the Python module); the C ABI's row
(`rndb-embedded-capi`) has no ratio column, its comparisons with SQLite and LMDB are in
the targets table.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

SECTION = "## Issue 9 — key-value shootout"
INTRO = (
    "One Python load generator (benches/shootout/shootout.py) drives every system with its\n"
    "standard client library; `make shootout-quick` / `make shootout` install, start, run,\n"
    "stop everything and rewrite the generated subsections below (benches/README.md tells\n"
    "the method). The notes at the end are written by hand.\n"
)
EMBEDDED = {"rndb-embedded", "rndb-embedded-capi", "sqlite", "lmdb"}
NETWORKED_PEERS = ["redis", "memcached", "tarantool", "mariadb-prepared", "mariadb-text"]
REF_NET, REF_EMB, REF_CAPI = "rndb-cluster-r2", "rndb-embedded", "rndb-embedded-capi"
#: rndb's own rows, printed without a ratio (the C ABI's comparisons are in the targets).
NO_RATIO = {REF_NET, REF_EMB, REF_CAPI}


def _heading_level(line: str) -> int:
    if not line.startswith("#"):
        return 0
    n = len(line) - len(line.lstrip("#"))
    return n if line[n : n + 1] == " " else 0


def _block(lines: list[str], heading: str, lo: int, hi: int) -> tuple[int, int] | None:
    """[start, end) of the block under `heading` within lines[lo:hi], or None."""
    level = _heading_level(heading)
    for i in range(lo, hi):
        if lines[i].rstrip() == heading:
            j = i + 1
            while j < hi and not (0 < _heading_level(lines[j]) <= level):
                j += 1
            return i, j
    return None


def update_results(text: str, sub_heading: str, body: str) -> str:
    """`text` with the subsection `sub_heading` of SECTION replaced by `body` (which does
    not include the heading line); the section or subsection is appended when missing."""
    lines = text.splitlines()
    sec = _block(lines, SECTION, 0, len(lines))
    if sec is None:
        while lines and not lines[-1].strip():
            lines.pop()
        lines += ["", SECTION, "", *INTRO.splitlines(), ""]
        sec = _block(lines, SECTION, 0, len(lines))
        assert sec is not None
    new = [sub_heading, "", *body.strip("\n").splitlines(), ""]
    sub = _block(lines, sub_heading, sec[0] + 1, sec[1])
    if sub is None:
        end = sec[1]
        while end > sec[0] + 1 and not lines[end - 1].strip():
            end -= 1
        lines[end:end] = ["", *new]
    else:
        lines[sub[0] : sub[1]] = new
    return "\n".join(lines).rstrip("\n") + "\n"


def fmt_rate(x: float) -> str:
    if x is None or math.isnan(x):
        return "—"
    if x >= 1e6:
        return f"{x / 1e6:.2f}M"
    if x >= 1e3:
        return f"{x / 1e3:.0f}k"
    return f"{x:.0f}"


def fmt_us(x: float) -> str:
    if x is None or math.isnan(x):
        return "—"
    return f"{x:.0f}" if x >= 100 else f"{x:.1f}"


def cells_by(run: dict[str, Any]) -> dict[tuple[Any, ...], dict[str, Any]]:
    return {(c["system"], c["records"], c["value_size"], c["workload"], c["mode"], c["clients"]): c
            for c in run["cells"]}


def ratio(cells: dict[tuple[Any, ...], dict[str, Any]], c: dict[str, Any]) -> float:
    """rndb ÷ this system for the same cell (the rndb reference by kind); NaN for rndb."""
    ref = REF_EMB if c["system"] in EMBEDDED else REF_NET
    if c["system"] in NO_RATIO:
        return math.nan
    r = cells.get((ref, c["records"], c["value_size"], c["workload"], c["mode"], c["clients"]))
    if not r or not c["ops_s"]:
        return math.nan
    return float(r["ops_s"] / c["ops_s"])


def render(run: dict[str, Any]) -> str:
    """The markdown of one run (a generated subsection's body)."""
    cells = cells_by(run)
    out = [f"Command: `{run['command']}` — {run['started']} to {run['finished']} UTC, "
           f"commit {run['commit']}.", "",
           f"Machine: {run['machine']}.", "",
           "Versions: " + "; ".join(f"{k} {v}" for k, v in run["versions"].items()) + ".", "",
           f"Plan: {run['plan_text']}", ""]
    if run["status"]:
        out += ["| system | data set | status |", "|---|---|---|"]
        out += [f"| {s['system']} | {s['dataset']} | {s['status']} |" for s in run["status"]]
        out.append("")
    out += targets(run, cells)
    for ds in run["datasets"]:
        recs, vs = ds["records"], ds["value_size"]
        for clients in sorted({c["clients"] for c in run["cells"]
                               if c["records"] == recs and c["value_size"] == vs}):
            sel = [c for c in run["cells"] if c["records"] == recs and c["value_size"] == vs
                   and c["clients"] == clients]
            cols = sorted({(c["workload"], c["mode"]) for c in sel},
                          key=lambda wm: (run["workloads"].index(wm[0]), wm[1] != "unbatched"))
            systems = [s for s in run["systems"] if any(c["system"] == s for c in sel)]
            out += [f"#### {recs:,} records × {vs} B values, {clients} client"
                    f"{'s' if clients > 1 else ''}", "",
                    "ops/s (median of the repetitions, ± their spread (max − min) / median) · "
                    "rndb ÷ system; then p50 / p99 latency per call in µs (a batched call "
                    f"carries {run['batch']} operations).", ""]
            head = "| system | " + " | ".join(f"{w} {m}" for w, m in cols) + " |"
            out += [head, "|---|" + "---:|" * len(cols)]
            for s in systems:
                row = []
                for w, m in cols:
                    c = cells.get((s, recs, vs, w, m, clients))
                    if not c:
                        row.append("—")
                        continue
                    r = ratio(cells, c)
                    rs = "" if math.isnan(r) else f" · {r:.2f}"
                    miss = " (misses!)" if c["misses"] else ""
                    row.append(f"{fmt_rate(c['ops_s'])} ±{c['spread'] * 100:.0f}%{rs}{miss}")
                out.append(f"| {s} | " + " | ".join(row) + " |")
            out += ["", head, "|---|" + "---:|" * len(cols)]
            for s in systems:
                row = []
                for w, m in cols:
                    c = cells.get((s, recs, vs, w, m, clients))
                    row.append(f"{fmt_us(c['p50_us'])} / {fmt_us(c['p99_us'])}" if c else "—")
                out.append(f"| {s} | " + " | ".join(row) + " |")
            out.append("")
        loads = [c for c in run["loads"] if c["records"] == recs and c["value_size"] == vs]
        if loads:
            out += [f"Load of {recs:,} × {vs} B (rows/s, batched, one client): "
                    + ", ".join(f"{ld['system']} {fmt_rate(ld['rows_s'])}" for ld in loads) + ".", ""]
    if run.get("plots"):
        out += ["Plots: " + ", ".join(f"[{p}](shootout/plots/{p})" for p in run["plots"]) + ".", ""]
    return "\n".join(out)


def targets(run: dict[str, Any], cells: dict[tuple[Any, ...], dict[str, Any]]) -> list[str]:
    """The issue's three figures, checked for every data set, one client."""
    out = ["| target | data set | figure | met |", "|---|---|---|---|"]
    for ds in run["datasets"]:
        recs, vs = ds["records"], ds["value_size"]
        name = f"{recs:,} × {vs} B"

        def get(s: str, mode: str) -> dict[str, Any] | None:
            return cells.get((s, recs, vs, "pk", mode, 1))

        ref = get(REF_NET, "batched")
        for peer in NETWORKED_PEERS:
            c = get(peer, "batched")
            if ref and c:
                r = ref["ops_s"] / c["ops_s"]
                out.append(f"| batched PK reads: rndb cluster > {peer} | {name} | "
                           f"{fmt_rate(ref['ops_s'])} vs {fmt_rate(c['ops_s'])} = {r:.2f}× | "
                           f"{'yes' if r > 1 else '**no**'} |")
        for label, ref_emb in [("rndb embedded", REF_EMB), ("rndb embedded (C ABI)", REF_CAPI)]:
            for peer in ["lmdb", "sqlite"]:
                for mode in ["batched", "unbatched"]:
                    e, c = get(ref_emb, mode), get(peer, mode)
                    if e and c:
                        r = e["ops_s"] / c["ops_s"]
                        out.append(f"| {mode} PK reads: {label} > {peer} | {name} | "
                                   f"{fmt_rate(e['ops_s'])} vs {fmt_rate(c['ops_s'])} = {r:.2f}× | "
                                   f"{'yes' if r > 1 else '**no**'} |")
        u, rd = get(REF_NET, "unbatched"), get("redis", "unbatched")
        if u and rd:
            r = rd["ops_s"] / u["ops_s"]
            out.append(f"| unbatched PK reads over TCP: redis ÷ rndb cluster ≤ 1.5 | {name} | "
                       f"{fmt_rate(rd['ops_s'])} vs {fmt_rate(u['ops_s'])} = {r:.2f}× | "
                       f"{'yes' if r <= 1.5 else '**no**'} |")
    return out + [""]


def plot(run: dict[str, Any], outdir: Path, prefix: str) -> list[str]:
    """Throughput and latency PNGs per data set (one client); returns the file names."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    outdir.mkdir(parents=True, exist_ok=True)
    # More systems than the default cycle's 10 colours: one colour each.
    colors = plt.get_cmap("tab20").colors
    names = []
    cells = cells_by(run)
    for ds in run["datasets"]:
        recs, vs = ds["records"], ds["value_size"]
        systems = [s for s in run["systems"]
                   if any(c["system"] == s and c["records"] == recs and c["value_size"] == vs
                          for c in run["cells"])]
        wls = [w for w in run["workloads"] if any(c["workload"] == w and c["records"] == recs
                                                  and c["value_size"] == vs for c in run["cells"])]
        for what in ["throughput", "latency"]:
            metrics = [("ops_s", "ops/s")] if what == "throughput" else [
                ("p50_us", "p50 µs per call"), ("p99_us", "p99 µs per call")]
            fig, axes = plt.subplots(len(metrics), 2, figsize=(15, 4.5 * len(metrics)), squeeze=False)
            for mi, (key, label) in enumerate(metrics):
                for col, mode in enumerate(["unbatched", "batched"]):
                    ax = axes[mi][col]
                    width = 0.8 / max(1, len(systems))
                    for si, s in enumerate(systems):
                        ys, lo, hi = [], [], []
                        for w in wls:
                            c = cells.get((s, recs, vs, w, mode, 1))
                            y = c[key] if c else np.nan
                            ys.append(y)
                            if key == "ops_s" and c:
                                lo.append(y - min(c["reps"]))
                                hi.append(max(c["reps"]) - y)
                            else:
                                lo.append(0)
                                hi.append(0)
                        x = np.arange(len(wls)) + (si - len(systems) / 2 + 0.5) * width
                        ax.bar(x, ys, width, label=s, yerr=[lo, hi] if key == "ops_s" else None,
                               color=colors[si % len(colors)])
                    ax.set_xticks(np.arange(len(wls)), wls)
                    ax.set_yscale("log")
                    extra = f", batches of {run['batch']}" if mode == "batched" else ""
                    ax.set_title(f"{label}, {mode}{extra} — {recs:,} × {vs} B, 1 client")
                    ax.grid(axis="y", alpha=0.3)
            axes[0][1].legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.0, 1.0))
            fig.tight_layout()
            name = f"{prefix}-{what}-{recs}x{vs}.png"
            fig.savefig(outdir / name, dpi=80)
            plt.close(fig)
            names.append(name)
    return names
