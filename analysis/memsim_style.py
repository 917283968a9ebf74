"""Shared look and helpers of the memsim analysis scripts.

One place for the colours (a policy, a memory category or an event kind has the same
colour in every plot), the units (bytes in binary units, times in s/ms/us), reading a run
folder, and saving figures so that the same input gives the same file.
"""
import json
import os
import zlib
from pathlib import Path

# Deterministic output: no dates in SVG/PDF metadata, fixed SVG ids. Set before pyplot.
os.environ.setdefault("SOURCE_DATE_EPOCH", "0")
import matplotlib  # noqa: E402

matplotlib.use("Agg")
matplotlib.rcParams.update({
    "svg.hashsalt": "memsim",
    "figure.dpi": 100,
    "savefig.dpi": 100,
    "font.size": 9,
    "axes.titlesize": 10,
    "axes.labelsize": 9,
    "legend.fontsize": 8,
    "axes.grid": True,
    "axes.axisbelow": True,
    "grid.alpha": 0.3,
    "axes.spines.top": False,
    "axes.spines.right": False,
})
import matplotlib.pyplot as plt  # noqa: E402,F401  (re-exported for the scripts)

# --- colours ---------------------------------------------------------------------------

# Known policies get fixed colours, at least 25 apart in CIELAB (ΔE76) from one another so
# that no two built-in policies read as one (Tableau 20 with a few darker tones); aliases
# share their policy's colour; others a stable colour from their name.
POLICY_COLOURS = {
    "none": "#1f77b4",
    "keep-all": "#7f7f7f",
    "inplace": "#98df8a",
    "checkpoint-sqrt": "#bcbd22",
    "chen-sqrt": "#bcbd22",
    "sqrt": "#bcbd22",
    "checkpoint-selective": "#8c564b",
    "revolve": "#17becf",
    "bptt-optimal": "#393b79",
    "checkmate": "#9467bd",
    "vdnn": "#ff7f0e",
    "swap-lru": "#2ca02c",
    "lru": "#2ca02c",
    "swap-budget": "#00441b",
    "capuchin": "#d62728",
    "swapadvisor": "#f7b6d2",
    "zero-offload": "#e377c2",
    "zero-infinity": "#7b0051",
    "dtr": "#ffbb78",
    "compress": "#aec7e8",
    "hybrid": "#000000",
}
_EXTRA = ["#86bcb6", "#f1ce63", "#a0cbe8", "#ffbe7d", "#8cd17d", "#b6992d", "#d4a6c8",
          "#fabfd2", "#79706e", "#d7b5a6", "#499894", "#e15759"]


def policy_base(policy):
    """'vdnn(all)' and 'dtr budget=0.5' -> 'vdnn', 'dtr': the name without parameters."""
    name = str(policy).strip()
    for sep in ("(", " ", "[", ":"):
        name = name.split(sep)[0]
    return name.lower()


def policy_colour(policy):
    base = policy_base(policy)
    if base in POLICY_COLOURS:
        return POLICY_COLOURS[base]
    return _EXTRA[zlib.crc32(base.encode()) % len(_EXTRA)]


# Memory categories, bottom of a stack to top: what persists first, then what comes and goes.
CATEGORIES = ["weight", "optimizer_state", "gradient", "input", "activation",
              "activation_grad", "workspace", "other"]
CATEGORY_LABELS = {
    "weight": "weights", "optimizer_state": "optimizer state", "gradient": "gradients",
    "input": "inputs", "activation": "activations", "activation_grad": "activation grads",
    "workspace": "workspace", "other": "other",
}
CATEGORY_COLOURS = {
    "weight": "#4e79a7", "optimizer_state": "#a0cbe8", "gradient": "#59a14f",
    "input": "#b6992d", "activation": "#f28e2b", "activation_grad": "#ffbe7d",
    "workspace": "#e15759", "other": "#bab0ac",
}

# Timeline event kinds; compute is shaded by phase.
KIND_COLOURS = {
    "forward": "#4e79a7", "backward": "#a0cbe8", "optimizer": "#2f4b7c",
    "compute": "#4e79a7", "recompute": "#f28e2b", "swap_out": "#59a14f",
    "swap_in": "#b07aa1", "stall": "#e15759", "drop": "#79706e", "compress": "#76b7b2",
}
KIND_LABELS = {
    "forward": "compute (forward)", "backward": "compute (backward)",
    "optimizer": "compute (optimizer)", "compute": "compute", "recompute": "recompute",
    "swap_out": "swap out", "swap_in": "swap in", "stall": "stall", "drop": "drop",
    "compress": "compress",
}

CAPACITY_COLOUR = "#c0392b"
RESERVED_COLOUR = "#333333"

# --- units -----------------------------------------------------------------------------

_BYTE_UNITS = [("B", 1), ("KiB", 1 << 10), ("MiB", 1 << 20), ("GiB", 1 << 30), ("TiB", 1 << 40)]


def bytes_unit(largest):
    """The binary unit that shows `largest` bytes as a number of at least 1: (name, divisor)."""
    name, div = _BYTE_UNITS[0]
    for n, d in _BYTE_UNITS:
        if largest >= d:
            name, div = n, d
    return name, div


def format_bytes(n):
    """'5.37 GiB', '512 B' (three significant digits)."""
    n = float(n)
    name, div = bytes_unit(abs(n))
    v = n / div
    if name == "B":
        return f"{int(n)} B"
    return f"{v:.3g} {name}" if v < 1000 else f"{v:.0f} {name}"


def time_unit(largest_s):
    """(name, factor) so that seconds x factor reads well: ms for most runs."""
    if largest_s >= 10:
        return "s", 1.0
    if largest_s >= 10e-3:
        return "ms", 1e3
    if largest_s >= 10e-6:
        return "us", 1e6
    return "ns", 1e9


def format_seconds(s):
    """'158 ms', '1.2 s', '35 us'."""
    s = float(s)
    if s == 0:
        return "0 s"
    for name, f in (("s", 1.0), ("ms", 1e3), ("us", 1e6), ("ns", 1e9)):
        if abs(s) * f >= 1:
            return f"{s * f:.3g} {name}"
    return f"{s * 1e9:.3g} ns"


# --- inputs ------------------------------------------------------------------------------

def read_summary(run_dir):
    path = Path(run_dir) / "summary.json"
    if not path.exists():
        raise SystemExit(f"{run_dir}: no summary.json (is it the --out folder of `memsim run`?)")
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def compute_tier(summary, tier=None):
    """The tier to show: the one named, else the first compute tier of the run."""
    tiers = summary.get("tiers", {})
    if tier is not None:
        if tier not in tiers:
            raise SystemExit(f"no tier {tier!r} in this run; it has: {', '.join(tiers)}")
        return tier
    for name, t in tiers.items():
        if t.get("role") == "compute":
            return name
    if tiers:
        return next(iter(tiers))
    raise SystemExit("summary.json lists no tiers")


def distinct_labels(run_dirs, summaries):
    """Short legend labels: only the fields that differ between runs (else the folder)."""
    fields = ["policy", "workload", "platform"]
    differing = [f for f in fields if len({s.get(f) for s in summaries}) > 1]
    labels = []
    for d, s in zip(run_dirs, summaries):
        parts = [str(s.get(f)) for f in differing]
        labels.append(", ".join(parts) if parts else Path(d).name or str(d))
    if len(set(labels)) < len(labels):  # still ambiguous: add the folder
        labels = [f"{lab} ({Path(d).name})" for lab, d in zip(labels, run_dirs)]
    return labels


def parse_window(text):
    """'10:20' (ms) -> (0.010, 0.020) seconds; either end may be empty."""
    if text is None:
        return None
    try:
        lo, hi = text.split(":")
        return (float(lo) * 1e-3 if lo else None, float(hi) * 1e-3 if hi else None)
    except ValueError:
        raise SystemExit(f"--window: expected START:END in ms like 10:20, got {text!r}")


# --- output ------------------------------------------------------------------------------

def parse_size(text):
    """'10x5' -> (10.0, 5.0) inches."""
    try:
        w, h = text.lower().split("x")
        return float(w), float(h)
    except ValueError:
        raise SystemExit(f"--size: expected WIDTHxHEIGHT in inches like 10x5, got {text!r}")


def add_output_args(parser, default_size):
    parser.add_argument("-o", "--output", help="image file to write (.png or .svg)")
    parser.add_argument("--size", default=default_size,
                        help=f"figure size in inches, WIDTHxHEIGHT (default {default_size})")
    parser.add_argument("--dpi", type=int, default=100, help="pixels per inch of a PNG (default 100)")


def save(fig, path, dpi=100):
    """Writes the figure with no dates or version strings, so the same run gives the same file."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    ext = path.suffix.lower()
    if ext == ".svg":
        metadata = {"Date": None, "Creator": None}
    elif ext == ".pdf":
        metadata = {"CreationDate": None, "ModDate": None, "Creator": None, "Producer": None}
    else:
        metadata = {"Software": None}
    fig.savefig(path, dpi=dpi, metadata=metadata)
    plt.close(fig)
    return path
