"""workloads/capture/capture.py on a user's own nn.Module (--module FILE.py:NAME or
PACKAGE.MODULE:NAME, --kwargs, --input-shape): the trace and the measured step are written,
the resident bytes are the module's parameters, gradients and momentum and the batch to the
byte, memsim imports the trace, and a bad --module is a located error with exit 1."""
import json
import subprocess
import sys

import pytest

from conftest import REPO, memsim

pytest.importorskip("torch", reason="Debian's python3-torch is not installed")

CAPTURE = REPO / "workloads" / "capture" / "capture.py"

TINY = '''
import torch


class TinyNet(torch.nn.Module):
    def __init__(self, inputs=16, width=8, classes=3):
        super().__init__()
        self.fc1 = torch.nn.Linear(inputs, width)
        self.fc2 = torch.nn.Linear(width, classes)

    def forward(self, x):
        return self.fc2(torch.relu(self.fc1(x)))


def make_tiny(width=4):
    return TinyNet(width=width)


NOT_A_MODULE = 3
'''


def capture(*args, cwd=REPO, env=None):
    return subprocess.run([sys.executable, str(CAPTURE), *map(str, args)], cwd=cwd, capture_output=True,
                          text=True, env=env)


@pytest.fixture
def tiny(tmp_path):
    path = tmp_path / "tinymodels.py"
    path.write_text(TINY)
    return path


def test_own_module_from_a_file(tiny, tmp_path):
    out = tmp_path / "traces"
    r = capture("--module", f"{tiny}:TinyNet", "--kwargs", '{"width": 8}', "--input-shape", "16",
                "--batch", "4", "--warmup", "1", "--out", out)
    assert r.returncode == 0, r.stderr
    measured = json.loads((out / "TinyNet-b4.measured.json").read_text())
    assert measured["model"] == f"{tiny}:TinyNet" and measured["generator"] is None
    # fc1 16x8 + 8, fc2 8x3 + 3 = 163 fp32 parameters; their gradients and SGD momentum the
    # same; the batch 4x16 fp32 and 4 int64 labels.
    params = (16 * 8 + 8 + 8 * 3 + 3) * 4
    assert measured["resident_start_bytes"] == 3 * params + 4 * 16 * 4 + 4 * 8
    et = json.loads((out / "TinyNet-b4.et.json").read_text())
    assert any(n["name"] == "aten::addmm" for n in et["nodes"])
    # memsim imports it: the weights it finds are the module's.
    s = json.loads(memsim("run", "a100-40gb", out / "TinyNet-b4.et.json", "--json", "--out", tmp_path / "run").stdout)
    assert s["status"] == "ok"


def test_own_module_from_a_package_factory(tiny, tmp_path):
    out = tmp_path / "traces"
    r = capture("--module", "tinymodels:make_tiny", "--kwargs", '{"width": 5}', "--input-shape", "16",
                "--batch", "2", "--warmup", "1", "--name", "tiny", "--out", out, cwd=tiny.parent)
    assert r.returncode == 0, r.stderr
    measured = json.loads((out / "tiny.measured.json").read_text())
    params = (16 * 5 + 5 + 5 * 3 + 3) * 4
    assert measured["resident_start_bytes"] == 3 * params + 2 * 16 * 4 + 2 * 8


@pytest.mark.parametrize("args, message", [
    (["--module", "{tiny}:Missing"], "has no 'Missing'; it has: NOT_A_MODULE, TinyNet, make_tiny, torch"),
    (["--module", "{tiny}:NOT_A_MODULE"], "'int' object is not callable"),
    (["--module", "nowhere.py:Net"], "--module 'nowhere.py:Net': no file nowhere.py"),
    (["--module", "tinymodels"], "expected FILE.py:NAME or PACKAGE.MODULE:NAME"),
    (["--module", "{tiny}:TinyNet", "--kwargs", '{"depth": 3}'], "unexpected keyword argument 'depth'"),
    (["--module", "{tiny}:TinyNet", "--kwargs", "[1]"], "expected a JSON object"),
    (["--module", "{tiny}:TinyNet", "--input-shape", "16,x"], "--input-shape '16,x': expected positive sizes"),
    (["--module", "{tiny}:TinyNet", "--input-shape", "16", "--batch", "2", "--warmup", "0"], None),
])
def test_bad_module_arguments(tiny, tmp_path, args, message):
    args = [a.replace("{tiny}", str(tiny)) for a in args]
    if "--input-shape" not in args:
        args += ["--input-shape", "16"]
    if "--batch" not in args:
        args += ["--batch", "2"]
    r = capture(*args, "--out", tmp_path / "o")
    if message is None:
        assert r.returncode == 0, r.stderr
        return
    assert r.returncode == 1, r.stderr
    assert message in r.stderr, r.stderr
    assert r.stderr.startswith("capture.py: --")
