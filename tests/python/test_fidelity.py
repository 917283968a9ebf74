"""analysis/fidelity.py: one row per shipped capture, each within 5% or explained."""
import re
import subprocess
import sys

from conftest import ANALYSIS, REPO, memsim_binary


def test_fidelity_table_has_every_capture():
    r = subprocess.run([sys.executable, str(ANALYSIS / "fidelity.py"), "--memsim", str(memsim_binary()),
                        "--format", "markdown"], cwd=REPO, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    rows = [l for l in r.stdout.splitlines() if l.startswith("| ") and not l.startswith("| trace")]
    names = sorted(p.name[: -len(".measured.json")] for p in (REPO / "workloads" / "traces").glob("*.measured.json"))
    assert sorted(l.split("|")[1].strip() for l in rows) == names
    doc = (REPO / "docs" / "fidelity.md").read_text()
    for l in rows:
        cells = [c.strip() for c in l.strip("|").split("|")]
        error = float(cells[5])
        assert abs(error) <= 5 or f"### {cells[0]}" in doc, l
        assert re.fullmatch(r"[+-]\d+\.\d\d", cells[5])


def test_calibration_study_matches_the_document():
    """The study's tables come from the code: its output is what docs/fidelity.md shows, and
    each absolute fit predicts the step of the trace it was fitted on within 10%."""
    r = subprocess.run([sys.executable, str(ANALYSIS / "calibration_study.py"), "--memsim", str(memsim_binary())],
                       cwd=REPO, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    doc = (REPO / "docs" / "fidelity.md").read_text()
    assert r.stdout.strip() in doc
    absolute = r.stdout.split("`--residuals absolute`")[1].split("**Left out")[0]
    rows = [l for l in absolute.splitlines() if l.startswith("| ") and not l.startswith("| fitted on")]
    names = [c.strip() for c in absolute.splitlines()[2].strip("|").split("|")][1:]
    assert len(rows) == len(names) >= 5
    for i, row in enumerate(rows):
        cells = [c.strip() for c in row.strip("|").split("|")]
        assert cells[0] == names[i]
        error = float(re.search(r"\(([+-]\d+)%\)", cells[1 + i]).group(1))
        assert abs(error) <= 10, row
