"""What it would take: on oom, `memsim run` says what the step needs and names a batch and a
policy that fit, each verified by the run it quotes; `memsim fit` records each probe's
peak and says why a search ends at 0."""
import json
import shutil
import subprocess
from pathlib import Path

import pytest

from conftest import memsim, memsim_binary


def point_summary(point):
    return json.loads((Path(point) / "summary.json").read_text())


def test_oom_names_what_it_needs_and_what_fits(tmp_path):
    out = tmp_path / "oom"
    r = memsim("run", "v100-16gb", "resnet50", "--set", "workload.batch=256", "--out", out)
    s = json.loads((out / "summary.json").read_text())
    assert s["status"] == "oom"
    advice = s["oom"]["advice"]
    capacity = s["tiers"]["gpu0.hbm"]["capacity_bytes"]
    # The peak with enough memory is the peak of the run that had it.
    needs = point_summary(advice["needs_point"])
    assert needs["status"] == "ok"
    assert advice["needs_bytes"] == needs["tiers"]["gpu0.hbm"]["peak_allocated_bytes"] > capacity
    assert "activation" in advice["exceeding_categories"]
    for c in advice["exceeding_categories"]:
        assert needs["tiers"]["gpu0.hbm"]["peak_by_category"][c] > capacity
    fits = {f["change"]: f for f in advice["would_fit"]}
    # A smaller batch: its run fits, the next batch's does not.
    batch = fits["batch"]
    assert 1 <= batch["batch"] < 256 and batch["first_fail"] == batch["batch"] + 1
    run = point_summary(batch["point"])
    assert run["status"] == "ok" and f"batch {batch['batch']}," in run["description"]
    assert run["iteration_time_s"] == batch["iteration_time_s"]
    failing = [point_summary(p.parent) for p in (out / "advice" / "points").glob("*/summary.json")]
    assert any(f"batch {batch['first_fail']}," in p["description"] and p["status"] == "oom"
               and p["policy"] == "none" for p in failing)
    # Another policy at this batch: its run fits, and it is the fastest of those that do.
    policy = fits["policy"]
    run = point_summary(policy["point"])
    assert run["status"] == "ok" and "batch 256," in run["description"]
    assert run["policy"].split("(")[0] == policy["policy"]
    assert run["iteration_time_s"] == policy["iteration_time_s"]
    assert policy["slowdown"] == policy["iteration_time_s"] / advice["needs_iteration_time_s"]
    ok = [t for t in advice["policies_tried"] if t["status"] == "ok"]
    assert policy["iteration_time_s"] == min(t["iteration_time_s"] for t in ok)
    # A policy the platform cannot run says why (v100-16gb's host has no NVMe), in
    # summary.json and on the terminal, and has no time.
    errors = {t["policy"]: t for t in advice["policies_tried"] if t["status"] == "error"}
    assert "has no NVMe tier" in errors["zero-infinity"]["error"]
    assert errors["zero-infinity"]["iteration_time_s"] is None
    assert all(t["iteration_time_s"] is None for t in advice["policies_tried"] if t["status"] != "ok")
    assert "could not run zero-infinity: " in r.stdout
    # The terminal says it in the same words.
    assert "\nneeds       " in r.stdout and "\nwould fit   batch " in r.stdout
    assert f"policy {policy['policy']} at batch 256: " in r.stdout
    assert str(Path(batch["point"])) + "/" in r.stdout
    # Asked again, nothing runs again: the same advice from the runs kept.
    again = memsim("run", "v100-16gb", "resnet50", "--set", "workload.batch=256", "--out", out)
    assert again.stdout == r.stdout


def test_no_advice_and_json_skip_it(tmp_path):
    memsim("run", "v100-16gb", "resnet50", "--set", "workload.batch=256", "--no-advice", "--out", tmp_path / "a")
    assert "advice" not in json.loads((tmp_path / "a" / "summary.json").read_text())["oom"]
    assert not (tmp_path / "a" / "advice").exists()
    r = memsim("run", "v100-16gb", "resnet50", "--set", "workload.batch=256", "--json", "--out", tmp_path / "b")
    assert "advice" not in json.loads(r.stdout)["oom"]


def test_fit_records_each_probe_peak(tmp_path):
    r = memsim("fit", "v100-16gb", "resnet50", "--json", "--out", tmp_path / "fit")
    fit = json.loads(r.stdout)["fits"][0]
    assert fit["max"] > 0
    for p in fit["probes"]:
        run = json.loads((tmp_path / "fit" / "points" / p["id"] / "summary.json").read_text())
        assert p["peak_bytes"] == run["tiers"]["gpu0.hbm"]["peak_allocated_bytes"]


def test_fit_says_why_it_ends_at_zero(tmp_path):
    r = memsim("fit", "a100-80gb", "llama-7b", "--out", tmp_path / "fit")
    assert "none: 0 because the model state alone is " in r.stdout
    assert "more than gpu0.hbm's 80 GiB" in r.stdout


@pytest.mark.skipif(shutil.which("script") is None, reason="util-linux's script is not installed")
def test_progress_only_on_a_terminal(tmp_path):
    """fit and the advice say how far they are on a terminal (under `script`, a pseudo-
    terminal), and nothing on a pipe."""
    binary = memsim_binary()
    for args, line in ((f"fit v100-16gb resnet50 --out {tmp_path}/fit", "memsim fit: run 1 (none at batch 1: ok)"),
                       (f"run v100-16gb resnet50 --set workload.batch=256 --out {tmp_path}/oom",
                        "what would fit: run 1 (none at batch 256: ok)")):
        tty = subprocess.run(["script", "-qec", f"{binary} {args} > /dev/null", "/dev/null"],
                             capture_output=True, text=True)
        assert line in tty.stdout.replace("\r", "\n"), tty.stdout
        piped = memsim(*args.split(), "--force") if args.startswith("fit") else memsim(*args.split())
        # Nothing but the run's note of its device's unused efficiency keys.
        assert [line for line in piped.stderr.splitlines() if "no op of this run" not in line] == []


def test_the_run_with_enough_memory_has_it_on_every_tier(tmp_path):
    """Tiers of 1 B, and two GPUs of a platform: the run the advice quotes had room on every
    tier of every device (not 64 times a tier of 1 B, nor gpu0 alone)."""
    for name, args in (("tiny", ["a100-40gb", "mlp", "--set", "gpu0.hbm.capacity=1B",
                                 "--set", "host.dram.capacity=1B"]),
                       ("two_gpus", ["dgx-a100", "mlp", "--set", "gpu0.hbm.capacity=1B",
                                     "--set", "gpu1.hbm.capacity=1B"])):
        out = tmp_path / name
        r = memsim("run", *args, "--out", out)
        s = json.loads((out / "summary.json").read_text())
        assert s["status"] == "oom"
        advice = s["oom"]["advice"]
        assert advice["needs_bytes"] is not None and advice["needs_bytes"] > 1, (name, advice)
        assert advice["needs_error"] is None
        needs = point_summary(advice["needs_point"])
        assert needs["status"] == "ok"
        assert advice["needs_bytes"] == needs["tiers"][s["oom"]["tier"]]["peak_allocated_bytes"]
        for tier, t in needs["tiers"].items():
            assert t["capacity_bytes"] > 1, (name, tier)
        assert "did not finish" not in r.stdout
        assert "\nneeds       " in r.stdout


def test_a_run_with_enough_memory_that_fails_says_why(tmp_path):
    """When the run the advice quotes does not give a peak, the note and summary.json say why,
    never an empty reason."""
    out = tmp_path / "oom"
    args = ["run", "a100-40gb", "mlp", "--set", "gpu0.hbm.capacity=1B", "--out", out]
    memsim(*args)
    point = Path(json.loads((out / "summary.json").read_text())["oom"]["advice"]["needs_point"])
    # That run, as kept, ran out of memory after all (the run reads it back rather than rerun).
    kept = point_summary(point)
    kept["status"] = "oom"
    kept["oom"] = {"op": "fc1", "tier": "gpu0.hbm", "requested_bytes": 4096, "allocated_bytes": 512,
                   "capacity_bytes": 1024}
    (point / "summary.json").write_text(json.dumps(kept))
    r = memsim(*args)
    advice = json.loads((out / "summary.json").read_text())["oom"]["advice"]
    assert advice["needs_bytes"] is None
    why = "it ran out of memory as well: gpu0.hbm full at op 'fc1', asked 4 KiB with 512 B of 1 KiB in use"
    assert advice["needs_error"] == why
    assert f"the run with enough memory did not finish: {why} ({point}/)" in advice["notes"]
    assert f"did not finish: {why}" in r.stdout
