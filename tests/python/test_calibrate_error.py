"""calibrate says what its per-op error is: the mean, the median and the time-weighted error
of the fitted ops, and why the mean is large when a few short ops make it so, with figures
that agree with each other."""
import re

from conftest import memsim


def test_calibrate_explains_its_error_per_op():
    r = memsim("calibrate", "cpu", "workloads/traces/resnet18-b8.et.json")
    out = r.stdout
    mean = float(re.search(r"error per op: fitted ([\d.]+)%", out).group(1))
    m = re.search(r"fitted: median ([\d.]+)%, ([\d.]+)% weighted by measured time, total time ([+-][\d.]+)%", out)
    assert m, out
    median, weighted = float(m.group(1)), float(m.group(2))
    assert median <= mean  # a few large errors pull the mean above the median
    why = re.search(r"the mean is large because (\d+) of the (\d+) fitted ops are off by more than 100%: "
                    r"they average (\S+ \S+) \(the fitted ops (\S+ \S+)\) and hold ([\d.]+)% of the measured time", out)
    assert why, out
    assert mean > 2 * weighted
    off, fitted = int(why.group(1)), int(why.group(2))
    assert 0 < off <= fitted
    assert f"{fitted} ops fitted" in out
    assert float(why.group(5)) < 100
