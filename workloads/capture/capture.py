#!/usr/bin/python3
"""Record one real training step as ground truth for memsim.

    /usr/bin/python3 workloads/capture/capture.py --model mlp --batch 64 --out workloads/traces

runs warm-up steps, then writes, for one more step of the same shape:

  NAME.et.json        the PyTorch Execution Trace (ExecutionTraceObserver, or the older
                      ExecutionGraphObserver of torch 1.13), each aten node with its duration
                      in a profiled run of the same step (`inclusive_dur`, microseconds)
  NAME.measured.json  what the step really did: the tensor bytes resident when it starts
                      (parameters, gradients, optimizer state, the batch), the peak reached
                      during it, its time (uninstrumented), and each aten op's duration

The peak is sampled before and after every aten op through a TorchDispatchMode, from the C
heap's bytes in use (glibc mallinfo2: tensors are allocated there; Python objects live in
pymalloc arenas outside it). The C heap's growth during the step is added to the exactly
counted resident bytes. The mmap threshold is pinned (MALLOC_MMAP_THRESHOLD_) so glibc's
bookkeeping does not move under the measurement; the script re-runs itself to set it.

Models: mlp, lstm, transformer (built in), or any torchvision.models name (resnet18, ...)
when torchvision is installed. Optimizer: SGD with momentum, so optimizer state exists.

Your own nn.Module instead of --model: --module names a class, or a function that returns a
module, as FILE.py:NAME or as an importable PACKAGE.MODULE:NAME; --kwargs its keyword
arguments as a JSON object; --input-shape one sample's shape (the batch is put in front);
--input-dtype int64 for token ids (drawn below --input-high). The loss is cross-entropy over
the output's last dimension against random labels (--loss sum: the output's sum, for a module
whose output is not logits).

    capture.py --module mymodels.py:TinyNet --kwargs '{"width": 64}' --input-shape 784 --batch 32
    capture.py --module mypkg.models:make_encoder --input-shape 128 --input-dtype int64 \
        --input-high 32000 --batch 8 --name encoder-b8

Layers: in the recorded step each submodule's forward runs inside a record_function named by
its path in the model (`encoder.layers.0.self_attn`), as are the model's own record_function
ranges; memsim names the ops under them, and what they allocate, after the nearest one
(docs/trace-format.md). --no-scopes leaves them out.
"""
import argparse
import ctypes
import json
import os
import sys
import time

THRESHOLD = "131072"
if os.environ.get("MALLOC_MMAP_THRESHOLD_") != THRESHOLD:
    env = dict(os.environ, MALLOC_MMAP_THRESHOLD_=THRESHOLD, OMP_NUM_THREADS="1")
    os.execve(sys.executable, [sys.executable] + sys.argv, env)

import torch  # noqa: E402
from torch.utils._python_dispatch import TorchDispatchMode  # noqa: E402


class _MallInfo2(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in
                ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks",
                 "uordblks", "fordblks", "keepcost")]


_libc = ctypes.CDLL("libc.so.6")
_libc.mallinfo2.restype = _MallInfo2


def heap_in_use():
    m = _libc.mallinfo2()
    return m.uordblks + m.hblkhd


class MLP(torch.nn.Module):
    def __init__(self, width=1024, depth=4, classes=10):
        super().__init__()
        layers, d = [], 784
        for _ in range(depth):
            layers += [torch.nn.Linear(d, width), torch.nn.ReLU()]
            d = width
        layers.append(torch.nn.Linear(d, classes))
        self.net = torch.nn.Sequential(*layers)

    def forward(self, x):
        return self.net(x)


class LSTMClassifier(torch.nn.Module):
    def __init__(self, vocab=1000, embed=128, hidden=256, classes=10):
        super().__init__()
        self.embed = torch.nn.Embedding(vocab, embed)
        self.lstm = torch.nn.LSTM(embed, hidden, num_layers=2, batch_first=True)
        self.head = torch.nn.Linear(hidden, classes)

    def forward(self, x):
        out, _ = self.lstm(self.embed(x))
        return self.head(out[:, -1])


class Encoder(torch.nn.Module):
    def __init__(self, vocab=1000, d=256, heads=4, layers=2, classes=10):
        super().__init__()
        self.embed = torch.nn.Embedding(vocab, d)
        layer = torch.nn.TransformerEncoderLayer(d, heads, dim_feedforward=4 * d, dropout=0.0,
                                                 batch_first=True)
        self.encoder = torch.nn.TransformerEncoder(layer, layers)
        self.head = torch.nn.Linear(d, classes)

    def forward(self, x):
        return self.head(self.encoder(self.embed(x)).mean(dim=1))


def generator_spec(model, batch):
    """The memsim workload spec of the same model, where a generator exists (else None)."""
    if model == "mlp":
        return {"model": "mlp", "layers": [784, 1024, 1024, 1024, 1024, 10], "batch": batch,
                "optimizer": "momentum"}
    if model in ("resnet18", "resnet34", "resnet50"):
        return {"model": "resnet", "depth": int(model[6:]), "image_size": 64, "num_classes": 10,
                "batch": batch, "optimizer": "momentum"}
    if model == "mobilenet_v2":
        return {"model": "mobilenet_v2", "image_size": 64, "num_classes": 10, "batch": batch,
                "optimizer": "momentum"}
    return None


def build(model, batch, seq):
    g = torch.Generator().manual_seed(0)
    if model == "mlp":
        return MLP(), torch.randn(batch, 784, generator=g)
    if model == "lstm":
        return LSTMClassifier(), torch.randint(0, 1000, (batch, seq), generator=g)
    if model == "transformer":
        return Encoder(), torch.randint(0, 1000, (batch, seq), generator=g)
    import torchvision  # noqa: F401  (only for the torchvision models)
    net = getattr(torchvision.models, model)(num_classes=10)
    return net, torch.randn(batch, 3, 64, 64, generator=g)


def load_module(spec, kwargs):
    """The nn.Module that --module SPEC names, built with kwargs: SPEC is FILE.py:NAME or
    PACKAGE.MODULE:NAME, NAME a class or a function returning a module."""
    import importlib
    import importlib.util
    where, sep, attr = spec.rpartition(":")
    if not sep or not where or not attr:
        sys.exit(f"capture.py: --module {spec!r}: expected FILE.py:NAME or PACKAGE.MODULE:NAME")
    if where.endswith(".py") or os.sep in where:
        if not os.path.isfile(where):
            sys.exit(f"capture.py: --module {spec!r}: no file {where}")
        sys.path.insert(0, os.path.dirname(os.path.abspath(where)))
        loader = importlib.util.spec_from_file_location(os.path.splitext(os.path.basename(where))[0], where)
        mod = importlib.util.module_from_spec(loader)
        loader.loader.exec_module(mod)
    else:
        sys.path.insert(0, os.getcwd())
        try:
            mod = importlib.import_module(where)
        except ImportError as e:
            sys.exit(f"capture.py: --module {spec!r}: cannot import {where}: {e}")
    if not hasattr(mod, attr):
        names = sorted(n for n in vars(mod) if not n.startswith("_"))
        sys.exit(f"capture.py: --module {spec!r}: {where} has no {attr!r}; it has: {', '.join(names)}")
    try:
        net = getattr(mod, attr)(**kwargs)
    except TypeError as e:
        sys.exit(f"capture.py: --module {spec!r} with --kwargs {json.dumps(kwargs)}: {e}")
    if not isinstance(net, torch.nn.Module):
        sys.exit(f"capture.py: --module {spec!r}: {attr}(...) gave a {type(net).__name__}, not a torch.nn.Module")
    return net


def user_input(batch, shape, dtype, high):
    """A batch of one sample's shape (\"784\", \"3,64,64\"), floats or int64 ids below high."""
    try:
        dims = [int(d) for d in shape.split(",")]
        if any(d <= 0 for d in dims):
            raise ValueError
    except ValueError:
        sys.exit(f"capture.py: --input-shape {shape!r}: expected positive sizes separated by commas (3,64,64)")
    g = torch.Generator().manual_seed(0)
    if dtype == "int64":
        return torch.randint(0, high, (batch, *dims), generator=g)
    return torch.randn(batch, *dims, generator=g)


class OpSampler(TorchDispatchMode):
    """Samples the heap around every aten op and times it."""

    def __init__(self):
        super().__init__()
        self.peak = heap_in_use()
        self.peak_op = None  # index into ops of the op during or after which the peak was seen
        self.ops = []

    def sample(self):
        h = heap_in_use()
        if h > self.peak:
            self.peak, self.peak_op = h, len(self.ops)

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.sample()
        t0 = time.perf_counter()
        out = func(*args, **(kwargs or {}))
        t1 = time.perf_counter()
        self.sample()
        self.ops.append({"op": "aten::" + func.__name__.split(".")[0], "seconds": t1 - t0})
        return out


def annotate_durations(et_path, step):
    """Profiles one more step and writes each aten node's duration into the trace as
    `inclusive_dur` (microseconds, as Chakra's trace linker names it). The profiler and the
    observer see the same ops in the same order: the k-th profiled call of an op is the k-th
    node of that name. Names whose counts differ are left without durations."""
    from torch.autograd.profiler import profile
    with profile() as prof:
        step()
    calls = {}
    for e in sorted(prof.function_events, key=lambda e: (e.time_range.start, e.id)):
        if e.name.startswith("aten::"):
            calls.setdefault(e.name, []).append(e.time_range.end - e.time_range.start)
    with open(et_path) as f:
        et = json.load(f)
    nodes = sorted(et["nodes"], key=lambda n: n["id"])
    count = {}
    for n in nodes:
        count[n["name"]] = count.get(n["name"], 0) + 1
    seen = {}
    for n in nodes:
        name = n["name"]
        if name in calls and len(calls[name]) == count[name]:
            n["inclusive_dur"] = calls[name][seen.get(name, 0)]
            seen[name] = seen.get(name, 0) + 1
    skipped = sorted(k for k in count if k.startswith("aten::") and k not in seen)
    if skipped:
        print(f"no durations for {', '.join(skipped)} (the profiler saw other counts)", file=sys.stderr)
    with open(et_path, "w") as f:  # one node per line
        head = {k: v for k, v in et.items() if k != "nodes"}
        f.write("{\n" + "".join(f"  {json.dumps(k)}: {json.dumps(v)},\n" for k, v in head.items()))
        f.write('  "nodes": [\n' + ",\n".join("    " + json.dumps(n) for n in et["nodes"]) + "\n  ]\n}\n")


def module_scopes(net):
    """Opens a record_function named by each submodule's path in the model around its
    forward; returns the hook handles (remove them to stop)."""
    from torch.autograd.profiler import record_function
    open_ranges, handles = [], []
    for path, module in net.named_modules():
        if not path:
            continue  # the model itself: its ops are in no layer

        def enter(module, args, path=path):
            r = record_function(path)
            r.__enter__()
            open_ranges.append(r)

        def leave(module, args, out):
            open_ranges.pop().__exit__(None, None, None)

        handles.append(module.register_forward_pre_hook(enter))
        handles.append(module.register_forward_hook(leave))
    return handles


def storage_bytes(tensors):
    seen, total = set(), 0
    for t in tensors:
        if t is None:
            continue
        key = t.storage().data_ptr()
        if key in seen:
            continue
        seen.add(key)
        total += t.storage().nbytes()
    return total


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    which = ap.add_mutually_exclusive_group(required=True)
    which.add_argument("--model", help="mlp, lstm, transformer or a torchvision.models name")
    which.add_argument("--module", help="your own nn.Module: FILE.py:NAME or PACKAGE.MODULE:NAME (a class "
                       "or a function returning a module)")
    ap.add_argument("--kwargs", default="{}", help="with --module: its keyword arguments, a JSON object")
    ap.add_argument("--input-shape", help="with --module: one sample's shape, sizes separated by commas (784, 3,64,64)")
    ap.add_argument("--input-dtype", choices=["float32", "int64"], default="float32",
                    help="with --module: the input's type (int64: token ids) (default float32)")
    ap.add_argument("--input-high", type=int, default=1000, help="with --input-dtype int64: ids are below this (default 1000)")
    ap.add_argument("--loss", choices=["cross_entropy", "sum"], default="cross_entropy",
                    help="cross_entropy over the output's last dimension (default), or the output's sum")
    ap.add_argument("--batch", type=int, required=True)
    ap.add_argument("--seq", type=int, default=32, help="sequence length (lstm, transformer)")
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--name", help="output name (default MODEL-bBATCH)")
    ap.add_argument("--out", default="workloads/traces")
    ap.add_argument("--no-scopes", action="store_true",
                    help="record no record_function range per submodule (memsim then has no layer names)")
    a = ap.parse_args()
    torch.manual_seed(0)
    torch.set_num_threads(1)
    if a.module:
        try:
            kwargs = json.loads(a.kwargs)
        except json.JSONDecodeError as e:
            sys.exit(f"capture.py: --kwargs {a.kwargs!r}: not JSON ({e})")
        if not isinstance(kwargs, dict):
            sys.exit(f"capture.py: --kwargs {a.kwargs!r}: expected a JSON object ({{\"width\": 64}})")
        if not a.input_shape:
            sys.exit("capture.py: --module needs --input-shape (one sample's shape, e.g. 784 or 3,64,64)")
        net = load_module(a.module, kwargs)
        x = user_input(a.batch, a.input_shape, a.input_dtype, a.input_high)
        label = a.module.rpartition(":")[2]
    else:
        for flag in ("input_shape",):
            if getattr(a, flag):
                sys.exit(f"capture.py: --{flag.replace('_', '-')} goes with --module, not --model")
        net, x = build(a.model, a.batch, a.seq)
        label = a.model
    name = a.name or f"{label}-b{a.batch}"
    with torch.no_grad():
        out = net(x)
    if a.loss == "cross_entropy" and (out.dim() < 2 or out.shape[0] != a.batch):
        sys.exit(f"capture.py: the model's output has shape {tuple(out.shape)}: cross-entropy needs "
                 f"(batch={a.batch}, classes); give --loss sum")
    classes = out.shape[-1] if out.dim() >= 2 else 1
    del out
    y = torch.randint(0, classes, (a.batch,), generator=torch.Generator().manual_seed(1))
    opt = torch.optim.SGD(net.parameters(), lr=0.01, momentum=0.9)

    def step():
        opt.zero_grad()
        out = net(x)
        loss = torch.nn.functional.cross_entropy(out, y) if a.loss == "cross_entropy" else out.sum()
        loss.backward()
        opt.step()

    for _ in range(a.warmup):
        step()
    os.makedirs(a.out, exist_ok=True)
    et_path = os.path.join(a.out, name + ".et.json")
    Observer = getattr(torch.profiler, "ExecutionTraceObserver", None)
    if Observer is None:
        Observer = torch.profiler.ExecutionGraphObserver
    scopes = [] if a.no_scopes else module_scopes(net)
    obs = Observer()
    obs.register_callback(et_path)
    obs.start()
    step()
    obs.stop()
    obs.unregister_callback()

    annotate_durations(et_path, step)
    for h in scopes:
        h.remove()

    # Step time, uninstrumented: the median of three.
    times = []
    for _ in range(3):
        t0 = time.perf_counter()
        step()
        times.append(time.perf_counter() - t0)
    step_s = sorted(times)[1]

    # The same step again, measured (the observer's own bookkeeping stays out of it).
    resident = [p for p in net.parameters()] + [p.grad for p in net.parameters()]
    for state in opt.state.values():
        resident += [v for v in state.values() if torch.is_tensor(v)]
    resident += [x, y]
    resident_bytes = storage_bytes(resident)
    sampler = OpSampler()
    start_heap = heap_in_use()
    with sampler:
        step()
    measured = {
        "model": a.model or a.module,
        "batch": a.batch,
        "torch": torch.__version__,
        "device": "cpu",
        "trace": os.path.basename(et_path),
        "generator": generator_spec(a.model, a.batch) if a.model else None,
        "resident_start_bytes": resident_bytes,
        "peak_bytes": resident_bytes + max(0, sampler.peak - start_heap),
        "peak_at_op": sampler.peak_op,
        "step_s": step_s,
        "ops": sampler.ops,
    }
    with open(os.path.join(a.out, name + ".measured.json"), "w") as f:
        json.dump(measured, f, indent=1)
        f.write("\n")
    print(f"{name}: resident {resident_bytes} B, peak {measured['peak_bytes']} B, "
          f"{len(sampler.ops)} aten ops, step {step_s * 1e3:.1f} ms -> {et_path}")


if __name__ == "__main__":
    main()
