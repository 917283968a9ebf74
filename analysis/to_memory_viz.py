#!/usr/bin/python3
"""Converts a run's events.csv into a PyTorch memory snapshot that pytorch.org/memory_viz
opens (drag the .pickle onto the page), or, with --torch-1.13, the snapshot that Debian 12's
torch 1.13 reads (`python3 -m torch.cuda._memory_viz stats|segments|memory FILE`).

    memsim run a100-40gb resnet50 --events --out out/
    to_memory_viz.py out/                    # out/memory_snapshot.pickle
    to_memory_viz.py out/ --tier gpu1.hbm -o gpu1.pickle
    to_memory_viz.py out/ --torch-1.13 -o out/snapshot-1.13.pickle

The snapshot holds what torch.cuda.memory._snapshot() returns: `device_traces` (one list per
compute tier, in platform order: an `alloc` or `free_completed` per row of events.csv, with
`segment_alloc` and `segment_free` where the allocator takes or gives back device memory,
and an `oom` when the run ran out), `segments` (the state at the end: each segment's blocks
are its live allocations and the free gaps between them). Sizes are the allocator's rounded
bytes, so the Active Memory Timeline's total is memsim's allocated curve and the segments'
total its reserved curve. Each entry carries a `category` (weight, activation, ...:
memory_viz colours by it) and a frame naming the buffer. torch 1.13's snapshot is the list of
segments alone, each block with a `history` of the allocation in it (its size and frames).

Segments are the allocator's (see Segments): the caching allocator's rebuilt from its rule,
else one per allocation. The allocator's addresses are kept where they are a layout
(best_fit, caching); where they are not — the ideal allocator's bump pointer, a tiled tier
that spreads a tensor over tiles — allocations are placed first-fit. Zero-byte rows (empty
tensors) are left out: they hold no memory, and their address would name a live block.
Reads only events.csv, memory.csv and summary.json.
"""
import argparse
import bisect
import pickle
import sys
from pathlib import Path

import pandas as pd

import memsim_style as ms


def read_events(run_dir):
    path = Path(run_dir) / "events.csv"
    if not path.exists():
        raise SystemExit(f"{run_dir}: no events.csv; run memsim with --events "
                         "(memsim run ... --events --out DIR)")
    return pd.read_csv(path, keep_default_na=False, na_values=[],
                       dtype={"buffer": str, "category": str, "tier": str, "event": str})


def has_layout(rows):
    """True if the addresses are a layout: live allocations never overlap, and addresses are
    reused (an ideal allocator's bump pointer only grows: it has no layout)."""
    starts, ends, reused, top = [], {}, False, 0
    for event, addr, size in rows:
        if event == "alloc":
            i = bisect.bisect_left(starts, addr)
            if i < len(starts) and starts[i] < addr + size:
                return False
            if i > 0 and ends[starts[i - 1]] > addr:
                return False
            reused |= addr < top
            top = max(top, addr + size)
            starts.insert(i, addr)
            ends[addr] = addr + size
        else:
            i = bisect.bisect_left(starts, addr)
            if i < len(starts) and starts[i] == addr:
                starts.pop(i)
                ends.pop(addr)
    return reused


def first_fit(rows):
    """First-fit addresses from 0 for a tier whose allocator has no layout (ideal, tiled)."""
    holes = [(0, float("inf"))]  # (start, end), sorted, disjoint
    out, where = [], {}
    for event, addr, size in rows:
        if event == "alloc":
            i = next(k for k, (a, b) in enumerate(holes) if b - a >= size)
            a, b = holes[i]
            if size == 0:
                place = a
            elif b - a == size:
                holes.pop(i)
                place = a
            else:
                holes[i] = (a + size, b)
                place = a
            where.setdefault(addr, []).append((place, size))
            out.append((event, place, size))
        else:
            place, size = where[addr].pop()
            out.append((event, place, size))
            if size == 0:
                continue
            i = bisect.bisect_left(holes, (place, place))
            start, end = place, place + size
            if i < len(holes) and holes[i][0] == end:
                end = holes.pop(i)[1]
            if i > 0 and holes[i - 1][1] == start:
                start = holes.pop(i - 1)[0]
                i -= 1
            holes.insert(i, (start, end))
    return out


def frames_for(buffer, category):
    name = buffer if buffer else f"({category})"
    return [{"filename": "memsim", "line": 0, "name": f"{name} [{category}]"}]


def read_reserved(run_dir, tier):
    """The tier's reserved bytes after each of its rows of events.csv (memory.csv's row i is
    the change behind events.csv's row i), or None without memory.csv."""
    path = Path(run_dir) / "memory.csv"
    if not path.exists():
        return None
    mem = pd.read_csv(path, usecols=["tier", "reserved_bytes"], dtype={"tier": str})
    return mem.loc[mem["tier"] == tier, "reserved_bytes"].astype("int64").tolist()


MIB = 1024 * 1024


def caching_segment_size(block):
    """The segment PyTorch's caching allocator (and memsim's `caching`) takes from the device
    for a block of these rounded bytes: 2 MiB for the small pool (<= 1 MiB), 20 MiB below
    10 MiB, else the block rounded up to 2 MiB (a block never split is its whole segment)."""
    if block <= MIB:
        return 2 * MIB
    if block < 10 * MIB:
        return 20 * MIB
    return (block + 2 * MIB - 1) // (2 * MIB) * (2 * MIB)


class Segments:
    """The device memory segments behind a tier's allocations, as the allocator made them.

    When the tier reserves more than it allocates (the caching allocator), its segments are
    rebuilt by the caching allocator's rule: an allocation past every segment opens one at its
    address, sized by caching_segment_size, and a drop of the reserved bytes there means the
    idle segments (no live block) were given back first, as PyTorch does before it retries.
    Otherwise the allocator reserves what it allocates, so each allocation is a segment of its
    own (what PyTorch does with PYTORCH_NO_CUDA_MEMORY_CACHING=1)."""

    def __init__(self, caching):
        self.caching = caching
        self.bases, self.size, self.allocated = [], {}, {}

    def find(self, addr):
        i = bisect.bisect_right(self.bases, addr) - 1
        if i >= 0 and addr < self.bases[i] + self.size[self.bases[i]]:
            return self.bases[i]
        return None

    def alloc(self, addr, size, reserved_before, reserved_after):
        """Segment changes ([(action, base, size)]) before an allocation at addr."""
        changes = []
        base = self.find(addr) if self.caching else None
        if base is None:
            seg = caching_segment_size(size) if self.caching else size
            if self.caching and reserved_after is not None and reserved_after < reserved_before + seg:
                for b in [b for b in self.bases if self.allocated[b] == 0]:
                    changes.append(("segment_free", b, self.size[b]))
                    self.drop(b)
            base = addr
            bisect.insort(self.bases, base)
            self.size[base], self.allocated[base] = seg, 0
            changes.append(("segment_alloc", base, seg))
        self.allocated[base] += size
        return changes

    def free(self, addr, size):
        """Segment changes after a free at addr: the segment itself unless the allocator caches."""
        base = self.find(addr)
        self.allocated[base] -= size
        if self.caching:
            return []
        self.drop(base)
        return [("segment_free", base, size)]

    def drop(self, base):
        self.bases.remove(base)
        del self.size[base], self.allocated[base]

    def reserved(self):
        return sum(self.size.values())


def snapshot(run_dir, tiers=None):
    """The snapshot dictionary, and the tier behind each device index."""
    summary = ms.read_summary(run_dir)
    events = read_events(run_dir)
    if tiers is None:
        tiers = [name for name, t in summary["tiers"].items() if t.get("role") == "compute"]
    else:
        for t in tiers:
            if t not in summary["tiers"]:
                raise SystemExit(f"no tier {t!r} in this run; it has: {', '.join(summary['tiers'])}")
    device_traces, segments = [], []
    for device, tier in enumerate(tiers):
        ev = events[events["tier"] == tier]
        sizes = ev["bytes"].astype("int64").tolist()
        reserved = read_reserved(run_dir, tier)
        if reserved is not None and len(reserved) != len(sizes):
            reserved = None  # a memory.csv from another run, or cut short: segments per allocation
        caching = reserved is not None and any(
            r != a for r, a in zip(reserved, ms_allocated_curve(ev["event"].tolist(), sizes)))
        # An empty tensor never reaches the device allocator: a zero-byte row holds no memory,
        # and its address (0) would stand for the block that does live there.
        keep = [n > 0 for n in sizes]
        ev = ev[keep]
        if reserved is not None:
            reserved = [r for r, k in zip(reserved, keep) if k]
        rows = list(zip(ev["event"], ev["address"].astype("int64").tolist(), ev["bytes"].astype("int64").tolist()))
        if not caching and not has_layout(rows):
            rows = first_fit(rows)
        times = (ev["time_s"] * 1e6).round().astype("int64").tolist()
        buffers, cats = ev["buffer"].tolist(), ev["category"].tolist()
        segs, trace, live = Segments(caching), [], {}
        for k, ((event, addr, size), t, buf, cat) in enumerate(zip(rows, times, buffers, cats)):
            frames = frames_for(buf, cat)
            if event == "alloc":
                before = reserved[k - 1] if reserved is not None and k > 0 else segs.reserved()
                after = reserved[k] if reserved is not None else None
                for action, base, n in segs.alloc(addr, size, before, after):
                    trace.append(segment_event(action, base, n, t, tier))
                trace.append({"action": "alloc", "addr": addr, "size": size, "stream": 0,
                              "time_us": t, "category": cat, "frames": frames})
                live[addr] = (size, frames, cat)
            else:
                trace.append({"action": "free_completed", "addr": addr, "size": size, "stream": 0,
                              "time_us": t, "category": cat, "frames": frames})
                live.pop(addr, None)
                for action, base, n in segs.free(addr, size):
                    trace.append(segment_event(action, base, n, t, tier))
        if caching and reserved and segs.reserved() != reserved[-1]:
            print(f"to_memory_viz.py: {tier}: the segments rebuilt reserve {segs.reserved()} bytes at the end, "
                  f"memory.csv {reserved[-1]}", file=sys.stderr)
        oom = summary.get("oom")
        if oom and oom.get("tier") == tier:
            free = oom.get("capacity_bytes", 0) - oom.get("allocated_bytes", 0)
            trace.append({"action": "oom", "addr": 0, "size": oom.get("requested_bytes", 0),
                          "device_free": free, "stream": 0, "time_us": times[-1] if times else 0,
                          "frames": [{"filename": "memsim", "line": 0, "name": f"op {oom.get('op')}"}]})
        device_traces.append(trace)
        segments.extend(end_segment(device, base, segs.size[base], live) for base in segs.bases)
    snap = {"segments": segments, "device_traces": device_traces,
            "allocator_settings": {}, "memsim": {"tiers": tiers, "run": summary.get("description")}}
    return snap, tiers


def ms_allocated_curve(events, sizes):
    total, curve = 0, []
    for event, n in zip(events, sizes):
        total += n if event == "alloc" else -n
        curve.append(total)
    return curve


def segment_event(action, base, size, time_us, tier):
    return {"action": action, "addr": base, "size": size, "stream": 0, "time_us": time_us,
            "category": "unknown", "frames": [{"filename": "memsim", "line": 0, "name": f"{tier} segment"}]}


def end_segment(device, base, size, live):
    """A segment at the end of the run: its live blocks and the free gaps between them."""
    blocks, cursor, allocated = [], base, 0
    for addr in sorted(a for a in live if base <= a < base + size):
        bsize, frames, _cat = live[addr]
        if addr > cursor:
            blocks.append({"address": cursor, "size": addr - cursor, "requested_size": 0,
                           "state": "inactive", "frames": []})
        blocks.append({"address": addr, "size": bsize, "requested_size": bsize,
                       "state": "active_allocated", "frames": frames})
        allocated += bsize
        cursor = addr + bsize
    if cursor < base + size:
        blocks.append({"address": cursor, "size": base + size - cursor, "requested_size": 0,
                       "state": "inactive", "frames": []})
    return {"device": device, "address": base, "total_size": size, "allocated_size": allocated,
            "active_size": allocated, "requested_size": allocated, "stream": 0,
            "segment_type": "small" if size == 2 * MIB else "large", "segment_pool_id": (0, 0),
            "is_expandable": False, "frames": [], "blocks": blocks}


def torch_1_13(snap):
    """torch 1.13's snapshot: the list of segments, each block's `history` the allocation in
    it (torch.cuda.memory_snapshot() of 1.13 with history recording on)."""
    segments = []
    for seg in snap["segments"]:
        blocks = []
        for b in seg["blocks"]:
            block = {"size": b["size"], "state": b["state"]}
            if b["state"] == "active_allocated":
                block["history"] = [{"addr": b["address"], "real_size": b["size"], "frames": b["frames"]}]
            blocks.append(block)
        segments.append({"device": seg["device"], "address": seg["address"], "total_size": seg["total_size"],
                         "allocated_size": seg["allocated_size"], "active_size": seg["active_size"],
                         "stream": seg["stream"], "segment_type": seg["segment_type"], "blocks": blocks})
    return segments


def replay_allocated(trace):
    """Allocated bytes after each alloc / free_completed entry of one device trace."""
    total, curve = 0, []
    for e in trace:
        if e["action"] == "alloc":
            total += e["size"]
        elif e["action"] == "free_completed":
            total -= e["size"]
        else:
            continue
        curve.append(total)
    return curve


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("run_dir", metavar="RUN_DIR", help="--out folder of `memsim run --events`")
    p.add_argument("--tier", action="append",
                   help="tier to export (repeatable; default: every compute tier, one device each)")
    p.add_argument("-o", "--output", help="pickle to write (default RUN_DIR/memory_snapshot.pickle)")
    p.add_argument("--torch-1.13", dest="torch_1_13", action="store_true",
                   help="write torch 1.13's format (a list of segments) for its torch.cuda._memory_viz")
    a = p.parse_args(argv)
    snap, tiers = snapshot(a.run_dir, a.tier)
    out = Path(a.output) if a.output else Path(a.run_dir) / "memory_snapshot.pickle"
    with open(out, "wb") as f:
        pickle.dump(torch_1_13(snap) if a.torch_1_13 else snap, f, protocol=4)
    print(out)
    for device, tier in enumerate(tiers):
        n = sum(1 for e in snap["device_traces"][device] if e["action"] in ("alloc", "free_completed"))
        print(f"  device {device} = {tier}: {n} allocs and frees")
    return 0


if __name__ == "__main__":
    sys.exit(main())
