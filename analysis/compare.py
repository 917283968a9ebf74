#!/usr/bin/python3
"""Side-by-side table of runs: time, slowdown against the first run, peaks, bytes moved.

    compare.py out/none out/vdnn out/dtr              # aligned text, at most 100 columns
    compare.py out/* --format markdown > runs.md      # or csv, html

One column per run (the first is the baseline), one row per figure. Reads only each run's
summary.json.
"""
import argparse
import sys
import textwrap

import pandas as pd

import memsim_style as ms


def compare_values(run_dirs, tier=None):
    """Numbers, one row per run (index: labels): the columns compare.py prints."""
    summaries = [ms.read_summary(d) for d in run_dirs]
    labels = ms.distinct_labels(run_dirs, summaries)
    base = summaries[0].get("iteration_time_s") or 0.0
    rows = []
    for d, s in zip(run_dirs, summaries):
        t = ms.compute_tier(s, tier)
        tinfo = s["tiers"][t]
        it = s.get("iteration_time_s")  # None for an OOM: no step time
        it = float("nan") if it is None else it
        moved_tiers = {k: v for k, v in s["tiers"].items() if v.get("role") != "compute"}
        rows.append({
            "run": str(d),
            "workload": s.get("description") or s.get("workload"),
            "platform": s.get("platform"),
            "policy": s.get("policy"),
            "status": s.get("status"),
            "iteration_time_s": it,
            "slowdown": it / base if base else float("nan"),
            "compute_time_s": s.get("compute_time_s", 0.0),
            "stall_time_s": s.get("stall_time_s", 0.0),
            "recompute_time_s": s.get("recompute_time_s", 0.0),
            "transfer_time_s": s.get("transfer_time_s", 0.0),
            "tier": t,
            "capacity_bytes": tinfo.get("capacity_bytes", 0),
            "peak_allocated_bytes": tinfo.get("peak_allocated_bytes", 0),
            "peak_reserved_bytes": tinfo.get("peak_reserved_bytes", 0),
            "peak_time_s": tinfo.get("peak_time_s", 0.0),
            "peak_op": (tinfo.get("peak_op") or {}).get("name", ""),
            "offload_peak_bytes": max([v.get("peak_allocated_bytes", 0) for v in moved_tiers.values()] + [0]),
            "swap_out_bytes": s.get("swap_out_bytes", 0),
            "swap_in_bytes": s.get("swap_in_bytes", 0),
            "recompute_flops": s.get("recompute_flops", 0.0),
        })
    return pd.DataFrame(rows, index=labels)


def compare_table(values):
    """The printed table: figures as rows, runs as columns, in human units."""
    b = ms.format_bytes
    t = ms.format_seconds
    rows = {
        "workload": values["workload"],
        "platform": values["platform"],
        "policy": values["policy"],
        "status": values["status"],
        "iteration": values["iteration_time_s"].map(lambda x: "-" if x != x else t(x)),  # NaN: an OOM
        "slowdown vs first": values["slowdown"].map(lambda x: "-" if x != x else f"{x:.3f}x"),
        "compute": values["compute_time_s"].map(t),
        "stall": values["stall_time_s"].map(t),
        "recompute": values["recompute_time_s"].map(t),
        "copies busy": values["transfer_time_s"].map(t),
        "tier": values["tier"],
        "peak allocated": values["peak_allocated_bytes"].map(b),
        "peak reserved": values["peak_reserved_bytes"].map(b),
        "capacity": values["capacity_bytes"].map(b),
        "peak / capacity": (values["peak_allocated_bytes"] / values["capacity_bytes"]).map(lambda x: f"{100 * x:.1f}%"),
        "peak at": values["peak_time_s"].map(t),
        "op at the peak": values["peak_op"],
        "offload tier peak": values["offload_peak_bytes"].map(b),
        "swapped out": values["swap_out_bytes"].map(b),
        "swapped in": values["swap_in_bytes"].map(b),
        "recompute FLOPs": values["recompute_flops"].map(lambda x: f"{x:.3g}"),
    }
    if len(values) < 2:  # a run compared with itself says nothing
        del rows["slowdown vs first"]
    return pd.DataFrame(rows).T


TEXT_WIDTH = 100  # columns of the text table, at most
CELL_WIDTH = 24   # a longer value (a workload's description) wraps onto more lines


def as_text(table, width=TEXT_WIDTH):
    """Aligned text at most `width` columns wide: long values wrapped, and when the runs do
    not fit side by side, the runs in blocks one under the other, each with the row names."""
    head = max(len(str(i)) for i in table.index)
    cells = {col: [textwrap.wrap(str(v), CELL_WIDTH) or [""] for v in table[col]] for col in table.columns}
    widths = {col: max([len(line) for c in cells[col] for line in c] + [len(line) for line in wrap_name(col)])
              for col in table.columns}
    blocks, block, used = [], [], head
    for col in table.columns:
        if block and used + 2 + widths[col] > width:
            blocks.append(block)
            block, used = [], head
        block.append(col)
        used += 2 + widths[col]
    blocks.append(block)
    out = []
    for block in blocks:
        names = [wrap_name(col) for col in block]
        for k in range(max(len(n) for n in names)):
            out.append((" " * head + "  " + "  ".join(
                (n[k] if k < len(n) else "").rjust(widths[col]) for n, col in zip(names, block))).rstrip())
        for r, name in enumerate(table.index):
            parts = [cells[col][r] for col in block]
            for k in range(max(len(p) for p in parts)):
                label = str(name) if k == 0 else ""
                out.append((label.ljust(head) + "  " + "  ".join(
                    (p[k] if k < len(p) else "").rjust(widths[col]) for p, col in zip(parts, block))).rstrip())
        out.append("")
    return "\n".join(out[:-1]) + "\n"


def wrap_name(col):
    return textwrap.wrap(str(col), CELL_WIDTH) or [""]


def as_markdown(table):
    cols = [""] + [str(c) for c in table.columns]
    out = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for name, row in table.iterrows():
        out.append("| " + " | ".join([str(name)] + [str(v) for v in row]) + " |")
    return "\n".join(out) + "\n"


def as_html(table):
    return table.to_html(border=0, escape=True)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("run_dirs", nargs="+", metavar="RUN_DIR", help="--out folders of `memsim run`; the first is the baseline")
    p.add_argument("--tier", help="tier whose peaks to show (default: each run's first compute tier)")
    p.add_argument("--format", choices=["text", "markdown", "csv", "html"], default="text")
    p.add_argument("-o", "--output", help="write to this file instead of the terminal")
    a = p.parse_args(argv)
    values = compare_values(a.run_dirs, a.tier)
    if a.format == "csv":
        text = values.to_csv(index_label="label", lineterminator="\n")
    else:
        table = compare_table(values)
        text = {"text": as_text, "markdown": as_markdown, "html": as_html}[a.format](table)
    if a.output:
        with open(a.output, "w", encoding="utf-8") as f:
            f.write(text)
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
