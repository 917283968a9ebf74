#!/usr/bin/python3
"""Converts a run's events.csv into a PyTorch memory snapshot that pytorch.org/memory_viz
opens (drag the .pickle onto the page), or, with --torch-1.13, the snapshot that Debian 12's
torch 1.13 reads (`python3 -m torch.cuda._memory_viz stats|segments|memory FILE`).

    memsim run a100-40gb resnet50 --events --out out/
    to_memory_viz.py out/                    # out/memory_snapshot.pickle
    to_memory_viz.py out/ --tier gpu1.hbm -o gpu1.pickle
    to_memory_viz.py out/ --torch-1.13 -o out/snapshot-1.13.pickle

The snapshot holds what torch.cuda.memory._snapshot() returns: `device_traces` (one list per
compute tier, in platform order: a `segment_alloc` for the tier's address range, then an
`alloc` or `free_completed` per row of events.csv, and an `oom` when the run ran out),
`segments` (the state at the end: one segment per tier whose blocks are the live
allocations and the gaps between them). Sizes are the allocator's rounded bytes, so the
Active Memory Timeline's total is memsim's allocated curve. Each entry carries a
`category` (weight, activation, ...: memory_viz colours by it) and a frame naming the buffer.
torch 1.13's snapshot is the list of segments alone, each block with a `history` of the
allocation in it (its size and frames).

The allocator's addresses are kept where they are a layout (best_fit, caching). Where they
are not — the ideal allocator's bump pointer, a tiled tier that spreads a tensor over tiles
— allocations are placed first-fit inside the tier, so the segment is the tier (its budget
when it has one), not an address space that only grows. Reads only events.csv and
summary.json.
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
        rows = list(zip(ev["event"], ev["address"].astype("int64").tolist(), ev["bytes"].astype("int64").tolist()))
        t = summary["tiers"][tier]
        limit = t.get("budget_bytes") or t.get("capacity_bytes", 0)
        if not has_layout(rows):
            rows = first_fit(rows)
        times = (ev["time_s"] * 1e6).round().astype("int64").tolist()
        buffers, cats = ev["buffer"].tolist(), ev["category"].tolist()
        # One segment: the tier, or every address the allocator used when that is more (a
        # layout past the budget; first-fit fragmenting past an ideal tier's capacity).
        seg_size = max([limit] + [a + n for _, a, n in rows])
        if seg_size > limit:
            print(f"to_memory_viz.py: {tier}: the allocations reach {seg_size} bytes, past the tier's {limit}; "
                  "the segment spans them", file=sys.stderr)
        trace = [{"action": "segment_alloc", "addr": 0, "size": seg_size, "stream": 0,
                  "time_us": times[0] if times else 0, "category": "unknown",
                  "frames": [{"filename": "memsim", "line": 0, "name": f"{tier} address space"}]}]
        live = {}
        for (event, addr, size), t, buf, cat in zip(rows, times, buffers, cats):
            action = "alloc" if event == "alloc" else "free_completed"
            frames = frames_for(buf, cat)
            trace.append({"action": action, "addr": addr, "size": size, "stream": 0,
                          "time_us": t, "category": cat, "frames": frames})
            if event == "alloc":
                live[addr] = (size, frames, cat)
            else:
                live.pop(addr, None)
        oom = summary.get("oom")
        if oom and oom.get("tier") == tier:
            free = oom.get("capacity_bytes", 0) - oom.get("allocated_bytes", 0)
            trace.append({"action": "oom", "addr": 0, "size": oom.get("requested_bytes", 0),
                          "device_free": free, "stream": 0, "time_us": times[-1] if times else 0,
                          "frames": [{"filename": "memsim", "line": 0, "name": f"op {oom.get('op')}"}]})
        device_traces.append(trace)
        segments.append(end_segment(device, seg_size, live))
    snap = {"segments": segments, "device_traces": device_traces,
            "allocator_settings": {}, "memsim": {"tiers": tiers, "run": summary.get("description")}}
    return snap, tiers


def end_segment(device, size, live):
    """The tier's one segment at the end of the run: live blocks and the gaps between them."""
    blocks, cursor, allocated = [], 0, 0
    for addr in sorted(live):
        bsize, frames, _cat = live[addr]
        if addr > cursor:
            blocks.append({"address": cursor, "size": addr - cursor, "requested_size": 0,
                           "state": "inactive", "frames": []})
        blocks.append({"address": addr, "size": bsize, "requested_size": bsize,
                       "state": "active_allocated", "frames": frames})
        allocated += bsize
        cursor = addr + bsize
    if cursor < size:
        blocks.append({"address": cursor, "size": size - cursor, "requested_size": 0,
                       "state": "inactive", "frames": []})
    return {"device": device, "address": 0, "total_size": size, "allocated_size": allocated,
            "active_size": allocated, "requested_size": allocated, "stream": 0,
            "segment_type": "large", "segment_pool_id": (0, 0), "is_expandable": False,
            "frames": [], "blocks": blocks}


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
