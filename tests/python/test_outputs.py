"""An output folder holds one run's set of files: the previous run's, whole, or the new
one's, whole. A run stopped by a signal or failing part-way (a file it cannot write) leaves
the previous set as it was, and no temporary file or staging folder beside it."""
import os
import resource
import signal
import subprocess
import time
from pathlib import Path

import pytest

from conftest import REPO, memsim, memsim_binary

# A step long enough to be stopped while it runs (about a million ops: seconds of work on
# any machine); the signal is sent once its files are being written, not after a fixed delay.
LONG_RUN = ["run", "a100-40gb", "resnet1001", "--set", "workload.batch=4"]


def folder_state(out):
    """Every file under `out` with its bytes (the advice's folder aside)."""
    return {str(p.relative_to(out)): p.read_bytes()
            for p in sorted(out.rglob("*")) if p.is_file() and "advice" not in p.parts}


def leftovers(out):
    return [str(p) for p in out.rglob("*") if ".tmp." in p.name or p.name.startswith(".memsim-new.")]


def previous_set(out):
    memsim("run", "a100-40gb", "mlp", "--out", out)
    before = folder_state(out)
    assert "summary.json" in before and "timeline.csv" in before
    return before


def default_signals():
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, signal.SIG_DFL)


def wait_for_temporaries(process, out):
    """Polls until the run is writing its files (a .tmp file under the folder)."""
    while process.poll() is None:
        if any(".tmp." in p.name for p in out.rglob("*")):
            return True
        time.sleep(0.01)
    return False


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_during_a_run_leaves_the_previous_set_and_no_temporaries(tmp_path, sig):
    out = tmp_path / "out"
    before = previous_set(out)
    # Default dispositions, whatever the test runner's (a background job ignores SIGINT).
    p = subprocess.Popen([str(memsim_binary()), *LONG_RUN, "--no-advice", "--out", str(out)], cwd=REPO,
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, preexec_fn=default_signals)
    assert wait_for_temporaries(p, out), "the run ended before its files were being written"
    p.send_signal(sig)
    p.wait(timeout=600)
    assert p.returncode != 0
    assert leftovers(out) == []
    assert folder_state(out) == before


def limit_file_size():
    # Any file over 48 KiB cannot be written (EFBIG, as a full disk would refuse it); the
    # signal that would end the process instead is ignored.
    resource.setrlimit(resource.RLIMIT_FSIZE, (48 << 10, 48 << 10))
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)


def test_a_run_failing_part_way_leaves_the_previous_set(tmp_path):
    out = tmp_path / "out"
    before = previous_set(out)
    # resnet50's memory.csv and timeline.csv are over the limit; its summary.json and peak.csv are not, and were
    # written beside the old set before.
    r = subprocess.run([str(memsim_binary()), "run", "a100-40gb", "resnet50", "--no-advice", "--out", str(out)],
                       cwd=REPO, capture_output=True, text=True, preexec_fn=limit_file_size)
    assert r.returncode == 1, r.stderr
    assert ": cannot write" in r.stderr and "File too large" in r.stderr, r.stderr
    assert leftovers(out) == []
    assert folder_state(out) == before


def test_a_new_set_replaces_the_old_one_whole(tmp_path):
    out = tmp_path / "out"
    previous_set(out)
    # The previous run wrote trace.pftrace, timeline.csv and memory.csv; this one does not.
    memsim("run", "a100-40gb", "mlp", "--set", "workload.batch=8", "--outputs", "summary,peak", "--out", out)
    assert sorted(folder_state(out)) == ["peak.csv", "summary.json"]
    assert leftovers(out) == []


def test_a_staging_folder_of_a_killed_run_is_removed_by_the_next(tmp_path):
    out = tmp_path / "out"
    # Left by a process that no longer runs (a pid past any pid_max).
    stale = out / ".memsim-new.999999999.0"
    stale.mkdir(parents=True)
    (stale / "timeline.csv.tmp.999999999.3").write_text("time_s\n")
    memsim("run", "a100-40gb", "mlp", "--outputs", "summary", "--out", out)
    assert not stale.exists()
    assert sorted(os.listdir(out)) == ["summary.json"]


def test_an_oom_has_no_step_time_in_json_or_results_csv(tmp_path):
    """A partial iteration up to the OOM is no step time: --json and summary.json give null
    (and when it stopped apart), results.csv an empty cell."""
    import csv
    import json
    r = memsim("run", "v100-16gb", "resnet50", "--set", "workload.batch=256", "--json", "--no-advice",
               "--outputs", "summary", "--out", tmp_path / "run")
    s = json.loads(r.stdout)
    assert s["status"] == "oom"
    assert s["iteration_time_s"] is None and s["stopped_at_s"] > 0
    assert json.loads((tmp_path / "run" / "summary.json").read_text())["iteration_time_s"] is None
    sweep = tmp_path / "oom.yaml"
    sweep.write_text("devices: [v100-16gb]\nworkloads: [resnet50]\npolicies: [none]\n"
                     "set:\n  workload.batch: [8, 256]\n")
    memsim("sweep", sweep, "-j", "2", "--out", tmp_path / "sweep")
    rows = {row["workload.batch"]: row for row in csv.DictReader(open(tmp_path / "sweep" / "results.csv"))}
    assert rows["8"]["status"] == "ok" and float(rows["8"]["iteration_time_s"]) > 0
    assert rows["256"]["status"] == "oom" and rows["256"]["iteration_time_s"] == ""
