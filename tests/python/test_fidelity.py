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
