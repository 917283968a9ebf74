"""The analysis scripts on output memsim makes in the test: images exist, have the size asked
for and are not blank; the data behind the plots is memsim's to the byte."""
import csv
import json
import pickle
import struct
import numpy as np
import pandas as pd
import pytest

from conftest import ANALYSIS, SWEEP_POINTS, memsim, script

import compare
import pareto_table
import plot_memory
import plot_sweep
import plot_tiles
import plot_timeline
import report
import to_memory_viz

SCRIPTS = ["plot_memory.py", "plot_timeline.py", "plot_sweep.py", "plot_tiles.py", "compare.py",
           "to_memory_viz.py", "report.py", "pareto_table.py"]


def png_size(path):
    data = path.read_bytes()[:24]
    assert data[:8] == b"\x89PNG\r\n\x1a\n", f"{path} is not a PNG"
    return struct.unpack(">II", data[16:24])


def assert_picture(path, width, height):
    """A PNG of exactly width x height pixels with something drawn on it."""
    assert path.exists(), f"{path} was not written"
    assert png_size(path) == (width, height)
    import matplotlib.image
    img = matplotlib.image.imread(str(path))[..., :3]
    not_white = (img < 0.97).any(axis=2).mean()
    colours = len(np.unique((img * 255).astype(np.uint8).reshape(-1, 3), axis=0))
    assert not_white > 0.02, f"{path} is almost blank ({not_white:.3f} of pixels drawn)"
    assert colours > 8, f"{path} has only {colours} colours"


def csv_rows(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def summary(run_dir):
    return json.loads((run_dir / "summary.json").read_text())


def main_of(name):
    return {"plot_memory.py": plot_memory, "plot_timeline.py": plot_timeline, "plot_sweep.py": plot_sweep,
            "plot_tiles.py": plot_tiles, "compare.py": compare, "to_memory_viz.py": to_memory_viz,
            "report.py": report, "pareto_table.py": pareto_table}[name].main


def run_main(name, *args):
    """Runs a script's main() in this process (faster than a new Python for each call)."""
    return main_of(name)([str(a) for a in args])


@pytest.mark.parametrize("name", SCRIPTS)
def test_every_script_has_help(name, capsys):
    with pytest.raises(SystemExit) as e:
        run_main(name, "--help")
    assert e.value.code == 0
    out = capsys.readouterr().out
    assert "usage:" in out
    assert out.count("\n") > 5


def test_scripts_are_executable_with_debian_python():
    for name in SCRIPTS:
        path = ANALYSIS / name
        assert path.read_text().startswith("#!/usr/bin/python3\n"), name


# --- plot_memory ---------------------------------------------------------------------------

def test_memory_plot_image(runs, tmp_path):
    out = tmp_path / "memory.png"
    script("plot_memory.py", runs("default"), "-o", out, "--size", "8x4", "--dpi", "50")
    assert_picture(out, 400, 200)


def test_memory_plot_default_output_is_in_the_run_folder(runs, capsys):
    run_main("plot_memory.py", runs("default"))
    assert (runs("default") / "memory.png").exists()
    assert capsys.readouterr().out.strip().endswith("memory.png")


@pytest.mark.parametrize("run", ["default", "keep_all", "swap", "caching", "ipu", "oom"])
def test_memory_plot_stack_reaches_the_peak_to_the_byte(runs, run):
    d = runs(run)
    s = summary(d)
    frame = plot_memory.memory_frame(d)
    tier = frame.attrs["tier"]
    cats = frame.attrs["categories"]
    stacked = frame[cats].sum(axis=1)
    # Every step of the stack is the allocated total of that step...
    assert (stacked == frame["allocated_bytes"]).all()
    # ...and its highest is summary.json's peak, exactly.
    assert int(stacked.max()) == s["tiers"][tier]["peak_allocated_bytes"]
    assert int(frame["reserved_bytes"].max()) == s["tiers"][tier]["peak_reserved_bytes"]


def test_memory_plot_thinning_keeps_the_peak(runs):
    d = runs("default")
    full = plot_memory.memory_frame(d)
    thin = plot_memory.memory_frame(d, max_points=60)
    assert len(thin) <= 62 < len(full)
    assert thin["allocated_bytes"].max() == full["allocated_bytes"].max()
    assert thin["time_s"].is_monotonic_increasing


def test_memory_plot_of_several_runs(runs, tmp_path):
    out = tmp_path / "cmp.png"
    run_main("plot_memory.py", runs("default"), runs("keep_all"), runs("swap"), "-o", out,
             "--size", "9x9", "--dpi", "40")
    assert_picture(out, 360, 360)


def test_memory_plot_window_and_tier(runs, tmp_path):
    out = tmp_path / "host.png"
    run_main("plot_memory.py", runs("swap"), "--tier", "host.dram", "--window", "20:120", "--fit-y",
             "-o", out, "--size", "6x3", "--dpi", "50")
    assert_picture(out, 300, 150)
    frame = plot_memory.memory_frame(runs("swap"), "host.dram", window=(0.020, 0.120))
    assert frame["time_s"].min() >= 0.020 and frame["time_s"].max() <= 0.120


def test_memory_plot_is_deterministic(runs, tmp_path):
    # Two processes: nothing of the first (a hash seed, a clock) leaks into the file.
    a, b = tmp_path / "a.png", tmp_path / "b.png"
    script("plot_memory.py", runs("default"), "-o", a, "--size", "6x3")
    script("plot_memory.py", runs("default"), "-o", b, "--size", "6x3")
    assert a.read_bytes() == b.read_bytes()
    sa, sb = tmp_path / "a.svg", tmp_path / "b.svg"
    run_main("plot_memory.py", runs("default"), "-o", sa)
    run_main("plot_memory.py", runs("default"), "-o", sb)
    assert sa.read_bytes() == sb.read_bytes()
    assert b"<dc:date>" not in sa.read_bytes()


# --- plot_timeline -------------------------------------------------------------------------

def test_timeline_image(runs, tmp_path):
    out = tmp_path / "t.png"
    script("plot_timeline.py", runs("swap"), "-o", out, "--size", "10x3", "--dpi", "50")
    assert_picture(out, 500, 150)


def test_timeline_bars_are_the_timeline(runs):
    d = runs("swap")
    rows = csv_rows(d / "timeline.csv")
    bars = plot_timeline.timeline_bars(d)
    assert len(bars) == len(rows)
    lanes = set(bars["lane"])
    assert {"gpu0 stream0", "gpu0 copy_out", "gpu0 copy_in"} <= lanes
    assert {"forward", "backward", "swap_out", "swap_in"} <= set(bars["key"])
    # Merging sub-pixel bars never loses time a lane was busy.
    merged = plot_timeline.timeline_bars(d, resolution_s=1e-4)
    assert len(merged) < len(bars)
    for lane in lanes:
        a, b = bars[bars["lane"] == lane], merged[merged["lane"] == lane]
        assert b["start_s"].min() == a["start_s"].min() and b["end_s"].max() == a["end_s"].max()


def test_timeline_window(runs, tmp_path):
    out = tmp_path / "w.png"
    run_main("plot_timeline.py", runs("default"), "--window", "40:45", "-o", out, "--size", "8x2", "--dpi", "50")
    assert_picture(out, 400, 100)
    bars = plot_timeline.timeline_bars(runs("default"), window=(0.040, 0.045))
    assert len(bars) > 0
    assert (bars["end_s"] > 0.040).all() and (bars["start_s"] < 0.045).all()


def test_timeline_of_eight_devices(runs, tmp_path):
    out = tmp_path / "dgx.png"
    run_main("plot_timeline.py", runs("dgx"), "-o", out, "--size", "8x5", "--dpi", "40")
    assert_picture(out, 320, 200)
    assert len(set(plot_timeline.timeline_bars(runs("dgx"))["lane"])) == 8


def test_timeline_rejects_an_empty_window(runs):
    with pytest.raises(SystemExit, match="--window"):
        run_main("plot_timeline.py", runs("default"), "--window", "50:40")


# --- plot_sweep ----------------------------------------------------------------------------

def test_sweep_plots(sweep_csv, tmp_path):
    r = script("plot_sweep.py", sweep_csv, "-o", tmp_path, "--size", "10x6", "--dpi", "40")
    assert_picture(tmp_path / "pareto.png", 400, 240)
    assert_picture(tmp_path / "fits.png", 400, 240)
    assert "pareto.png" in r.stdout and "fits.png" in r.stdout


def test_sweep_frames(sweep_csv):
    df = plot_sweep.read_results(sweep_csv)
    assert df.attrs["axes"] == ["workload.batch"]
    assert len(df) == len(SWEEP_POINTS)
    assert df["peak_bytes"].notna().all()
    fits = plot_sweep.fits_frame(df, "workload.batch")
    assert fits["points"].sum() == len(SWEEP_POINTS)
    assert fits["fit"].sum() == (df["status"] == "ok").sum()
    # keep-all at batch 512 does not fit on a 16 GB V100 (resnet18 needs ~26 GiB without sharing).
    row = fits[(fits["device"] == "v100-16gb") & (fits["workload.batch"] == "512")]
    assert int(row["fit"].iloc[0]) < int(row["points"].iloc[0])
    pts = plot_sweep.pareto_frame(df)
    assert set(pts["status"]) == {"ok"}
    # One point per policy and batch: each is its own front.
    assert pts["on_front"].all()


def test_pareto_front():
    df = pd.DataFrame({
        "device": ["d"] * 4, "workload": ["w"] * 4, "policy": ["p"] * 4,
        "policy.budget": ["1", "2", "3", "4"], "status": ["ok"] * 4,
        "iteration_time_s": [1.0, 2.0, 3.0, 2.5], "peak_bytes": [40.0, 30.0, 10.0, 35.0],
    })
    df.attrs["axes"] = ["policy.budget"]
    front = plot_sweep.pareto_frame(df)
    assert list(front["on_front"]) == [True, True, True, False]


def test_pareto_table_marks_the_front_across_policies(tmp_path, capsys):
    path = tmp_path / "results.csv"
    path.write_text("point_id,device,workload,policy,policy.budget,status,error,iteration_time_s,"
                    "gpu0.hbm.peak_allocated_bytes\n"
                    "a,d,w,none,,ok,,0.100,4294967296\n"
                    "b,d,w,dtr,0.5,ok,,0.120,2147483648\n"
                    "c,d,w,vdnn,0.5,ok,,0.200,2147483648\n"
                    "e,d,w,dtr,0.3,oom,,0.010,1073741824\n")
    assert run_main("pareto_table.py", path) == 0
    rows = [l for l in capsys.readouterr().out.splitlines() if l.startswith("| ") and "---" not in l][1:]
    cells = [[c.strip() for c in r.strip("|").split("|")] for r in rows]
    # Sorted by peak: the two 2 GiB points (dtr first, faster), then none; the oom last.
    assert [c[0] for c in cells] == ["dtr", "vdnn", "none", "dtr"]
    assert cells[0][1:] == ["budget=0.5", "ok", "2.00", "120.0", "1.200x", "yes"]
    assert cells[1][6] == ""  # vdnn: as much memory as dtr, slower
    assert cells[2][6] == "yes"  # none: the fastest
    assert cells[3][2] == "oom" and cells[3][3] == ""
    doc = tmp_path / "doc.md"
    doc.write_text("before\n<!-- pareto:begin -->\nold\n<!-- pareto:end -->\nafter\n")
    assert run_main("pareto_table.py", path, "--into", doc) == 0
    text = doc.read_text()
    assert text.startswith("before\n<!-- pareto:begin -->\n") and text.endswith("<!-- pareto:end -->\nafter\n")
    assert "old" not in text and "| vdnn | budget=0.5 |" in text
    doc.write_text("no markers\n")
    with pytest.raises(SystemExit) as e:
        run_main("pareto_table.py", path, "--into", doc)
    assert "pareto:begin" in str(e.value.code)


def test_sweep_peak_column_takes_the_first_compute_tier(tmp_path):
    path = tmp_path / "results.csv"
    path.write_text("point_id,device,workload,policy,workload.batch,status,error,iteration_time_s,"
                    "gpu0.hbm.peak_allocated_bytes,tpu0.hbm.peak_allocated_bytes\n"
                    "a,a100,m,none,1,ok,,0.1,100,\n"
                    "b,tpu,m,none,1,ok,,0.2,,200\n"
                    "c,tpu,m,none,2,error,boom,,,\n")
    df = plot_sweep.read_results(path)
    assert list(df["peak_bytes"][:2]) == [100, 200]
    assert df["peak_bytes"].isna().iloc[2]


def test_real_sweep_if_memsim_has_it(tmp_path):
    if memsim("sweep", "--help", check=False).returncode != 0:
        pytest.skip("this memsim has no sweep command")
    spec = tmp_path / "s.yaml"
    spec.write_text("devices: [v100-16gb]\nworkloads: [mlp]\npolicies: [none, keep-all]\n"
                    "set:\n  workload.batch: [64, 4096]\n")
    memsim("sweep", spec, "-j", "2", "--out", tmp_path / "out")
    run_main("plot_sweep.py", tmp_path / "out" / "results.csv", "--size", "6x4", "--dpi", "40")
    assert_picture(tmp_path / "out" / "pareto.png", 240, 160)
    assert_picture(tmp_path / "out" / "fits.png", 240, 160)


# --- plot_tiles ----------------------------------------------------------------------------

def test_tiles_plot(runs, tmp_path):
    out = tmp_path / "tiles.png"
    script("plot_tiles.py", runs("ipu"), "-o", out, "--size", "10x4", "--dpi", "50")
    assert_picture(out, 500, 200)
    run_main("plot_tiles.py", runs("ipu"), "--scale", "capacity", "--columns", "32", "-o", tmp_path / "c.png")
    assert png_size(tmp_path / "c.png") == (1200, 500)


def test_tiles_grid_is_tiles_csv(runs):
    d = runs("ipu")
    rows = csv_rows(d / "tiles.csv")
    frame = plot_tiles.tile_frame(d)
    assert len(frame) == len(rows) == 1472
    grid = plot_tiles.tile_grid(frame, plot_tiles.default_columns(len(frame)))
    assert grid.shape == (23, 64)
    flat = grid.ravel()
    for r in rows:
        assert flat[int(r["tile"])] == int(r["peak_bytes"])
    assert frame.attrs["tile_capacity_bytes"] == 624 * 1024


def test_tiles_without_a_tiled_tier(runs):
    with pytest.raises(SystemExit, match="no tiles.csv"):
        run_main("plot_tiles.py", runs("default"))


# --- compare -------------------------------------------------------------------------------

def test_compare_table(runs, tmp_path):
    r = script("compare.py", runs("default"), runs("keep_all"), runs("swap"))
    assert "slowdown vs first" in r.stdout and "peak allocated" in r.stdout
    out = tmp_path / "c.csv"
    run_main("compare.py", runs("default"), runs("keep_all"), runs("swap"), "--format", "csv", "-o", out)
    table = pd.read_csv(out)
    assert list(table["policy"]) == ["none", "keep-all", summary(runs("swap"))["policy"]]
    assert table["slowdown"].iloc[0] == 1.0
    assert table["peak_allocated_bytes"].iloc[1] > table["peak_allocated_bytes"].iloc[0]
    assert table["swap_out_bytes"].iloc[2] > 0
    s = summary(runs("swap"))
    assert table["slowdown"].iloc[2] == pytest.approx(s["iteration_time_s"] / summary(runs("default"))["iteration_time_s"])
    md = tmp_path / "c.md"
    run_main("compare.py", runs("default"), runs("keep_all"), "--format", "markdown", "-o", md)
    assert md.read_text().startswith("|  | none | keep-all |")


# --- to_memory_viz -------------------------------------------------------------------------

@pytest.mark.parametrize("run", ["default", "caching", "ipu", "swap", "oom"])
def test_memory_viz_replay_is_the_allocated_curve(runs, tmp_path, run):
    d = runs(run)
    out = tmp_path / "snap.pickle"
    if run == "default":
        script("to_memory_viz.py", d, "-o", out)
    else:
        run_main("to_memory_viz.py", d, "-o", out)
    with open(out, "rb") as f:
        snap = pickle.load(f)
    assert set(snap) >= {"segments", "device_traces"}
    tier = next(name for name, t in summary(d)["tiers"].items() if t["role"] == "compute")
    trace = snap["device_traces"][0]
    expected = [int(r["allocated_bytes"]) for r in csv_rows(d / "memory.csv") if r["tier"] == tier]
    assert to_memory_viz.replay_allocated(trace) == expected
    assert trace[0]["action"] == "segment_alloc"
    actions = {e["action"] for e in trace}
    assert {"alloc", "free_completed"} <= actions
    # The segments at the end: blocks tile each, the active ones are what is still allocated.
    segs = [s for s in snap["segments"] if s["device"] == 0]
    for seg in segs:
        assert sum(b["size"] for b in seg["blocks"]) == seg["total_size"]
    active = sum(b["size"] for seg in segs for b in seg["blocks"] if b["state"] == "active_allocated")
    assert active == expected[-1] == sum(seg["allocated_size"] for seg in segs)
    # Every allocation lies inside a segment taken before it and not yet given back.
    live = set()
    for e in trace:
        if e["action"] == "segment_alloc":
            live.add((e["addr"], e["size"]))
        elif e["action"] == "segment_free":
            live.remove((e["addr"], e["size"]))
        elif e["action"] == "alloc":
            assert any(a <= e["addr"] and e["addr"] + e["size"] <= a + n for a, n in live)
    if run == "oom":
        assert trace[-1]["action"] == "oom" and trace[-1]["size"] > 0


def test_memory_viz_one_device_per_compute_tier(runs, tmp_path, capsys):
    out = tmp_path / "dgx.pickle"
    run_main("to_memory_viz.py", runs("dgx"), "-o", out)
    with open(out, "rb") as f:
        snap = pickle.load(f)
    assert len(snap["device_traces"]) == 8
    assert sorted({s["device"] for s in snap["segments"]}) == list(range(8))
    assert "device 7 = gpu7.hbm" in capsys.readouterr().out


def test_memory_viz_needs_events(runs):
    with pytest.raises(SystemExit, match="--events"):
        run_main("to_memory_viz.py", runs("keep_all"))


# --- report --------------------------------------------------------------------------------

def test_report_of_a_run(runs, tmp_path):
    out = tmp_path / "r.html"
    script("report.py", runs("swap"), "-o", out)
    text = out.read_text()
    assert text.count("data:image/png;base64,") == 3  # memory, the timeline around the peak, timeline
    assert "slowdown vs first" not in text  # one run: nothing to compare with
    peak = summary(runs("swap"))["tiers"]["gpu0.hbm"]
    assert f"during <b>{peak['peak_op']['name']}</b>" in text
    assert "<a href='#timeline0'>timeline</a>" in text and "<h2 id='timeline0'>" in text
    assert "src=\"http" not in text  # nothing to fetch
    again = tmp_path / "r2.html"
    run_main("report.py", runs("swap"), "-o", again)
    assert again.read_bytes() == out.read_bytes()


def test_report_of_runs_and_tiles(runs, tmp_path):
    out = tmp_path / "r.html"
    run_main("report.py", runs("default"), runs("ipu"), "-o", out)
    text = out.read_text()
    assert text.count("data:image/png;base64,") == 6  # memory, 2 peaks and 2 timelines, tiles
    assert "slowdown vs first" in text


def test_report_of_a_sweep(sweep_csv, tmp_path):
    out = tmp_path / "s.html"
    run_main("report.py", sweep_csv.parent, "-o", out)
    text = out.read_text()
    assert text.count("data:image/png;base64,") == 2  # pareto, fits
    assert "Every point" in text and "v100-16gb" in text
