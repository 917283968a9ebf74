"""to_memory_viz.py's snapshots opened by the PyTorch that Debian 12 ships (torch 1.13): its
`python3 -m torch.cuda._memory_viz stats` on the --torch-1.13 file, and the `segments`,
`memory` and `compare` views through the module's own functions (from the command line they
fetch flamegraph.pl from the network to draw the SVG; the folded stacks they hand it are
what is checked here). Under the ideal allocator the segment is the tier."""
import pickle
import subprocess
import sys

import pytest

from conftest import script
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
    assert stats["segments"] == len(snap) == 1
    assert f"'segments': {len(snap)}" in r.stdout
    assert f"'total_size': {stats['total_size']!r}" in r.stdout
    # What is still allocated at the end is the run's last allocated bytes.
    active = stats["active_allocated"].value if "active_allocated" in stats else 0
    assert active == snap[0]["allocated_size"]


def test_torch_1_13_segments_memory_and_compare(runs, tmp_path):
    _, snap = snapshot_1_13(runs, tmp_path, "default")
    _, other = snapshot_1_13(runs, tmp_path, "swap")
    identity = lambda lines: lines  # noqa: E731  (the folded stacks, not the SVG)
    total = sum(s["total_size"] for s in snap)
    for view in (torch_viz.segments, torch_viz.memory):
        lines = view(snap, format_flamegraph=identity)
        assert folded_total(lines) == total
        # Every live allocation shows with its buffer's frame.
        assert "active_allocated;memsim:0:" in lines
    lines = torch_viz.compare(snap, other, format_flamegraph=identity)
    assert folded_total(lines) == total + sum(s["total_size"] for s in other)


def test_ideal_segment_is_the_tier(runs, tmp_path):
    for run in ("default", "swap"):
        summary = ms.read_summary(runs(run))
        tier = next(t for t in summary["tiers"].values() if t["role"] == "compute")
        limit = tier["budget_bytes"] or tier["capacity_bytes"]
        out = tmp_path / f"{run}.pickle"
        script("to_memory_viz.py", runs(run), "-o", out)
        with open(out, "rb") as f:
            snap = pickle.load(f)
        seg = snap["segments"][0]
        assert seg["total_size"] == limit, run
        trace = snap["device_traces"][0]
        assert trace[0]["action"] == "segment_alloc" and trace[0]["size"] == limit
        assert all(0 <= e["addr"] and e["addr"] + e["size"] <= limit for e in trace if e["action"] == "alloc")
        # First-fit reuses freed space, and no two live allocations overlap.
        live = []
        for e in trace:
            if e["action"] == "alloc" and e["size"]:
                assert all(e["addr"] + e["size"] <= a or a + n <= e["addr"] for a, n in live)
                live.append((e["addr"], e["size"]))
            elif e["action"] == "free_completed" and e["size"]:
                live.remove((e["addr"], e["size"]))
