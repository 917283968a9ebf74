"""Step times against measured training steps (../shared/validation/measured-steps).

- The shipped dgx-a100 preset on all 288 shared single-node Megatron rows: the mean absolute
  error and the worst row, as docs/time-model.md reports them.
- The calibration procedure on 30 rows predicts the other 258: `memsim calibrate --steps`
  refits the host's per-op times from ranges around nothing in particular, and the held-out
  rows' mean error stays within 10%.

Skipped, with a message, where ../shared is absent.
"""
import csv
import re
import subprocess

import pytest

from conftest import REPO, memsim_binary, script

SHARED = REPO.parent / "shared" / "validation" / "measured-steps" / "a100-megatron-single-node.csv"

needs_shared = pytest.mark.skipif(not SHARED.exists(), reason=f"{SHARED} is absent: the measurements are not here")

# The rows fitted by the held-out check: 30 spread over the file (every 9.6th).
FIT_ROWS = ",".join(str(int(i * 9.6) + 1) for i in range(30))


@needs_shared
def test_dgx_a100_predicts_the_shared_single_node_steps():
    r = script("time_fidelity.py", "--format", "summary", "--binary", memsim_binary())
    m = re.search(r"(\d+) rows run, (\d+) failed; mean absolute error ([\d.]+)%, mean signed ([-+\d.]+)%, "
                  r"worst ([-+\d.]+)%", r.stdout)
    assert m, r.stdout
    rows, failed, mae, worst = int(m[1]), int(m[2]), float(m[3]), abs(float(m[5]))
    assert (rows, failed) == (288, 0)
    # docs/time-model.md: 7.6% on these rows with the shipped preset, worst +24.7%; the issue
    # asks for at most 8% and no row past 25%.
    assert mae <= 8.0, r.stdout
    assert worst <= 25.0, r.stdout


@needs_shared
def test_calibrating_on_30_rows_predicts_the_other_258(tmp_path):
    steps = tmp_path / "steps.csv"
    script("time_fidelity.py", "--export-steps", steps)
    with open(steps) as f:
        assert sum(1 for _ in csv.DictReader(f)) == 288
    out = tmp_path / "fitted.yaml"
    r = subprocess.run([str(memsim_binary()), "calibrate", "dgx-a100", "--steps", str(steps), "--fit-rows", FIT_ROWS,
                        "--fit", "gpu*.host_overhead.per_op.default=30us:90us", "--evaluations", "8",
                        "-o", str(out), "--table", str(tmp_path / "table.csv")],
                       cwd=REPO, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    fitted = re.search(r"fitted rows \(30\): mean absolute error ([\d.]+)%", r.stdout)
    held = re.search(r"held-out rows \(258\), predicted: mean absolute error ([\d.]+)%", r.stdout)
    assert fitted and held, r.stdout
    assert float(held[1]) < 10.0, r.stdout
    # The file it wrote is a platform memsim runs, with the chosen value at every GPU.
    value = re.search(r"gpu\*\.host_overhead\.per_op\.default\s+(\S+)", r.stdout)[1]
    text = out.read_text()
    assert text.count(f"default: {value}") >= 8 or text.count(value) >= 8, text[:2000]
    run = subprocess.run([str(memsim_binary()), "run", str(out), "gpt-megatron", "--no-advice", "--outputs", "summary",
                          "--out", str(tmp_path / "run"), "--set", "parallel.tp=2"], cwd=REPO, capture_output=True, text=True)
    assert run.returncode == 0, run.stderr


def test_calibrate_steps_names_the_line_of_a_bad_row(tmp_path):
    bad = tmp_path / "bad.csv"
    bad.write_text("workload,set,iteration_ms\ngpt-megatron,parallel.tp=2,12.5\ngpt-megatron,parallel.tp=2,fast\n")
    r = subprocess.run([str(memsim_binary()), "calibrate", "dgx-a100", "--steps", str(bad), "--fit",
                        "gpu*.host_overhead.per_op.default=30us:90us"], cwd=REPO, capture_output=True, text=True)
    assert r.returncode == 1
    assert "bad.csv:3" in r.stderr and "iteration_ms" in r.stderr and "'fast'" in r.stderr
    good = tmp_path / "good.csv"
    good.write_text("workload,set,iteration_ms\ngpt-megatron,parallel.tp=2,12.5\n")
    r = subprocess.run([str(memsim_binary()), "calibrate", "dgx-a100", "--steps", str(good), "--fit",
                        "gpu*.host_overhead.per_op.default=90us:30us"], cwd=REPO, capture_output=True, text=True)
    assert r.returncode == 2 and "LO below HI" in r.stderr
    # A row whose step does not fit the platform's memory has no time to fit: named, with the way out.
    oom = tmp_path / "oom.csv"
    oom.write_text("workload,set,iteration_ms\n"
                   "gpt-megatron,workload.hidden=3072 workload.layers=24 parallel.dp=2 parallel.global_batch=2,1000\n")
    r = subprocess.run([str(memsim_binary()), "calibrate", "dgx-a100", "--steps", str(oom), "--fit",
                        "gpu*.host_overhead.per_op.default=30us:90us", "--evaluations", "1"],
                       cwd=REPO, capture_output=True, text=True)
    assert r.returncode == 1, (r.stdout, r.stderr)
    assert "line 2" in r.stderr and "status oom" in r.stderr and "gpu*.hbm.capacity" in r.stderr, r.stderr


HEADER = ("# GPUs,global batch,micro batch,hidden size,attention heads,# layers,sequence length,"
          "tensor parallelism,data parallelism,pipeline parallelism,iteration time (ms)\n")


def test_rows_past_one_node_run_on_nodes_of_the_preset_and_rows_it_cannot_hold_on_the_larger_part(tmp_path):
    rows = tmp_path / "rows.csv"
    # Row 1: 16 GPUs, tp 8 x dp 2 -> two dgx-a100 nodes joined by the fabric. Row 2: 2.9 B
    # parameters unsharded (tp 1, dp 2) need 46 GB of weights and Adam state: not 40 GiB.
    rows.write_text(HEADER + "16,4,2,1024,16,4,1024,8,2,1,100\n2,2,1,3072,16,24,1024,1,2,1,1000\n")
    r = script("time_fidelity.py", "--csv", rows, "--format", "csv", "--binary", memsim_binary(), "--jobs", "2")
    out = list(csv.DictReader(r.stdout.splitlines()))
    assert [o["status"] for o in out] == ["ok", "ok at 80GiB (the preset's HBM does not hold it)"], r.stdout
    assert all(float(o["predicted_ms"]) > 0 for o in out), r.stdout
    # The same two rows as `memsim calibrate --steps` reads them: the nodes travel with the row.
    steps = tmp_path / "steps.csv"
    script("time_fidelity.py", "--csv", rows, "--export-steps", steps)
    sets = [row["set"] for row in csv.DictReader(open(steps))]
    assert sets[0].endswith(" nodes=2") and "nodes=" not in sets[1], sets
    # Without the larger part the second row is reported out of memory, and the script fails.
    p = script("time_fidelity.py", "--csv", rows, "--rows", "2", "--oom-capacity", "none", "--format", "csv",
               "--binary", memsim_binary(), check=False)
    assert p.returncode == 1 and ",oom" in p.stdout and "line 3: oom" in p.stderr, (p.stdout, p.stderr)
    # A row range that is not one is named.
    p = script("time_fidelity.py", "--csv", rows, "--rows", "1-2:7", check=False)
    assert p.returncode == 1 and "--rows 1-2:7" in p.stderr and "'1-2:7'" in p.stderr, p.stderr
