"""The Python package memsim (docs/python.md): the same results as `memsim run`, errors as
exceptions with the command's messages, many runs in one process without growth, no files
unless asked, and info, list and sweep.

The package is build/python (beside the memsim binary conftest.py finds), as README's
set-up puts it on PYTHONPATH.
"""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import REPO, memsim, memsim_binary


def package_dir():
    d = memsim_binary().parent / "python"
    if not (d / "memsim" / "__init__.py").exists():
        pytest.fail(f"no memsim Python package at {d}: build it (cmake --build build; it needs pybind11-dev)")
    return d


@pytest.fixture(scope="module")
def ms():
    sys.path.insert(0, str(package_dir()))
    import memsim as package
    return package


def python(code, cwd=REPO, **env):
    """Debian's Python with the package on PYTHONPATH, as README's set-up line."""
    e = dict(os.environ, PYTHONPATH=str(package_dir()), **env)
    return subprocess.run([sys.executable, "-c", code], cwd=cwd, env=e, capture_output=True, text=True)


def test_the_done_when_line(tmp_path):
    r = python("import memsim; r = memsim.run('a100-80gb', 'llama3-8b', overrides={'workload.seq_len': 4096}); "
               "print(r.status, r.peak_bytes('gpu0.hbm'))", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    status, peak = r.stdout.split()
    cli = json.loads(memsim("run", "a100-80gb", "llama3-8b", "--set", "workload.seq_len=4096", "--json",
                            "--no-advice", "--out", tmp_path / "cli").stdout)
    assert status == cli["status"]
    assert int(peak) == cli["tiers"]["gpu0.hbm"]["peak_allocated_bytes"] > 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cli"]  # the package wrote nothing


PAIRS = [
    ("a100-40gb", "mlp", "none", {}),
    ("a100-40gb", "resnet50", "vdnn", {"gpu0.hbm.capacity": "4GiB"}),
    ("v100-16gb", "resnet50", "none", {"workload.batch": 256}),  # oom
    ("dgx-a100", "mlp", "none", {"workload.batch": 64}),
    ("a100-40gb", "bert-base", "checkpoint-sqrt", {"workload.batch": 8}),
]


@pytest.mark.parametrize("platform, workload, policy, overrides", PAIRS)
def test_same_results_as_the_cli(ms, tmp_path, platform, workload, policy, overrides):
    sets = [a for k, v in overrides.items() for a in ("--set", f"{k}={v}")]
    out = tmp_path / "cli"
    memsim("run", platform, workload, "--policy", policy, *sets, "--no-advice", "--out", out)
    r = ms.run(platform, workload, policy, overrides)
    # Byte for byte: the summary (with the peaks' buffers), the timeline, the memory curve.
    assert r.summary_json == (out / "summary.json").read_text()
    assert r.status == r.summary["status"] == json.loads((out / "summary.json").read_text())["status"]
    assert r._texts == tuple((out / name).read_text() for name in ("timeline.csv", "memory.csv", "peak.csv"))
    import pandas as pd
    for table, name in ((r.timeline, "timeline.csv"), (r.memory, "memory.csv"), (r.peaks, "peak.csv")):
        pd.testing.assert_frame_equal(table, pd.read_csv(out / name))
    # write() gives the CLI's files, byte for byte.
    written = r.write(tmp_path / "py")
    assert written == ["summary.json", "timeline.csv", "memory.csv", "peak.csv", "trace.pftrace"]
    for name in written:
        assert (tmp_path / "py" / name).read_bytes() == (out / name).read_bytes(), name


def test_oom_is_a_result_not_an_error(ms):
    r = ms.run("v100-16gb", "resnet50", overrides={"workload.batch": 256})
    assert r.status == "oom" and not r.ok
    assert r.summary["oom"]["tier"] == "gpu0.hbm"
    assert r.throughput is None


def test_throughput_of_a_run(ms):
    r = ms.run("a100-80gb", "gpt2-small", overrides={"workload.batch": 2})
    t = r.throughput
    assert t["gpus"] == 1 and t["tokens_per_step"] == 2 * 1024
    assert t["tokens_per_s"] == pytest.approx(2048 / r.summary["iteration_time_s"], rel=1e-12)
    assert 0 < t["mfu"] <= t["hfu"] < 1


def test_many_runs_in_one_process_neither_grow_nor_drift(ms):
    """SimGrid starts once per process: each run is a worker's. The parent's memory stays
    flat over runs 10 to 100 and every run gives the first one's summary."""
    def rss_kib():
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    first = ms.run("a100-40gb", "mlp", overrides={"workload.batch": 32})
    at_10 = None
    for k in range(1, 101):
        r = ms.run("a100-40gb", "mlp", overrides={"workload.batch": 32})
        r.timeline  # parse the tables too
        assert r.summary_json == first.summary_json
        if k == 10:
            at_10 = rss_kib()
    grown = rss_kib() - at_10
    assert grown < 16 * 1024, f"the process grew by {grown} KiB over runs 10..100"


def test_dicts_are_documents(ms, tmp_path):
    as_dict = ms.run("a100-40gb", {"model": "mlp", "layers": [784, 1024, 10], "batch": 64})
    as_file = tmp_path / "w.yaml"
    as_file.write_text("model: mlp\nlayers: [784, 1024, 10]\nbatch: 64\n")
    from_file = ms.run("a100-40gb", as_file)
    assert as_dict.summary["inputs"]["workload"] == "(workload dict)"
    assert as_dict.summary["tiers"] == from_file.summary["tiers"]
    assert as_dict.summary["iteration_time_s"] == from_file.summary["iteration_time_s"]


def test_errors_carry_the_commands_messages(ms, tmp_path):
    cli = memsim("run", "a100-40gb", "resnt50", "--out", tmp_path, check=False)
    with pytest.raises(ms.InputError) as e:
        ms.run("a100-40gb", "resnt50")
    assert cli.returncode == e.value.exit_code == 1
    assert str(e.value) == cli.stderr.strip()
    assert "did you mean 'resnet50'?" in str(e.value)
    # A dict's mistakes are located in its JSON text, under the dict's name.
    with pytest.raises(ms.InputError, match=r"\(workload dict\):\d+.*batch"):
        ms.run("a100-40gb", {"model": "mlp", "batch": "many"})
    with pytest.raises(ms.InputError, match="unknown key 'btch'"):
        ms.run("a100-40gb", "mlp", overrides={"workload.btch": 8})
    with pytest.raises(ms.UsageError, match="has no compute device 'gpu9'") as e:
        ms.run("dgx-a100", "mlp", devices=["gpu9"])
    assert e.value.exit_code == 2
    with pytest.raises(TypeError):
        ms.run("a100-40gb", 42)


def test_no_files_unless_asked(tmp_path):
    r = python("import memsim; r = memsim.run('a100-40gb', 'mlp'); r.timeline; r.memory; r.peaks; "
               "print(memsim.info('mlp')['name']); print(len(memsim.list('presets')['presets']['devices']))",
               cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert list(tmp_path.iterdir()) == []


def test_tables_without_pandas(tmp_path):
    r = python("import sys; sys.modules['pandas'] = None\n"
               "import memsim; r = memsim.run('a100-40gb', 'mlp')\n"
               "print(type(r.timeline).__name__, r.timeline[0]['kind'] if r.timeline else '', type(r.peaks).__name__)",
               cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    kind, first, peaks = r.stdout.split()
    assert (kind, peaks) == ("list", "list") and first


def test_info_and_list_are_the_commands_json(ms):
    assert ms.info("llama3-8b") == json.loads(memsim("info", "llama3-8b", "--json").stdout)
    assert ms.info("a100-80gb") == json.loads(memsim("info", "a100-80gb", "--json").stdout)
    kinds = ms.info("a100-40gb", "mlp", op_kinds=True)
    assert kinds == json.loads(memsim("info", "a100-40gb", "mlp", "--op-kinds", "--json").stdout)
    assert ms.list() == json.loads(memsim("list", "--json").stdout)
    assert "a100-80gb" in ms.list("presets")["presets"]["devices"]
    with pytest.raises(ms.InputError, match="did you mean"):
        ms.info("llama3-8c")
    with pytest.raises(ms.UsageError, match="did you mean 'policies'"):
        ms.list("polices")


def test_sweep_as_a_table(ms, tmp_path):
    spec = {"devices": ["v100-16gb", "a100-40gb"], "workloads": ["mlp"], "policies": ["none"],
            "set": {"workload.batch": [32], "gpu0.hbm.capacity": ["16GiB", "8MiB"]}}
    points = ms.sweep(spec, jobs=2)
    assert len(points) == 4
    assert sorted(points["status"]) == ["ok", "ok", "oom", "oom"]
    one = points[(points["device"] == "a100-40gb") & (points["gpu0.hbm.capacity"] == "16GiB")].iloc[0]
    r = ms.run("a100-40gb", "mlp", overrides={"workload.batch": 32, "gpu0.hbm.capacity": "16GiB"})
    assert one["iteration_time_s"] == pytest.approx(r.summary["iteration_time_s"], rel=1e-12)
    # A point that fails is a row with its reason.
    failing = ms.sweep({"devices": ["a100-40gb"], "workloads": ["mlp"], "set": {"workload.batch": [32, 2**22]}})
    assert list(failing["status"]) == ["ok", "error"] and failing["error"].iloc[1]
    # Kept only when asked.
    ms.sweep(spec, out=tmp_path / "kept", jobs=2)
    assert (tmp_path / "kept" / "results.csv").exists()


def test_the_example_script_runs(tmp_path):
    """docs/python_example.py, as docs/python.md shows it, with its plot in a temporary folder."""
    e = dict(os.environ, PYTHONPATH=str(package_dir()), MPLBACKEND="Agg")
    r = subprocess.run([sys.executable, str(REPO / "docs" / "python_example.py"), str(tmp_path)], cwd=tmp_path,
                       env=e, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert "llama3-8b" in r.stdout and "policy" in r.stdout
    assert (tmp_path / "policies.png").stat().st_size > 10_000


def test_the_readme_lines_run(tmp_path):
    """README's set-up line and its Python example, as written there."""
    readme = (REPO / "README.md").read_text()
    setup = next(line.strip() for line in readme.splitlines() if line.strip().startswith("PYTHONPATH=build/python"))
    code = setup.split(" -c ", 1)[1].strip('"')
    r = python(code, cwd=tmp_path)
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stderr
    block = readme.split("## From Python", 1)[1]
    lines = block[block.index("    import memsim"):].split("\n\n", 1)[0].splitlines()
    r = python("import matplotlib; matplotlib.use('Agg')\n" + "\n".join(line[4:] for line in lines), cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert list(tmp_path.iterdir()) == []
