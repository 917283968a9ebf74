#!/usr/bin/python3
"""Plots of a sweep (memsim sweep's results.csv): Pareto fronts of peak memory against
iteration time per policy, and which points fit.

    plot_sweep.py out/mysweep/results.csv            # pareto.png and fits.png beside it
    plot_sweep.py results.csv --rows workload --cols device --param workload.batch
    plot_sweep.py results.csv --only fits -o fits.svg

pareto.png: one panel per workload (rows) and device (columns); each policy's points that
ran (status ok) in its colour, its Pareto front (no other point of the policy is both
faster and smaller) as a line; points are labelled with the swept values that vary inside
the panel (a label that would cover another is moved, or left out). Times in ms. fits.png:
one panel per workload and device, a cell per policy and value of --param (default
workload.batch): green where the point fits (status ok), red where it runs out of memory,
grey where it failed or was not run; a cell holding several points (other swept values)
says how many fit.

The peak is `peak_allocated_bytes`, or else the first non-empty `<tier>.peak_allocated_bytes`
column of the row (the first compute tier). Swept parameters are the columns between
`policy` and `status`. Reads only results.csv.
"""
import argparse
import math
import sys
import textwrap
from pathlib import Path

import numpy as np
import pandas as pd

import memsim_style as ms
from memsim_style import plt
import matplotlib.colors  # noqa: E402  (after memsim_style chose the backend)
import matplotlib.patches  # noqa: E402
import matplotlib.text  # noqa: E402


def read_results(path):
    path = Path(path)
    if path.is_dir():
        path = path / "results.csv"
    if not path.exists():
        raise SystemExit(f"{path}: no such file (the results.csv of `memsim sweep`)")
    df = pd.read_csv(path, keep_default_na=False, na_values=[""], dtype=str)
    for col in ("device", "workload", "policy", "status"):
        if col not in df:
            raise SystemExit(f"{path}: no column {col!r}; is it a results.csv of `memsim sweep`?")
    df = df.fillna("")
    df.attrs["axes"] = sweep_axes(list(df.columns))
    df["peak_bytes"] = peak_column(df)
    df["iteration_time_s"] = pd.to_numeric(df.get("iteration_time_s", ""), errors="coerce")
    df.attrs["source"] = str(path)
    return df


def sweep_axes(columns):
    if "policy" in columns and "status" in columns and columns.index("policy") < columns.index("status"):
        return columns[columns.index("policy") + 1:columns.index("status")]
    return [c for c in columns if "." in c and not c.endswith("_bytes") and not c.endswith("_s")]


def peak_column(df):
    if "peak_allocated_bytes" in df:
        return pd.to_numeric(df["peak_allocated_bytes"], errors="coerce")
    cols = [c for c in df.columns if c.endswith(".peak_allocated_bytes")]
    peak = pd.Series(np.nan, index=df.index)
    for c in cols:  # the first compute tier a row has
        peak = peak.fillna(pd.to_numeric(df[c], errors="coerce"))
    return peak


MARKERS = ["o", "s", "^", "D", "v", "P", "X", "*", "h", "<", ">"]


def value_key(v):
    """Sorts swept values as numbers when they are (32 < 128), else as text."""
    try:
        return (0, float(v), "")
    except (TypeError, ValueError):
        return (1, 0.0, str(v))


def ordered(values):
    return sorted(set(values), key=value_key)


def pareto_frame(df, rows="workload", cols="device"):
    """The points pareto.png draws (status ok, with a peak and a time), with `on_front`: no
    point of the same panel, policy and workload settings (workload.* axes: a front compares
    policy settings and platforms on one problem) is at least as good in both and better in
    one."""
    ok = df[(df["status"] == "ok") & df["peak_bytes"].notna() & df["iteration_time_s"].notna()].copy()
    ok["on_front"] = False
    same_problem = [a for a in df.attrs.get("axes", []) if a.startswith("workload.") and a not in (rows, cols)]
    for _, grp in ok.groupby([rows, cols, "policy"] + same_problem, sort=False):
        t = grp["iteration_time_s"].to_numpy()
        m = grp["peak_bytes"].to_numpy()
        for idx, ti, mi in zip(grp.index, t, m):
            dominated = ((t <= ti) & (m <= mi) & ((t < ti) | (m < mi))).any()
            ok.loc[idx, "on_front"] = not dominated
    return ok


def fits_frame(df, param):
    """Per workload, device and value of `param`: points that fit (status ok) and points run
    (ok or oom; failed points are left out)."""
    ran = df[df["status"].isin(["ok", "oom"])].copy()
    ran["fits"] = (ran["status"] == "ok").astype(int)
    g = ran.groupby(["workload", "device", param], sort=False)["fits"].agg(["sum", "count"]).reset_index()
    return g.rename(columns={"sum": "fit", "count": "points"})


def default_param(df):
    axes = df.attrs.get("axes", [])
    for candidate in ("workload.batch", "workload.seq_len"):
        if candidate in axes:
            return candidate
    varying = [a for a in axes if df[a].nunique() > 1]
    return varying[0] if varying else None


def pareto_figure(df, rows="workload", cols="device", size=None, dpi=100):
    pts = pareto_frame(df, rows, cols)
    row_vals = ordered(df[rows])
    col_vals = ordered(df[cols])
    policies = list(dict.fromkeys(df["policy"]))
    if size is None:
        size = (1.2 + 4.2 * len(col_vals) + 2.2, 0.8 + 3.3 * len(row_vals))
    fig, axes = plt.subplots(len(row_vals), len(col_vals), figsize=size, dpi=dpi, squeeze=False)
    top_m = pts["peak_bytes"].max() if len(pts) else 1.0
    t_name, t_factor = "ms", 1e3  # docs/plots.md: times in ms
    b_name, b_div = ms.bytes_unit(top_m if top_m == top_m else 1.0)
    axes_vary = [a for a in df.attrs.get("axes", []) if a not in (rows, cols)]
    handles = {}
    fronts_drawn = across_drawn = False
    same_problem = [a for a in axes_vary if a.startswith("workload.")]
    for i, rv in enumerate(row_vals):
        for j, cv in enumerate(col_vals):
            ax = axes[i][j]
            panel = pts[(pts[rows] == rv) & (pts[cols] == cv)]
            everything = df[(df[rows] == rv) & (df[cols] == cv)]
            label_axes = [a for a in axes_vary if panel[a].nunique() > 1]
            panel_fronts = False
            for k, pol in enumerate(policies):
                p = panel[panel["policy"] == pol]
                colour = ms.policy_colour(pol)
                if len(p):
                    # Policies that land on one point stay visible: hollow markers, later ones smaller.
                    h = ax.scatter(p["iteration_time_s"] * t_factor, p["peak_bytes"] / b_div,
                                   s=max(14, 80 - 14 * k), marker=MARKERS[k % len(MARKERS)],
                                   facecolor="none", edgecolor=colour, linewidth=1.4, zorder=3 + k)
                    handles.setdefault(pol, h)
                    problems = [grp for _, grp in p.groupby(
                        same_problem[0] if len(same_problem) == 1 else same_problem, sort=False)] if same_problem else [p]
                    for problem in problems:
                        front = problem[problem["on_front"]].sort_values("iteration_time_s")
                        if len(front) > 1:
                            fronts_drawn = panel_fronts = True
                            ax.step(front["iteration_time_s"] * t_factor, front["peak_bytes"] / b_div,
                                    where="post", color=colour, lw=1.2, alpha=0.9, zorder=2)
                    if label_axes and len(panel) <= 40:
                        for _, r in p.iterrows():
                            text = ",".join(str(r[a]) for a in label_axes)
                            ax.annotate(text, (r["iteration_time_s"] * t_factor, r["peak_bytes"] / b_div),
                                        xytext=(3, 3), textcoords="offset points", fontsize=6, color="#555555")
            if same_problem and not panel_fronts:
                # Only workload settings vary (a batch sweep): each policy has one point per
                # problem, so no policy has a front; draw the front across policies instead.
                for _, problem in panel.groupby(same_problem[0] if len(same_problem) == 1 else same_problem, sort=False):
                    t = problem["iteration_time_s"].to_numpy()
                    m = problem["peak_bytes"].to_numpy()
                    keep = [not ((t <= ti) & (m <= mi) & ((t < ti) | (m < mi))).any() for ti, mi in zip(t, m)]
                    front = problem[keep].sort_values("iteration_time_s")
                    if len(front) > 1:
                        across_drawn = True
                        ax.step(front["iteration_time_s"] * t_factor, front["peak_bytes"] / b_div, where="post",
                                color="#777777", ls="--", lw=1.0, zorder=1)
            oom = (everything["status"] == "oom").sum()
            failed = (~everything["status"].isin(["ok", "oom"])).sum()
            note = []
            if oom:
                note.append(f"{oom} oom")
            if failed:
                note.append(f"{failed} failed")
            title = f"{rv} on {cv}" if rows == "workload" and cols == "device" else f"{rows}={rv}, {cols}={cv}"
            ax.set_title(title + (f" ({', '.join(note)})" if note else ""), fontsize=9)
            ax.set_xlim(left=0)
            ax.set_ylim(bottom=0)
            if i == len(row_vals) - 1:
                ax.set_xlabel(f"iteration time ({t_name})")
            if j == 0:
                ax.set_ylabel(f"peak memory ({b_name})")
            if not len(panel):
                ax.text(0.5, 0.5, "no point fits", transform=ax.transAxes, ha="center", va="center",
                        color="#999999")
    label = f"; labels: {', '.join(axes_vary)}" if axes_vary else ""
    fronts = " (lines: each policy's Pareto front)" if fronts_drawn else ""
    if across_drawn:
        fronts += f" (grey: the front across policies at each {', '.join(same_problem)})"
    # The legend stands right of the panels, the title above them, wrapped to the figure.
    legend_in = 0.45 + 0.075 * max([len(str(p)) for p in handles] + [6])
    fig.legend(list(handles.values()), list(handles.keys()), loc="center left", frameon=False,
               title="policy", bbox_to_anchor=(1 - legend_in / size[0], 0.5))
    title, title_in = wrapped_title(f"peak memory against iteration time{fronts}{label}", size[0], 10)
    fig.suptitle(title, fontsize=10)
    fig.tight_layout(rect=(0, 0, 1 - legend_in / size[0], 1 - title_in / size[1]))
    fig.canvas.draw()
    for ax in axes.ravel():
        place_labels(fig, ax)
    return fig, pts


def wrapped_title(text, width_in, fontsize):
    """The title broken into lines that fit the figure's width, and their height in inches."""
    chars = max(20, int(width_in * 72 / (0.55 * fontsize)) - 4)
    lines = textwrap.wrap(text, chars) or [""]
    return "\n".join(lines), 0.15 + len(lines) * fontsize * 1.35 / 72


def place_labels(fig, ax):
    """Moves each point label that would cover an earlier one to another side of its point,
    and leaves it out where every side is taken (the points stay)."""
    renderer = fig.canvas.get_renderer()
    taken = []
    for text in [c for c in ax.texts if isinstance(c, matplotlib.text.Annotation)]:
        for dx, dy, ha, va in ((3, 3, "left", "bottom"), (-3, 3, "right", "bottom"),
                               (3, -3, "left", "top"), (-3, -3, "right", "top")):
            text.set_position((dx, dy))
            text.set_ha(ha)
            text.set_va(va)
            box = text.get_window_extent(renderer)
            if not any(box.overlaps(t) for t in taken):
                taken.append(box)
                break
        else:
            text.remove()


def plot_pareto(df, output, rows="workload", cols="device", size=None, dpi=100):
    fig, pts = pareto_figure(df, rows, cols, size, dpi)
    return ms.save(fig, output, dpi), pts


def fits_by_policy(df, param):
    """Per workload, device, policy and value of `param`: points that fit (status ok) and
    points run (ok or oom), with `state`: fits (all fit), oom (none), some (part of them),
    failed (none ran)."""
    data = df[df[param] != ""].copy()
    data["ran"] = data["status"].isin(["ok", "oom"]).astype(int)
    data["fits"] = (data["status"] == "ok").astype(int)
    g = data.groupby(["workload", "device", "policy", param], sort=False)[["fits", "ran"]].sum().reset_index()
    g = g.rename(columns={"fits": "fit", "ran": "points"})
    g["state"] = ["failed" if n == 0 else "fits" if f == n else "oom" if f == 0 else "some"
                  for f, n in zip(g["fit"], g["points"])]
    return g


FIT_COLOURS = {"fits": "#59a14f", "some": "#edc948", "oom": "#e15759", "failed": "#d9d9d9"}


def fits_figure(df, param=None, size=None, dpi=100):
    param = param or default_param(df)
    if param is None:
        raise SystemExit("the sweep varies no parameter to plot the fits against (give --param)")
    if param not in df:
        raise SystemExit(f"--param: no column {param!r}; axes: {', '.join(df.attrs.get('axes', []))}")
    data = df[df[param] != ""]
    frame = fits_by_policy(data, param)
    workloads = ordered(data["workload"])
    devices = list(dict.fromkeys(data["device"]))
    policies = list(dict.fromkeys(data["policy"]))
    values = ordered(data[param])
    longest = max(len(str(p)) for p in policies) if policies else 4
    if size is None:
        size = (0.6 + 0.08 * longest + len(devices) * (0.6 + 0.55 * len(values)) + 1.6,
                1.0 + len(workloads) * (0.9 + 0.3 * len(policies)))
    fig, axes = plt.subplots(len(workloads), len(devices), figsize=size, dpi=dpi, squeeze=False,
                             layout="constrained")
    states = list(FIT_COLOURS)
    cmap = matplotlib.colors.ListedColormap([FIT_COLOURS[k] for k in states])
    for i, w in enumerate(workloads):
        for j, d in enumerate(devices):
            ax = axes[i][j]
            cell = np.full((len(policies), len(values)), states.index("failed"))
            f = frame[(frame["workload"] == w) & (frame["device"] == d)]
            for _, r in f.iterrows():
                y, x = policies.index(r["policy"]), values.index(r[param])
                cell[y, x] = states.index(r["state"])
                if r["points"] > 1:
                    ax.text(x, y, f"{r['fit']}/{r['points']}", ha="center", va="center", fontsize=7)
            ax.imshow(cell, cmap=cmap, vmin=-0.5, vmax=len(states) - 0.5, aspect="auto",
                      interpolation="nearest")
            ax.set_xticks(range(len(values)))
            ax.set_xticklabels(values, rotation=45 if len(values) > 6 else 0)
            ax.set_yticks(range(len(policies)))
            ax.set_yticklabels(policies if j == 0 else [])
            if i == len(workloads) - 1:
                ax.set_xlabel(param)
            ax.set_title(f"{w} on {d}", fontsize=9)
            ax.grid(False)
            ax.set_xticks(np.arange(-0.5, len(values)), minor=True)
            ax.set_yticks(np.arange(-0.5, len(policies)), minor=True)
            ax.grid(which="minor", color="white", lw=1.5)
            ax.tick_params(which="minor", length=0)
    shown = [k for k in states if (frame["state"] == k).any()] or ["fits"]
    patches = [matplotlib.patches.Patch(color=FIT_COLOURS[k], label=FIT_LABELS[k]) for k in shown]
    # On the first row's last panel, right of it: the layout makes room for it.
    axes[0][-1].legend(handles=patches, loc="upper left", bbox_to_anchor=(1.02, 1.0), frameon=False,
                       fontsize=8)
    fig.suptitle(f"which policies fit: {param} against policy, per workload and device", fontsize=10)
    return fig, frame


FIT_LABELS = {"fits": "fits", "some": "some points fit", "oom": "out of memory", "failed": "failed / not run"}


def plot_fits(df, output, param=None, size=None, dpi=100):
    fig, frame = fits_figure(df, param, size, dpi)
    return ms.save(fig, output, dpi), frame


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("results", metavar="RESULTS", help="results.csv of `memsim sweep` (or its folder)")
    p.add_argument("--rows", default="workload", help="column that splits the Pareto panels into rows (default workload)")
    p.add_argument("--cols", default="device", help="column that splits them into columns (default device)")
    p.add_argument("--param", help="swept column of the fits heatmap (default workload.batch)")
    p.add_argument("--only", choices=["pareto", "fits"], help="draw one of the two")
    p.add_argument("-o", "--output", help="with --only: the image; else a folder for pareto.png and fits.png "
                   "(default: beside results.csv)")
    p.add_argument("--format", choices=["png", "svg"], default="png", help="image format (default png)")
    p.add_argument("--size", default="auto", help="figure size in inches, WIDTHxHEIGHT (default: from the panels)")
    p.add_argument("--dpi", type=int, default=100, help="pixels per inch of a PNG (default 100)")
    a = p.parse_args(argv)
    df = read_results(a.results)
    for col in (a.rows, a.cols):
        if col not in df:
            p.error(f"no column {col!r} in {df.attrs['source']}")
    size = None if a.size == "auto" else ms.parse_size(a.size)
    folder = Path(a.output) if a.output and not a.only else Path(df.attrs["source"]).parent
    written = []
    if a.only in (None, "pareto"):
        out = Path(a.output) if a.only else folder / f"pareto.{a.format}"
        written.append(plot_pareto(df, out, a.rows, a.cols, size, a.dpi)[0])
    if a.only in (None, "fits"):
        if a.only is None and default_param(df) is None and a.param is None:
            print("no swept parameter: fits heatmap left out", file=sys.stderr)
        else:
            out = Path(a.output) if a.only else folder / f"fits.{a.format}"
            written.append(plot_fits(df, out, a.param, size, a.dpi)[0])
    for w in written:
        print(w)
    return 0


if __name__ == "__main__":
    sys.exit(main())
