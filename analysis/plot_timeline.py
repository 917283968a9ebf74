#!/usr/bin/python3
"""Gantt chart of a run: one row per compute stream and per copy engine (memsim's timeline.csv).

    plot_timeline.py out/                    # out/timeline.png
    plot_timeline.py out/ --window 40:60     # 40 ms to 60 ms only
    plot_timeline.py out/ -o t.svg --size 14x4

Compute is blue, shaded by phase (forward, backward, optimizer); recompute orange; swaps out
green and in purple; stalls (a stream waiting on memory) red. Copies that a device's copy
engines carry at once go on separate rows (copy_out, copy_out.1, ...). Bars narrower than a
pixel are merged with their neighbours of the same colour; wide ones are labelled with their
op. Reads only timeline.csv and summary.json.
"""
import argparse
import re
import sys
from pathlib import Path

import numpy as np
import pandas as pd

import memsim_style as ms
from memsim_style import plt

LABEL_MIN_PX = 70  # bars at least this wide carry their op's name


def natural_key(text):
    return [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", str(text))]


COLUMNS = ["kind", "start_s", "end_s", "device", "stream", "op", "phase"]


def read_timeline(run_dir):
    """timeline.csv's columns the chart needs, each row with its lane."""
    path = Path(run_dir) / "timeline.csv"
    if not path.exists():
        raise SystemExit(f"{run_dir}: no timeline.csv")
    df = pd.read_csv(path, usecols=COLUMNS, keep_default_na=False, na_values=[],
                     dtype={"kind": str, "device": str, "stream": str, "op": str, "phase": str})
    return df.assign(lane=assign_lanes(df)) if len(df) else df.assign(lane=[])


def assign_lanes(df):
    """A lane name per row: 'gpu0 stream0', 'gpu0 copy_out', 'gpu0 copy_out.1', ..."""
    lanes = (df["device"].astype(str) + " " + df["stream"].astype(str)).to_numpy(dtype=object)
    copy = df["stream"].isin(["copy_out", "copy_in"]).to_numpy()
    if copy.any():
        idx = np.flatnonzero(copy)
        sub = df.iloc[idx]
        order = np.lexsort((sub["start_s"].to_numpy(), sub["stream"].to_numpy(), sub["device"].to_numpy()))
        free = {}  # (device, direction) -> list of engine end times
        for k in idx[order]:
            key = (df["device"].iat[k], df["stream"].iat[k])
            engines = free.setdefault(key, [])
            start, end = df["start_s"].iat[k], df["end_s"].iat[k]
            e = next((i for i, t in enumerate(engines) if t <= start), None)
            if e is None:
                engines.append(end)
                e = len(engines) - 1
            else:
                engines[e] = end
            if e > 0:
                lanes[k] = f"{lanes[k]}.{e}"
    return lanes


def lane_order(lanes):
    def key(lane):
        device, _, what = lane.partition(" ")
        kind = 0 if what.startswith("stream") else (1 if what.startswith("copy_out") else 2)
        return (natural_key(device), kind, natural_key(what))
    return sorted(set(lanes), key=key)


def timeline_bars(run_dir, window=None, resolution_s=0.0, df=None):
    """The bars plot_timeline draws: lane, key (colour: phase for compute, else the kind),
    start_s, end_s, op. Runs of sub-pixel bars (narrower than `resolution_s`) of one lane and
    colour are merged into one bar that names no op. `df`: read_timeline(run_dir), if read."""
    if df is None:
        df = read_timeline(run_dir)
    if df.empty:
        return pd.DataFrame(columns=["lane", "key", "start_s", "end_s", "op"])
    key = df["kind"].astype(str).copy()
    is_compute = (df["kind"] == "compute") & df["phase"].isin(["forward", "backward", "optimizer"])
    key[is_compute] = df.loc[is_compute, "phase"]
    df = df.assign(key=key)
    if window is not None:
        lo, hi = window
        if lo is not None:
            df = df[df["end_s"] > lo]
        if hi is not None:
            df = df[df["start_s"] < hi]
    bars = df[["lane", "key", "start_s", "end_s", "op"]].sort_values(["lane", "key", "start_s"], kind="stable")
    if resolution_s > 0 and len(bars):
        bars = merge_close(bars, resolution_s)
    return bars.reset_index(drop=True)


def merge_close(bars, gap):
    """Merges runs of bars narrower than `gap` (sub-pixel) of one lane and colour that
    follow each other within `gap`; a merged bar names no op. Wider bars stay as they are."""
    lane = bars["lane"].to_numpy()
    key = bars["key"].to_numpy()
    start = bars["start_s"].to_numpy()
    end = bars["end_s"].to_numpy()
    narrow = (end - start) < gap
    same = np.r_[False, (lane[1:] == lane[:-1]) & (key[1:] == key[:-1])]
    # Within a lane and colour, the furthest end so far (bars of several engines may overlap).
    segment = np.cumsum(~same)
    run_end = pd.Series(end).groupby(segment).cummax().to_numpy()
    joins = same & narrow & np.r_[False, narrow[:-1]] & (start - np.r_[0.0, run_end[:-1]] <= gap)
    group = np.cumsum(~joins) - 1
    g_end = pd.Series(end).groupby(group).max().to_numpy()
    g_size = np.bincount(group)
    out = bars.iloc[np.flatnonzero(~joins)].copy()
    out["end_s"] = g_end
    out.loc[out.index[g_size > 1], "op"] = ""
    return out


def plot(run_dir, output=None, window=None, size=None, dpi=100):
    summary = ms.read_summary(run_dir)
    full = read_timeline(run_dir)
    end_s = float(summary.get("iteration_time_s", 0.0)) or (full["end_s"].max() if len(full) else 1.0)
    lo = window[0] if window and window[0] is not None else 0.0
    hi = window[1] if window and window[1] is not None else end_s
    if hi <= lo:
        raise SystemExit(f"--window: the end must be after the start ({lo * 1e3} ms to {hi * 1e3} ms)")
    all_lanes = lane_order(full["lane"]) if len(full) else []
    if size is None:
        size = (12, max(2.6, 1.4 + 0.5 * len(all_lanes)))
    width_px = size[0] * dpi * 0.8
    resolution = (hi - lo) / width_px
    bars = timeline_bars(run_dir, window, resolution, df=full)
    t_name, t_factor = ms.time_unit(hi)

    fig, ax = plt.subplots(figsize=size, dpi=dpi)
    row = {lane: i for i, lane in enumerate(all_lanes)}
    keys_present = []
    for key_name in ms.KIND_COLOURS:
        sel = bars[bars["key"] == key_name]
        if sel.empty:
            continue
        keys_present.append(key_name)
        for lane, grp in sel.groupby("lane", sort=False):
            spans = list(zip(grp["start_s"] * t_factor, (grp["end_s"] - grp["start_s"]) * t_factor))
            ax.broken_barh(spans, (row[lane] - 0.38, 0.76), facecolors=ms.KIND_COLOURS[key_name],
                           edgecolor="white", linewidth=0.3 if len(spans) < 300 else 0)
    unknown = sorted(set(bars["key"]) - set(ms.KIND_COLOURS))
    for key_name in unknown:  # kinds a newer memsim writes: grey, still labelled
        sel = bars[bars["key"] == key_name]
        keys_present.append(key_name)
        for lane, grp in sel.groupby("lane", sort=False):
            spans = list(zip(grp["start_s"] * t_factor, (grp["end_s"] - grp["start_s"]) * t_factor))
            ax.broken_barh(spans, (row[lane] - 0.38, 0.76), facecolors="#999999")
    # Names on bars wide enough to read.
    px_per_s = width_px / (hi - lo)
    wide = bars[((bars["end_s"].clip(upper=hi) - bars["start_s"].clip(lower=lo)) * px_per_s >= LABEL_MIN_PX)
                & (bars["op"].astype(str) != "")]
    for _, b in wide.head(200).iterrows():
        x = (max(b["start_s"], lo) + min(b["end_s"], hi)) / 2 * t_factor
        ax.text(x, row[b["lane"]], str(b["op"]), ha="center", va="center", fontsize=7, clip_on=True,
                color="white" if b["key"] in ("forward", "optimizer", "stall", "swap_in") else "black")

    # Each compute tier's peak (summary.json's peak_time_s), named by the op running then.
    for tier, t in summary.get("tiers", {}).items():
        at = t.get("peak_time_s")
        if t.get("role") != "compute" or not t.get("peak_allocated_bytes") or at is None or not lo <= at <= hi:
            continue
        ax.axvline(at * t_factor, color="#c62828", linestyle="--", linewidth=1)
        op = (t.get("peak_op") or {}).get("name")
        ax.annotate(f"peak {tier}" + (f": {op}" if op else ""), (at * t_factor, 0), xycoords=("data", "axes fraction"),
                    xytext=(3, 3), textcoords="offset points", fontsize=7, color="#c62828")
    ax.set_yticks(range(len(all_lanes)))
    ax.set_yticklabels(all_lanes)
    ax.set_ylim(len(all_lanes) - 0.5, -0.5)
    ax.set_xlim(lo * t_factor, hi * t_factor)
    ax.set_xlabel(f"time ({t_name})")
    ax.grid(axis="y", visible=False)
    handles = [plt.Rectangle((0, 0), 1, 1, color=ms.KIND_COLOURS.get(k, "#999999")) for k in keys_present]
    ax.legend(handles, [ms.KIND_LABELS.get(k, k) for k in keys_present], loc="upper left",
              bbox_to_anchor=(1.01, 1.0), borderaxespad=0, frameon=False)
    status = "" if summary.get("status") == "ok" else f" — {summary.get('status', '').upper()}"
    ax.set_title(f"{summary.get('description') or summary.get('workload')} on {summary.get('platform')}, "
                 f"policy {summary.get('policy')}: iteration {ms.format_seconds(summary.get('iteration_time_s', 0))}"
                 f"{status}")
    fig.tight_layout()
    if output is None:
        output = Path(run_dir) / "timeline.png"
    return ms.save(fig, output, dpi), bars


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("run_dir", metavar="RUN_DIR", help="--out folder of `memsim run`")
    p.add_argument("--window", help="time range in ms, START:END (either may be empty)")
    ms.add_output_args(p, default_size="auto")
    a = p.parse_args(argv)
    size = None if a.size == "auto" else ms.parse_size(a.size)
    out, _ = plot(a.run_dir, a.output, ms.parse_window(a.window), size, a.dpi)
    print(out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
