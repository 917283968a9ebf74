#!/usr/bin/python3
"""Memory of one tier over an iteration, stacked by category (memsim's memory.csv).

    plot_memory.py out/                      # out/memory.png
    plot_memory.py out/none out/vdnn -o cmp.png   # several runs: totals overlaid, then one
                                                  # stacked panel per run

Shows the allocated bytes stacked by category (weights at the bottom, then optimizer state,
gradients, inputs, activations, ...), the reserved bytes as a line when the allocator caches
(reserved > allocated), the tier's capacity as a dashed line when the curve comes near it (at
least half of it; else the title says how small a share the peak is) and the peak marked. The
y axis is scaled to what is drawn. Reads only memory.csv and summary.json.
"""
import argparse
import sys
from pathlib import Path

import numpy as np
import pandas as pd

import memsim_style as ms
from memsim_style import plt

NEAR = 0.5  # the capacity is drawn when the curve reaches this share of it (--capacity: always)
MAX_POINTS = 6000  # beyond this the curve is thinned to a per-pixel envelope (peak kept)


def read_memory(run_dir, tier):
    path = Path(run_dir) / "memory.csv"
    if not path.exists():
        raise SystemExit(f"{run_dir}: no memory.csv")
    df = pd.read_csv(path)
    return df[df["tier"] == tier].reset_index(drop=True)


def memory_frame(run_dir, tier=None, window=None, max_points=MAX_POINTS):
    """The frame plot_memory draws for one run: one row per step of the curve.

    Columns: time_s, one `<category>_bytes` column per category that ever holds bytes (in
    stacking order), allocated_bytes, reserved_bytes. Every row of memory.csv is a step
    (several at one instant too), so the stacked total reaches the run's peak exactly; long
    runs are thinned to the highest and lowest step of each time bucket, always keeping the
    peak. A last row at the end of the iteration holds the final state.
    """
    summary = ms.read_summary(run_dir)
    tier = ms.compute_tier(summary, tier)
    df = read_memory(run_dir, tier)
    # An OOM has no step time (null): its curve ends where it stopped.
    end_s = float(summary.get("iteration_time_s") or summary.get("stopped_at_s") or 0.0)
    cats = [f"{c}_bytes" for c in ms.CATEGORIES if f"{c}_bytes" in df and df[f"{c}_bytes"].any()]
    df = df[["time_s"] + cats + ["allocated_bytes", "reserved_bytes"]].copy()
    if len(df) and end_s > df["time_s"].iloc[-1]:
        last = df.iloc[[-1]].copy()
        last["time_s"] = end_s
        df = pd.concat([df, last], ignore_index=True)
    if window is not None:
        lo, hi = window
        # The state at the window's start is the last step before it.
        before = df[df["time_s"] <= lo].tail(1) if lo is not None else df.iloc[0:0]
        keep = np.ones(len(df), dtype=bool)
        if lo is not None:
            keep &= df["time_s"].to_numpy() > lo
        if hi is not None:
            keep &= df["time_s"].to_numpy() <= hi
        df = pd.concat([before.assign(time_s=lo if lo is not None else 0.0), df[keep]],
                       ignore_index=True)
    if len(df) > max_points:
        df = thin(df, max_points)
    df.attrs["tier"] = tier
    df.attrs["categories"] = cats
    return df


def thin(df, max_points):
    """Keeps, per time bucket, the rows with the highest and the lowest allocation."""
    t = df["time_s"].to_numpy()
    total = df["allocated_bytes"].to_numpy()
    buckets = max_points // 2
    span = (t[-1] - t[0]) or 1.0
    b = np.minimum(((t - t[0]) / span * buckets).astype(np.int64), buckets - 1)
    order = np.lexsort((-total, b))          # by bucket, highest first
    first = np.r_[True, b[order][1:] != b[order][:-1]]
    hi = order[first]
    order = np.lexsort((total, b))           # by bucket, lowest first
    first = np.r_[True, b[order][1:] != b[order][:-1]]
    lo = order[first]
    keep = np.unique(np.concatenate([hi, lo, [0, len(df) - 1, int(np.argmax(total))]]))
    return df.iloc[keep].reset_index(drop=True)


def draw_stack(ax, df, summary, tier, t_factor, b_div, show_capacity=True, legend=True):
    t = df["time_s"].to_numpy() * t_factor
    base = np.zeros(len(df))
    for col in df.attrs["categories"]:
        cat = col[:-len("_bytes")]
        top = base + df[col].to_numpy() / b_div
        ax.fill_between(t, base, top, step="post", color=ms.CATEGORY_COLOURS[cat], lw=0,
                        label=ms.CATEGORY_LABELS[cat])
        base = top
    alloc = df["allocated_bytes"].to_numpy()
    reserved = df["reserved_bytes"].to_numpy()
    if (reserved != alloc).any():
        ax.step(t, reserved / b_div, where="post", color=ms.RESERVED_COLOUR, lw=1, ls="--",
                label="reserved")
    tinfo = summary["tiers"][tier]
    if show_capacity:
        cap = tinfo["capacity_bytes"] / b_div
        ax.axhline(cap, color=ms.CAPACITY_COLOUR, ls="--", lw=1.2,
                   label=f"capacity {ms.format_bytes(tinfo['capacity_bytes'])}")
    mark_peak(ax, df, t_factor, b_div)
    if legend:
        ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0, frameon=False)


def peak_of(df):
    """(bytes, time_s) of the first step that reaches the curve's highest allocation."""
    i = int(np.argmax(df["allocated_bytes"].to_numpy()))
    return int(df["allocated_bytes"].iloc[i]), float(df["time_s"].iloc[i])


def mark_peak(ax, df, t_factor, b_div, colour="black", text=True):
    if not len(df):
        return
    peak, t = peak_of(df)
    x, y = t * t_factor, peak / b_div
    ax.plot([x], [y], marker="v", color=colour, ms=7, zorder=5, ls="none")
    if text:
        ax.annotate(f"peak {ms.format_bytes(peak)} at {ms.format_seconds(t)}", (x, y),
                    xytext=(4, 6), textcoords="offset points", fontsize=8, color=colour)


def plot(run_dirs, output=None, tier=None, size=None, dpi=100, window=None, fit_y=False,
         labels=None, capacity=False):
    summaries = [ms.read_summary(d) for d in run_dirs]
    frames = [memory_frame(d, tier, window) for d in run_dirs]
    tiers = [f.attrs["tier"] for f in frames]
    longest = max([f["time_s"].max() for f in frames if len(f)] + [1e-9])
    t_name, t_factor = ms.time_unit(longest)
    highest = max([f[["allocated_bytes", "reserved_bytes"]].to_numpy().max() for f in frames if len(f)] + [1])
    caps = [s["tiers"][t]["capacity_bytes"] for s, t in zip(summaries, tiers)]
    # A capacity far above the curve would flatten it (150 MiB on an 80 GiB axis): drawn only
    # when the curve comes near it, or when asked.
    near = [not fit_y and (capacity or highest >= NEAR * c) for c in caps]
    scale = max([highest] + [c for c, show in zip(caps, near) if show])
    b_name, b_div = ms.bytes_unit(scale)
    if labels is None:
        labels = ms.distinct_labels(run_dirs, summaries)

    n = len(run_dirs)
    if size is None:
        size = (10, 4.5) if n == 1 else (10, 3.2 + 2.4 * n)
    fig = plt.figure(figsize=size, dpi=dpi)
    if n == 1:
        ax = fig.add_subplot(1, 1, 1)
        draw_stack(ax, frames[0], summaries[0], tiers[0], t_factor, b_div, show_capacity=near[0])
        s = summaries[0]
        status = "" if s.get("status") == "ok" else f" — {s.get('status', '').upper()}"
        off = "" if near[0] or fit_y else f"\n(capacity {ms.format_bytes(caps[0])} is off the scale: the peak is {far_share(highest, caps[0])} of it)"
        ax.set_title(f"{tiers[0]}: {s.get('description') or s.get('workload')} on "
                     f"{s.get('platform')}, policy {s.get('policy')}{status}{off}")
        axes = [ax]
    else:
        grid = fig.add_gridspec(n + 1, 1, height_ratios=[1.4] + [1] * n)
        top = fig.add_subplot(grid[0])
        axes = [top]
        for f, s, lab in zip(frames, summaries, labels):
            colour = ms.policy_colour(s.get("policy", ""))
            style = "-"
            used = [ln.get_color() for ln in top.get_lines()]
            if colour in used:
                style = ["--", ":", "-."][used.count(colour) % 3]
            x = f["time_s"].to_numpy() * t_factor
            peak, when = peak_of(f) if len(f) else (0, 0.0)
            top.step(x, f["allocated_bytes"] / b_div, where="post", color=colour, ls=style,
                     lw=1.4, label=f"{lab}: peak {ms.format_bytes(peak)} at {ms.format_seconds(when)}")
            mark_peak(top, f, t_factor, b_div, colour=colour, text=False)
        if not fit_y:
            # Each capacity in its own line style, naming the runs it holds for; a budget in
            # its run's colour, so two limits never read as one.
            for k, cap in enumerate(sorted({c for c, show in zip(caps, near) if show})):
                whose = [lab for lab, c in zip(labels, caps) if c == cap]
                top.axhline(cap / b_div, color=ms.CAPACITY_COLOUR, ls=["--", ":", "-."][k % 3], lw=1.2,
                            label=f"capacity {ms.format_bytes(cap)}" + ("" if len(whose) == n else f" ({', '.join(whose)})"))
            for s, t, lab in zip(summaries, tiers, labels):
                budget = s["tiers"][t].get("budget_bytes")
                if budget and (capacity or highest >= NEAR * budget):
                    top.axhline(budget / b_div, color=ms.policy_colour(s.get("policy", "")), ls=(0, (1, 2)), lw=1.2,
                                label=f"budget {ms.format_bytes(budget)} ({lab})")
        off = sorted({c for c, show in zip(caps, near) if not show})
        off = "" if fit_y or not off else f" (capacity {', '.join(ms.format_bytes(c) for c in off)} off the scale)"
        top.set_title(f"allocated in {', '.join(sorted(set(tiers)))}: runs compared{off}")
        top.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0, frameon=False)
        for k, (f, s, t, lab) in enumerate(zip(frames, summaries, tiers, labels)):
            ax = fig.add_subplot(grid[k + 1], sharex=top, sharey=top)
            draw_stack(ax, f, s, t, t_factor, b_div, show_capacity=near[k], legend=(k == 0))
            ax.set_title(lab, fontsize=9, loc="left")
            axes.append(ax)
    for ax in axes:
        ax.set_ylabel(f"memory ({b_name})")
        ax.set_ylim(0, scale / b_div * 1.08)
        if window is not None:
            lo, hi = window
            ax.set_xlim(left=None if lo is None else lo * t_factor, right=None if hi is None else hi * t_factor)
        else:
            ax.set_xlim(0, longest * t_factor)
    axes[-1].set_xlabel(f"time ({t_name})")
    fig.tight_layout()
    if output is None:
        output = Path(run_dirs[0]) / "memory.png" if n == 1 else Path("memory.png")
    return ms.save(fig, output, dpi), frames


def far_share(peak, capacity):
    share = 100 * peak / capacity if capacity else 0
    return f"{share:.2g}%"


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("run_dirs", nargs="+", metavar="RUN_DIR", help="--out folders of `memsim run`")
    p.add_argument("--tier", help="tier to plot (default: the first compute tier, e.g. gpu0.hbm)")
    p.add_argument("--window", help="time range in ms, START:END (either may be empty)")
    p.add_argument("--fit-y", action="store_true", help="scale to the data, leaving the capacity line out")
    p.add_argument("--capacity", action="store_true",
                   help="draw the capacity (and budget) even when the curve stays below half of it")
    p.add_argument("--labels", help="comma-separated legend labels, one per run")
    ms.add_output_args(p, default_size="auto")
    a = p.parse_args(argv)
    size = None if a.size == "auto" else ms.parse_size(a.size)
    labels = a.labels.split(",") if a.labels else None
    if labels is not None and len(labels) != len(a.run_dirs):
        p.error(f"--labels: {len(labels)} labels for {len(a.run_dirs)} runs")
    out, _ = plot(a.run_dirs, a.output, a.tier, size, a.dpi, ms.parse_window(a.window), a.fit_y, labels,
                  a.capacity)
    print(out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
