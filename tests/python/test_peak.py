"""The peak, explained: summary.json's peak_op and peak_buffers, peak.csv and `memsim explain`
checked against what events.csv and timeline.csv of the same run say."""
import csv
import json
from collections import Counter

import pytest

from conftest import memsim


def live_at_peak_from_events(folder, tier):
    """Replays events.csv for one tier: the allocations live the first time the running
    total reaches its maximum, as a multiset of (buffer, category, bytes), and that total."""
    live = Counter()
    total = best = 0
    best_live = Counter()
    with open(folder / "events.csv") as f:
        for row in csv.DictReader(f):
            if row["tier"] != tier:
                continue
            key = (row["buffer"], row["category"], int(row["bytes"]))
            if row["event"] == "alloc":
                live[key] += 1
                total += key[2]
            else:
                live[key] -= 1
                if live[key] == 0:
                    del live[key]
                total -= key[2]
            if total > best:
                best, best_live = total, live.copy()
    return best_live, best


def peak_csv_rows(folder, tier):
    with open(folder / "peak.csv") as f:
        return [r for r in csv.DictReader(f) if r["tier"] == tier]


def op_at(folder, device, t):
    """The compute or recompute row of timeline.csv running on `device` (None: any) at `t`
    (the latest to start), else the first to start after `t`."""
    running = following = None
    with open(folder / "timeline.csv") as f:
        for row in csv.DictReader(f):
            if row["kind"] not in ("compute", "recompute") or device not in (None, row["device"]):
                continue
            start, end = float(row["start_s"]), float(row["end_s"])
            if start <= t < end:
                if running is None or start > float(running["start_s"]):
                    running = row
            elif start >= t and (following is None or start < float(following["start_s"])):
                following = row
    return running or following


@pytest.mark.parametrize("run", ["default", "swap", "caching", "dgx", "oom"])
def test_peak_live_set_is_the_events_live_set(runs, run):
    folder = runs(run)
    summary = json.loads((folder / "summary.json").read_text())
    checked = 0
    for tier, t in summary["tiers"].items():
        expected, total = live_at_peak_from_events(folder, tier)
        assert total == t["peak_allocated_bytes"], tier
        rows = peak_csv_rows(folder, tier)
        got = Counter((r["buffer"], r["category"], int(r["bytes"])) for r in rows)
        assert got == expected, tier
        assert t["peak_live_buffers"] == len(rows)
        # summary.json lists the largest ten, largest first, as peak.csv orders them all.
        assert [b["bytes"] for b in t["peak_buffers"]] == [int(r["bytes"]) for r in rows[:10]]
        assert [b["name"] for b in t["peak_buffers"]] == [r["buffer"] for r in rows[:10]]
        sizes = [int(r["bytes"]) for r in rows]
        assert sizes == sorted(sizes, reverse=True)
        if total == 0:
            assert t["peak_op"] is None and t["peak_buffers"] == []
            continue
        checked += 1
        device = tier.split(".")[0]
        op = op_at(folder, device, t["peak_time_s"])
        if op is None:  # a tier of a device that runs no ops (host DRAM): the op on any
            op = op_at_any(folder, t["peak_time_s"])
        if op is None:
            assert t["peak_op"] is None
            continue
        assert t["peak_op"]["name"] == op["op"], tier
        assert t["peak_op"]["phase"] == op["phase"]
    assert checked >= 1


def op_at_any(folder, t):
    return op_at(folder, None, t)


def test_peak_buffers_name_their_producer_and_layer(runs):
    summary = json.loads((runs("default") / "summary.json").read_text())
    hbm = summary["tiers"]["gpu0.hbm"]
    for b in hbm["peak_buffers"]:
        assert set(b) == {"name", "bytes", "category", "producer", "layer"}
        if b["category"] == "activation":
            assert b["producer"] and b["layer"]
            assert b["name"].startswith(b["producer"])
    rows = peak_csv_rows(runs("default"), "gpu0.hbm")
    weights = [r for r in rows if r["category"] == "weight"]
    assert weights and all(r["producer"] == "" and r["layer"] == "" for r in weights)


def test_terminal_names_the_op_and_the_largest_buffers(runs, tmp_path):
    r = memsim("run", "--out", tmp_path / "o")
    summary = json.loads((tmp_path / "o" / "summary.json").read_text())
    hbm = summary["tiers"]["gpu0.hbm"]
    lines = r.stdout.splitlines()
    at = next(i for i, line in enumerate(lines) if line.startswith("gpu0.hbm"))
    op = hbm["peak_op"]
    assert lines[at + 1].split() [:6] == ["at", "the", "peak", op["name"], f"({op['phase']})", "runs;"]
    assert f"{hbm['peak_live_buffers']} buffers live" in lines[at + 1]
    assert lines[at + 2].strip().startswith("largest: " + hbm["peak_buffers"][0]["name"] + " ")
    for b in hbm["peak_buffers"][:3]:
        assert b["name"] in lines[at + 2]


def test_explain_lists_every_live_buffer(runs):
    folder = runs("default")
    r = memsim("explain", folder)
    summary = json.loads((folder / "summary.json").read_text())
    hbm = summary["tiers"]["gpu0.hbm"]
    assert f"during {hbm['peak_op']['name']} ({hbm['peak_op']['phase']}); {hbm['peak_live_buffers']} buffers live" in r.stdout
    listed = Counter()
    for line in r.stdout.splitlines():
        if line.startswith("        "):  # one buffer a line, under its layer and category
            listed[line.split()[0]] += 1
    rows = peak_csv_rows(folder, "gpu0.hbm")
    assert listed == Counter(r["buffer"] for r in rows)
    # The same text straight after a run.
    again = memsim("run", "--explain", "--out", folder.parent / "explained")
    assert r.stdout.replace(str(folder), "") in again.stdout


def test_explain_of_a_folder_without_a_run():
    r = memsim("explain", "/nonexistent-folder", check=False)
    assert r.returncode == 1
    assert r.stderr.startswith("/nonexistent-folder/summary.json: cannot read")
