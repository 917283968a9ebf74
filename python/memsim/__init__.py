"""memsim from Python: the simulator of `memsim run`, `info`, `list` and `sweep` as functions.

    import memsim
    r = memsim.run("a100-80gb", "llama3-8b", overrides={"workload.seq_len": 4096})
    r.status, r.peak_bytes("gpu0.hbm"), r.summary["iteration_time_s"]
    r.timeline, r.memory, r.peaks     # pandas DataFrames (lists of dicts without pandas)
    r.write("out/llama")              # the files `memsim run --out out/llama` writes

Each call runs in a child process of its own (SimGrid's engine starts once per process), so
a notebook may call run() as often as it likes; nothing is written unless asked. A call that
`memsim` would refuse raises InputError (exit code 1), UsageError (2) or InternalError (3)
with the message the command prints. docs/python.md has the whole of it.
"""
import builtins
import csv
import io
import json
import os
import tempfile
from pathlib import Path

from . import _memsim

try:
    from ._build import MEMSIM_BINARY
except ImportError:  # a package copied without the file CMake writes
    MEMSIM_BINARY = ""

__version__ = _memsim.version
__all__ = ["run", "info", "sweep", "list", "Result", "Error", "InputError", "OutputError", "UsageError",
           "InternalError"]

_list = builtins.list  # `list` is memsim.list below

try:
    import pandas as _pandas
except ImportError:  # tables come as lists of dicts
    _pandas = None


class Error(Exception):
    """What `memsim` reports and exits with: the message, and the exit code (`exit_code`)."""
    exit_code = 1


class InputError(Error):
    """Bad input: a file, a key, a value (`memsim` exits with 1). The message names where."""
    exit_code = 1


class OutputError(InputError):
    """A file that could not be written (a full disk, a folder that cannot be made)."""
    exit_code = 1


class UsageError(Error):
    """A call that makes no sense as asked (`memsim` exits with 2): an unknown option value."""
    exit_code = 2


class InternalError(Error):
    """memsim's own fault (`memsim` exits with 3): please report it with the call."""
    exit_code = 3


_ERRORS = {"input": InputError, "output": OutputError, "usage": UsageError, "internal": InternalError}


def _failed(values, err, code, signal, what):
    """The exception for a call that did not answer "ok"."""
    notes = err.decode(errors="replace").strip()
    if values and values[0].decode() in _ERRORS:
        return _ERRORS[values[0].decode()](values[1].decode(errors="replace"))
    if signal:
        return InternalError(f"{what}: the worker process ended by signal {signal}" + (f":\n{notes}" if notes else ""))
    return InternalError(f"{what}: the worker process exited with {code} without an answer"
                         + (f":\n{notes}" if notes else ""))


def _document(value, kind):
    """An input of run(): {"name": ..., "text": ...} for the C++ side. A dict is sent as JSON
    text named "(KIND dict)" in messages; a str or a Path is a file or a preset name."""
    if isinstance(value, dict):
        return {"name": f"({kind} dict)", "text": json.dumps(value, indent=2)}
    if isinstance(value, os.PathLike):
        return {"name": os.fspath(value), "text": None}
    if isinstance(value, str):
        return {"name": value, "text": None}
    raise TypeError(f"memsim: the {kind} is a preset name, a path or a dict, got {type(value).__name__}")


def _value_text(value):
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (_list, dict)):
        return json.dumps(value)
    return str(value)


def _sets(overrides):
    """overrides as `--set KEY=VALUE` texts: a dict {KEY: VALUE} or a list of "KEY=VALUE"."""
    if overrides is None:
        return []
    if isinstance(overrides, dict):
        return [f"{k}={_value_text(v)}" for k, v in overrides.items()]
    if isinstance(overrides, str):
        return [overrides]
    return [str(s) for s in overrides]


def _table(text):
    """A CSV text as a DataFrame (pandas) or a list of dicts (values as text)."""
    if _pandas is not None:
        if not text:
            return _pandas.DataFrame()
        return _pandas.read_csv(io.StringIO(text))
    return [dict(row) for row in csv.DictReader(io.StringIO(text))]


class Result:
    """One run's result: `status`, `summary` (summary.json as a dict), `timeline`, `memory`,
    `peaks` (timeline.csv, memory.csv and peak.csv as tables), `notes` (what memsim said on
    the side: import notes, the policy's notes), `explanation` (`memsim run --explain`'s text)."""

    def __init__(self, request, values, notes):
        self._request = request
        summary, timeline, memory, peaks, self.explanation = (v.decode() for v in values)
        self._texts = (timeline, memory, peaks)  # the CSV texts, as the files would hold them
        self.summary_json = summary
        self.summary = json.loads(summary)
        self.notes = [line[len("memsim: "):] if line.startswith("memsim: ") else line
                      for line in notes.splitlines() if line.strip()]
        self._tables = {}

    @property
    def status(self):
        """"ok", or "oom" when the step did not fit (its times are then those of a partial step)."""
        return self.summary["status"]

    @property
    def ok(self):
        return self.status == "ok"

    @property
    def throughput(self):
        """summary.json's throughput (docs/throughput.md): samples and tokens per second, MFU,
        HFU, GPU-hours per 10^9 tokens; None for a step that did not fit."""
        return self.summary.get("throughput")

    def peak_bytes(self, tier, reserved=False):
        """The peak of `tier` ("gpu0.hbm") in bytes: allocated, or reserved by the allocator."""
        tiers = self.summary["tiers"]
        if tier not in tiers:
            raise KeyError(f"no tier '{tier}' in this run (tiers: {', '.join(tiers)})")
        return tiers[tier]["peak_reserved_bytes" if reserved else "peak_allocated_bytes"]

    def _get(self, name, text):
        if name not in self._tables:
            self._tables[name] = _table(text)
        return self._tables[name]

    @property
    def timeline(self):
        """timeline.csv: one row per op, transfer and collective as it ran."""
        return self._get("timeline", self._texts[0])

    @property
    def memory(self):
        """memory.csv: each tier's allocated and reserved bytes over time."""
        return self._get("memory", self._texts[1])

    @property
    def peaks(self):
        """peak.csv: every buffer live at each tier's peak, largest first."""
        return self._get("peaks", self._texts[2])

    def write(self, folder, outputs=None, trace_format="pftrace"):
        """Writes the files `memsim run --out FOLDER` writes (`outputs`: names as --outputs
        takes them, a list or "summary,memory"; default all but events.csv), by running the
        same request again in a worker: the run is deterministic. Returns the files written."""
        if outputs is not None and not isinstance(outputs, str):
            outputs = ",".join(outputs)
        values, err, code, signal = _memsim.write(self._request, os.fspath(folder), outputs or "", trace_format)
        if not values or values[0] != b"ok":
            raise _failed(values, err, code, signal, "memsim.Result.write")
        return [v.decode() for v in values[1:]]

    def __repr__(self):
        s = self.summary
        return (f"<memsim.Result {s['workload']} on {s['platform']} ({s['policy']}): {self.status}, "
                f"step {s['iteration_time_s']:.6g} s>")


def run(platform="a100-40gb", workload="resnet50", policy="none", overrides=None, *, devices=None,
        durations=None, step=None, kineto=None, max_events=1_000_000):
    """`memsim run PLATFORM WORKLOAD --policy POLICY --set KEY=VALUE...` without its files.

    platform, workload: a preset name, a path, or a dict (the YAML document as Python
    values); workload may be a list, one per compute device. overrides: {"workload.batch":
    64, "gpu0.hbm.capacity": "12GiB", "policy.budget": 0.5} or ["KEY=VALUE", ...].
    devices ("gpu0,gpu1"), durations ("measured"/"model"), step and kineto are run's
    --devices, --durations, --step and --kineto. Returns a Result; raises InputError,
    UsageError or InternalError with the message `memsim run` prints.
    """
    workloads = workload if isinstance(workload, (_list, tuple)) else [workload]
    if isinstance(devices, (_list, tuple)):
        devices = ",".join(devices)
    request = {
        "platform": _document(platform, "platform"),
        "workloads": [_document(w, "workload") for w in workloads],
        "policy": str(policy),
        "sets": _sets(overrides),
        "devices": devices,
        "step": step,
        "kineto": os.fspath(kineto) if kineto else "",
        "durations": durations or "",
        "max_events": int(max_events),
    }
    values, err, code, signal = _memsim.run(request)
    if not values or values[0] != b"ok":
        raise _failed(values, err, code, signal, "memsim.run")
    return Result(request, values[1:], err.decode(errors="replace"))


def _cli(args, what):
    """The command line in a worker: its standard output (text); raises as it exits."""
    out, err, code, signal = _memsim.cli([str(a) for a in args], MEMSIM_BINARY)
    if code == 0:
        return out.decode()
    message = err.decode(errors="replace").strip()
    if message.startswith("memsim: "):
        message = message[len("memsim: "):]
    if signal:
        raise InternalError(f"{what}: the worker process ended by signal {signal}" + (f":\n{message}" if message else ""))
    raise {1: InputError, 2: UsageError}.get(code, InternalError)(message)


def _input_path(value, kind, folder):
    """A path or preset name for the command line: a dict is written into `folder`."""
    if isinstance(value, dict):
        path = Path(folder) / f"{kind}.yaml"
        path.write_text(json.dumps(value, indent=2))
        return str(path)
    return os.fspath(value)


def info(target, workload=None, overrides=None, op_kinds=False):
    """`memsim info TARGET --json` as a dict: a workload's parameters, ops, bytes and FLOPs,
    or a device's tiers; with op_kinds=True, `memsim info [DEVICE] WORKLOAD --op-kinds`
    (target the device, or the workload when no device is given)."""
    with tempfile.TemporaryDirectory(prefix="memsim-info-") as tmp:
        args = ["info", _input_path(target, "target", tmp)]
        if workload is not None:
            args.append(_input_path(workload, "workload", tmp))
        for s in _sets(overrides):
            args += ["--set", s]
        if op_kinds:
            args.append("--op-kinds")
        args.append("--json")
        return json.loads(_cli(args, "memsim.info"))


def list(what=None):  # noqa: A001 (memsim.list mirrors `memsim list`)
    """`memsim list --json` as a dict: policies, allocators, models, collective algorithms,
    importers, a workload's parallel keys (each with its scheme) and the parallel schemes, and
    the built-in presets (what: one of policies, allocators, models, collectives, importers,
    parallel, presets)."""
    return json.loads(_cli(["list", *([what] if what else []), "--json"], "memsim.list"))


def sweep(spec, out=None, jobs=None, force=False):
    """`memsim sweep SPEC`: every point of a sweep (a path, or the sweep file as a dict), as
    a table of results.csv's rows (a point that failed has status "error" and the reason in
    its error column). The points run as child `memsim run`s that write folders:
    into `out` when given (kept, and reused by a later call), else into a temporary folder
    removed afterwards."""
    if isinstance(spec, dict):
        # The sweep file is written to a temporary folder: its inputs that are files here
        # (paths are relative to the sweep file) go as absolute paths.
        spec = dict(spec)
        for key in ("devices", "workloads", "policies"):
            if isinstance(spec.get(key), (_list, tuple)):
                spec[key] = [os.path.abspath(v) if isinstance(v, (str, os.PathLike)) and os.path.exists(v)
                             else v for v in spec[key]]
    with tempfile.TemporaryDirectory(prefix="memsim-sweep-") as tmp:
        path = _input_path(spec, "sweep", tmp) if isinstance(spec, dict) else os.fspath(spec)
        folder = os.fspath(out) if out is not None else os.path.join(tmp, "out")
        args = ["sweep", path, "--out", folder]
        if jobs:
            args += ["-j", int(jobs)]
        if force:
            args.append("--force")
        try:
            _cli(args, "memsim.sweep")
        except InputError as e:
            # Points that failed are rows with status "error" and the reason; a sweep that
            # could not run at all raises.
            if "points failed" not in str(e) and "point failed" not in str(e):
                raise
        return _table(Path(folder, "results.csv").read_text())
