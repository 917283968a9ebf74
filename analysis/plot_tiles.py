#!/usr/bin/python3
"""Per-tile peak memory of a tiled (IPU-like) tier: a heatmap over the tile grid and a
histogram (memsim's tiles.csv, written by runs on a device with a tiled tier).

    memsim run ipu-gc200 mlp --out out/ipu
    plot_tiles.py out/ipu                    # out/ipu/tiles.png
    plot_tiles.py out/ipu --columns 32 --scale capacity

Tile i sits at row i // COLUMNS, column i % COLUMNS. The colour scale spans the tiles' own
range (--scale data, the default, to show how evenly the tensors spread) or 0 to a tile's
capacity (--scale capacity, to show the headroom). Reads only tiles.csv and summary.json.
"""
import argparse
import math
import sys
from pathlib import Path

import numpy as np
import pandas as pd

import memsim_style as ms
from memsim_style import plt


def default_columns(n):
    """A divisor of n near 1.5 x sqrt(n) (a wide grid without holes), else ceil(sqrt(n))."""
    root = math.sqrt(n)
    divisors = [d for d in range(max(1, math.ceil(root)), int(2 * root) + 1) if n % d == 0]
    if divisors:
        return min(divisors, key=lambda d: (abs(d - 1.5 * root), d))
    return math.ceil(root)


def tile_frame(run_dir, tier=None):
    """tiles.csv rows of one tier, by tile: tile, peak_bytes; attrs tier, tile_capacity_bytes."""
    path = Path(run_dir) / "tiles.csv"
    if not path.exists():
        raise SystemExit(f"{run_dir}: no tiles.csv (the run's platform has no tiled tier; try "
                         "`memsim run ipu-gc200 mlp`)")
    df = pd.read_csv(path)
    tiers = list(dict.fromkeys(df["tier"]))
    if tier is None:
        tier = tiers[0]
    elif tier not in tiers:
        raise SystemExit(f"no tiles of tier {tier!r} in tiles.csv; it has: {', '.join(tiers)}")
    df = df[df["tier"] == tier].sort_values("tile").reset_index(drop=True)
    summary = ms.read_summary(run_dir)
    cap = summary["tiers"].get(tier, {}).get("capacity_bytes", 0)
    df.attrs["tier"] = tier
    df.attrs["tile_capacity_bytes"] = cap // len(df) if len(df) else 0
    return df


def tile_grid(df, columns):
    """The heatmap array: rows x columns, NaN where the grid has no tile."""
    n = len(df)
    rows = math.ceil(n / columns)
    grid = np.full(rows * columns, np.nan)
    grid[df["tile"].to_numpy()] = df["peak_bytes"].to_numpy()
    return grid.reshape(rows, columns)


def plot(run_dir, output=None, tier=None, columns=None, scale="data", size=(12, 5), dpi=100):
    df = tile_frame(run_dir, tier)
    summary = ms.read_summary(run_dir)
    tier = df.attrs["tier"]
    cap = df.attrs["tile_capacity_bytes"]
    columns = columns or default_columns(len(df))
    grid = tile_grid(df, columns)
    peaks = df["peak_bytes"].to_numpy()
    top = max(int(peaks.max()), cap if scale == "capacity" else 0, 1)
    b_name, b_div = ms.bytes_unit(top)

    fig, (ax_map, ax_hist) = plt.subplots(1, 2, figsize=size, dpi=dpi,
                                          gridspec_kw={"width_ratios": [1.6, 1]})
    lo, hi = (0, cap) if scale == "capacity" else (peaks.min(), peaks.max())
    # Peaks within a tenth of each other: the bar starts at 0, so a 1% spread does not fill
    # the whole colour range and read as dramatic.
    spread = (hi - lo) / hi if hi > 0 else 0.0
    narrow = scale != "capacity" and spread < 0.1
    if narrow:
        lo = 0
    if hi <= lo:
        hi = lo + 1
    cmap = plt.get_cmap("viridis").copy()
    cmap.set_bad("#eeeeee")
    im = ax_map.imshow(grid / b_div, cmap=cmap, vmin=lo / b_div, vmax=hi / b_div,
                       aspect="auto", interpolation="nearest")
    ax_map.grid(False)
    ax_map.set_xlabel(f"tile % {columns}")
    ax_map.set_ylabel(f"tile // {columns}")
    bar = fig.colorbar(im, ax=ax_map, fraction=0.05, pad=0.02)
    bar.set_label(f"peak per tile ({b_name})" + (f"; the peaks span {100 * spread:.1f}%" if narrow else ""))
    fullest = int(peaks.argmax())
    ax_map.plot([fullest % columns], [fullest // columns], marker="s", mfc="none", mec="red", ms=8)
    ax_map.set_title(f"{tier}: {len(df)} tiles, fullest tile {fullest} (red)")

    bins = min(60, max(10, len(np.unique(peaks))))
    span = (0, cap / b_div) if scale == "capacity" and cap else None
    ax_hist.hist(peaks / b_div, bins=bins, range=span, color=ms.CATEGORY_COLOURS["weight"])
    ax_hist.axvline(np.median(peaks) / b_div, color="black", ls=":", lw=1,
                    label=f"median {ms.format_bytes(np.median(peaks))}")
    ax_hist.axvline(peaks.max() / b_div, color="red", ls="-", lw=1,
                    label=f"fullest {ms.format_bytes(peaks.max())}")
    if scale == "capacity" and cap:
        ax_hist.axvline(cap / b_div, color=ms.CAPACITY_COLOUR, ls="--", lw=1.2,
                        label=f"tile capacity {ms.format_bytes(cap)}")
    ax_hist.set_xlabel(f"peak per tile ({b_name})")
    ax_hist.set_ylabel("tiles")
    ax_hist.legend(frameon=False)
    share = f" ({100 * peaks.max() / cap:.1f}% of {ms.format_bytes(cap)})" if cap else ""
    ax_hist.set_title(f"fullest tile {ms.format_bytes(peaks.max())}{share}")
    fig.suptitle(f"{summary.get('description') or summary.get('workload')} on {summary.get('platform')}, "
                 f"policy {summary.get('policy')}", fontsize=10)
    fig.tight_layout()
    if output is None:
        output = Path(run_dir) / "tiles.png"
    return ms.save(fig, output, dpi), grid


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("run_dir", metavar="RUN_DIR", help="--out folder of a `memsim run` on a tiled device")
    p.add_argument("--tier", help="tiled tier to show (default: the first in tiles.csv)")
    p.add_argument("--columns", type=int, help="tiles per row of the grid (default: a divisor near 1.5 x sqrt(tiles))")
    p.add_argument("--scale", choices=["data", "capacity"], default="data",
                   help="colour range: the tiles' own (default) or 0 to a tile's capacity")
    ms.add_output_args(p, default_size="12x5")
    a = p.parse_args(argv)
    out, _ = plot(a.run_dir, a.output, a.tier, a.columns, a.scale, ms.parse_size(a.size), a.dpi)
    print(out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
