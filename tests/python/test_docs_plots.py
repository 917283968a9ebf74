"""The examples of docs/plots.md and of README's "Seeing the results" run, in order, and the
pictures they show are in the repository."""
import re
import subprocess
import sys

import pytest

from conftest import REPO, memsim_binary

COMMAND = re.compile(r"^    (build/memsim .*|/usr/bin/python3 analysis/.*)$")


def commands(text):
    return [m.group(1) for m in map(COMMAND.match, text.splitlines()) if m]


def readme_section():
    text = (REPO / "README.md").read_text()
    start = text.index("## Seeing the results")
    return text[start:text.index("\n## ", start + 1)]


def run_in_scratch(cmds, tmp_path):
    for sub in ("configs", "workloads", "analysis", "docs"):
        (tmp_path / sub).symlink_to(REPO / sub)
    for cmd in cmds:
        shell = cmd.replace("build/memsim", str(memsim_binary()), 1).replace("/usr/bin/python3", sys.executable, 1)
        r = subprocess.run(["bash", "-c", shell], cwd=tmp_path, capture_output=True, text=True,
                           env={"PATH": "/usr/bin:/bin", "PYTHONDONTWRITEBYTECODE": "1"})
        assert r.returncode == 0, f"{cmd}\n{r.stderr}"


def test_plots_md_examples_run(tmp_path):
    cmds = commands((REPO / "docs" / "plots.md").read_text())
    assert sum(c.startswith("/usr/bin/python3") for c in cmds) >= 7
    run_in_scratch(cmds, tmp_path)
    for f in ["none/memory.png", "memory-compare.png", "vdnn/timeline.png", "vdnn/timeline-start.png",
              "sweep/pareto.png", "sweep/fits.png", "ipu/tiles.png", "vdnn/memory_snapshot.pickle",
              "report.html", "compare.html", "sweep.html", "vdnn/trace.pftrace", "vdnn-json/trace.json", "none/events.csv"]:
        assert (tmp_path / "out" / f).exists(), f


def test_readme_examples_run(tmp_path):
    cmds = commands(readme_section())
    assert len(cmds) >= 4
    run_in_scratch(cmds, tmp_path)
    assert (tmp_path / "report.html").exists()


@pytest.mark.parametrize("doc", ["docs/plots.md", "README.md"])
def test_pictures_are_in_the_repository(doc):
    text = (REPO / doc).read_text()
    pictures = re.findall(r"!\[[^\]]*\]\(([^)]+\.png)\)", text)
    assert pictures
    for p in pictures:
        path = (REPO / doc).parent / p
        assert path.exists(), f"{doc} shows {p}, which is not there"
        assert path.stat().st_size < 200_000, f"{p} is large ({path.stat().st_size} bytes)"
