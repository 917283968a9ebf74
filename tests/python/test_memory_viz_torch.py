"""to_memory_viz.py's snapshots opened by the PyTorch that Debian 12 ships (torch 1.13): its
`python3 -m torch.cuda._memory_viz stats` on the --torch-1.13 file, and the `segments`,
`memory` and `compare` views through the module's own functions (from the command line they
fetch flamegraph.pl from the network to draw the SVG; the folded stacks they hand it are
what is checked here). Segments are the allocator's: the caching allocator's rebuilt, one per
allocation where the allocator reserves what it allocates (ideal)."""
import pickle
import subprocess
import sys
from pathlib import Path

import pandas as pd

import pytest

from conftest import REPO, memsim, script
import memsim_style as ms

torch_viz = pytest.importorskip("torch.cuda._memory_viz", reason="Debian's python3-torch is not installed")


def snapshot_1_13(runs, tmp_path, run="default"):
    out = tmp_path / f"{run}-1.13.pickle"
    script("to_memory_viz.py", runs(run), "--torch-1.13", "-o", out)
    with open(out, "rb") as f:
        return out, pickle.load(f)


def folded_total(lines):
    return sum(int(line.rsplit(" ", 1)[1]) for line in lines.splitlines() if line)


@pytest.mark.parametrize("run", ["default", "swap", "caching"])
def test_torch_1_13_stats_reads_it(runs, tmp_path, run):
    path, snap = snapshot_1_13(runs, tmp_path, run)
    r = subprocess.run([sys.executable, "-m", "torch.cuda._memory_viz", "stats", str(path)],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    stats = torch_viz.stats(snap)
    assert stats["segments"] == len(snap) > 1
    assert f"'segments': {len(snap)}" in r.stdout
    # Free space is what the allocator holds and does not use: none when it reserves what it
    # allocates, the cached bytes under the caching allocator; never the tier's capacity.
    inactive = stats["inactive"].value if "inactive" in stats else 0
    summary = ms.read_summary(runs(run))
    end_reserved = pd.read_csv(Path(runs(run)) / "memory.csv")["reserved_bytes"].iloc[-1]
    end_allocated = pd.read_csv(Path(runs(run)) / "memory.csv")["allocated_bytes"].iloc[-1]
    assert inactive == end_reserved - end_allocated, summary["tiers"]
    assert (inactive > 0) == (run == "caching")
    assert f"'total_size': {stats['total_size']!r}" in r.stdout
    # What is still allocated at the end is the run's last allocated bytes.
    active = stats["active_allocated"].value if "active_allocated" in stats else 0
    assert active == sum(s["allocated_size"] for s in snap) == end_allocated


def test_torch_1_13_segments_memory_and_compare(runs, tmp_path):
    _, snap = snapshot_1_13(runs, tmp_path, "default")
    _, other = snapshot_1_13(runs, tmp_path, "caching")
    identity = lambda lines: lines  # noqa: E731  (the folded stacks, not the SVG)
    total = sum(s["total_size"] for s in snap)
    for view in (torch_viz.segments, torch_viz.memory):
        lines = view(snap, format_flamegraph=identity)
        assert folded_total(lines) == total
        # Every live allocation shows with its buffer's frame.
        assert "active_allocated;memsim:0:" in lines
    lines = torch_viz.compare(snap, other, format_flamegraph=identity)
    keys = lambda segs: {(s["address"], s["total_size"]) for s in segs}  # noqa: E731
    only = (keys(snap) - keys(other)) | (keys(other) - keys(snap))
    assert folded_total(lines) == sum(n for _, n in only) > 0


def test_ideal_segment_per_allocation(runs, tmp_path):
    # The ideal allocator reserves what it allocates: each allocation is its own segment,
    # taken before it and given back after it, and no two live allocations overlap.
    for run in ("default", "swap"):
        out = tmp_path / f"{run}.pickle"
        script("to_memory_viz.py", runs(run), "-o", out)
        with open(out, "rb") as f:
            snap = pickle.load(f)
        trace = snap["device_traces"][0]
        live, segments = [], set()
        for k, e in enumerate(trace):
            if e["action"] == "segment_alloc":
                nxt = trace[k + 1]
                assert nxt["action"] == "alloc" and (nxt["addr"], nxt["size"]) == (e["addr"], e["size"])
                segments.add((e["addr"], e["size"]))
            elif e["action"] == "segment_free":
                prev = trace[k - 1]
                assert prev["action"] == "free_completed" and (prev["addr"], prev["size"]) == (e["addr"], e["size"])
                segments.remove((e["addr"], e["size"]))
            elif e["action"] == "alloc":
                assert all(e["addr"] + e["size"] <= a or a + n <= e["addr"] for a, n in live)
                live.append((e["addr"], e["size"]))
            elif e["action"] == "free_completed":
                live.remove((e["addr"], e["size"]))
        assert segments == set(live) == {(s["address"], s["total_size"]) for s in snap["segments"]}
        assert all(s["allocated_size"] == s["total_size"] for s in snap["segments"])


def reserved_replay(trace):
    total, curve = 0, []
    for e in trace:
        if e["action"] == "segment_alloc":
            total += e["size"]
        elif e["action"] == "segment_free":
            total -= e["size"]
        elif e["action"] in ("alloc", "free_completed"):
            curve.append(total)
    return curve


@pytest.mark.parametrize("capacity", [None, "235MiB"])
def test_caching_segments_follow_the_reserved_curve(tmp_path, capacity):
    # The caching allocator's segments, rebuilt, reserve what memory.csv says after every
    # row; with 235 MiB (reserved peaks at 242 MiB) the cache must give idle segments back to open new ones.
    out = tmp_path / "run"
    memsim("run", "a100-40gb", "resnet18", "--set", "gpu0.hbm.allocator=caching", "--set", "workload.batch=4",
           *(["--set", f"gpu0.hbm.capacity={capacity}"] if capacity else []), "--events", "--out", out)
    snap_path = tmp_path / "s.pickle"
    script("to_memory_viz.py", out, "-o", snap_path)
    with open(snap_path, "rb") as f:
        snap = pickle.load(f)
    trace = snap["device_traces"][0]
    mem = pd.read_csv(out / "memory.csv")
    mem = mem[mem["tier"] == "gpu0.hbm"]
    assert reserved_replay(trace) == mem["reserved_bytes"].tolist()
    if capacity:
        assert any(e["action"] == "segment_free" for e in trace)
    sizes = {s["total_size"] for s in snap["segments"]}
    assert 2 * 1024 * 1024 in sizes and 20 * 1024 * 1024 in sizes
    assert sum(s["total_size"] for s in snap["segments"]) == mem["reserved_bytes"].iloc[-1]
    assert sum(s["allocated_size"] for s in snap["segments"]) == mem["allocated_bytes"].iloc[-1]


ET_ZERO_BYTES = (REPO.parent / "shared" / "validation" / "external" / "astra-sim-tutorials@ead2d5d"
                 / "hoti2024" / "demo3" / "pytorch_traces" / "pytorch_et_0.json")


def test_zero_byte_buffers_drop_no_block(tmp_path):
    # This ET has empty tensors (zero bytes at address 0): their frees must not end the block
    # that lives at 0, so the snapshot's end state is events.csv's.
    et = ET_ZERO_BYTES
    if not et.exists():
        pytest.skip(f"{et} is absent (../shared/validation/external)")
    out = tmp_path / "et"
    memsim("run", "a100-40gb", et, "--events", "--out", out)
    ev = pd.read_csv(out / "events.csv")
    assert (ev["bytes"] == 0).any()
    ev = ev[ev["tier"] == "gpu0.hbm"]
    end = int((ev["bytes"] * ev["event"].map({"alloc": 1, "free": -1})).sum())
    snap_path = tmp_path / "s.pickle"
    script("to_memory_viz.py", out, "-o", snap_path)
    with open(snap_path, "rb") as f:
        snap = pickle.load(f)
    assert sum(s["allocated_size"] for s in snap["segments"]) == end
    blocks = [b for s in snap["segments"] for b in s["blocks"] if b["state"] == "active_allocated"]
    assert all(b["size"] > 0 for b in blocks) and sum(b["size"] for b in blocks) == end
