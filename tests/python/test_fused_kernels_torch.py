"""The unfused forms of the transformers' fused kernels (fused_layer_norm, fused_softmax,
fused_swiglu, fused_bias_gelu: false, or true for the SwiGLU) against eager PyTorch: what
the eager code saves for the backward, counted by saved_tensors_hooks (each storage once,
parameters left out), against the bytes memsim keeps for the same layer, the activations
still live when the forward pass ends whose last reader is one of that layer's backward ops.

Run with the PyTorch that Debian 12 ships (torch 1.13): its MeanBackward1 also keeps the
mean's input, which PyTorch 2 does not (mean.dim's derivative reads only self.sym_sizes() and
self.sym_numel() there); memsim follows PyTorch 2, so each check adds those inputs for 1.13."""
import json

import pytest

from conftest import memsim

torch = pytest.importorskip("torch", reason="Debian's python3-torch is not installed")
F = torch.nn.functional
KEEPS_MEAN_INPUT = int(torch.__version__.split(".")[0]) < 2


def layer_saves(tmp_path, spec, prefix):
    """Bytes of the activations alive at the end of the forward pass last read by an op
    named under `prefix`."""
    workload = tmp_path / "w.yaml"
    workload.write_text(spec)
    memsim("trace", workload, "-o", tmp_path / "t.json")
    trace = json.loads((tmp_path / "t.json").read_text())
    ops = trace["ops"]
    end = max(i for i, op in enumerate(ops) if op["phase"] == "forward")
    last, made = {}, {}
    for i, op in enumerate(ops):
        for b in op.get("outputs", []):
            made.setdefault(b, i)
        for b in op.get("inputs", []) + op.get("outputs", []) + op.get("updates", []):
            last[b] = i
    return sum(buf["bytes"] for buf in trace["buffers"]
               if buf["category"] == "activation" and made.get(buf["id"], end + 1) <= end
               and last.get(buf["id"], 0) > end and ops[last[buf["id"]]]["name"].startswith(prefix))


def torch_saves(fn, params):
    stored = {}
    skip = {p.data_ptr() for p in params}

    def pack(t):
        if t.data_ptr() not in skip:
            stored[t.data_ptr()] = t.storage().nbytes()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        fn()
    return sum(stored.values())


T, H = 16, 64  # tokens (batch 2 x seq 8) and hidden of the small models below
LLAMA = ("model: llama\nlayers: 2\nhidden: 64\nheads: 4\nintermediate: 96\nvocab: 100\n"
         "seq_len: 8\nbatch: 2\n")
GPT = "model: gpt\nlayers: 2\nhidden: 64\nheads: 4\nseq_len: 8\nbatch: 2\nblocks_only: true\n"
DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16}


@pytest.mark.parametrize("dtype", ["fp32", "bf16"])
def test_eager_llama_rms_norm(tmp_path, dtype):
    dt = DTYPES[dtype]
    x = torch.randn(T, H, dtype=dt, requires_grad=True)
    w = torch.ones(H, dtype=dt, requires_grad=True)

    def llama_rms_norm():  # transformers' LlamaRMSNorm.forward
        hidden = x.to(torch.float32)
        variance = hidden.pow(2).mean(-1, keepdim=True)
        hidden = hidden * torch.rsqrt(variance + 1e-6)
        return w * hidden.to(dt)

    ours = layer_saves(tmp_path, LLAMA + f"dtype: {dtype}\nfused_layer_norm: false\n",
                       "model.layers.1.input_layernorm.")
    squares = T * H * 4 if KEEPS_MEAN_INPUT else 0
    assert torch_saves(llama_rms_norm, [w]) == ours + squares


@pytest.mark.parametrize("dtype", ["fp32", "bf16"])
def test_eager_bert_layer_norm(tmp_path, dtype):
    dt = DTYPES[dtype]
    x = torch.randn(T, H, dtype=dt, requires_grad=True)
    w = torch.ones(H, dtype=dt, requires_grad=True)
    b = torch.zeros(H, dtype=dt, requires_grad=True)

    def bert_layer_norm():  # pytorch-pretrained-BERT's BertLayerNorm.forward
        u = x.mean(-1, keepdim=True)
        s = (x - u).pow(2).mean(-1, keepdim=True)
        y = (x - u) / torch.sqrt(s + 1e-12)
        return w * y + b

    ours = layer_saves(tmp_path, GPT + f"dtype: {dtype}\nfused_layer_norm: false\n", "transformer.h.1.ln_1.")
    inputs = 2 * T * H * x.element_size() if KEEPS_MEAN_INPUT else 0  # x and the squares
    assert torch_saves(bert_layer_norm, [w, b]) == ours + inputs


def test_hugging_face_swiglu_and_the_fused_one(tmp_path):
    f = 96
    x = torch.randn(T, H, requires_grad=True)
    gate, up, down = (torch.randn(f, H, requires_grad=True), torch.randn(f, H, requires_grad=True),
                      torch.randn(H, f, requires_grad=True))
    hf = torch_saves(lambda: F.linear(F.silu(F.linear(x, gate)) * F.linear(x, up), down), [gate, up, down])
    assert hf == layer_saves(tmp_path, LLAMA, "model.layers.1.mlp.")

    class SwiGLU(torch.autograd.Function):  # Megatron's SwiGLUFunction: saves its input alone
        @staticmethod
        def forward(ctx, y):
            ctx.save_for_backward(y)
            g, u = torch.chunk(y, 2, -1)
            return F.silu(g) * u

        @staticmethod
        def backward(ctx, grad):
            raise NotImplementedError

    gate_up = torch.randn(2 * f, H, requires_grad=True)
    fused = torch_saves(lambda: F.linear(SwiGLU.apply(F.linear(x, gate_up)), down), [gate_up, down])
    assert fused == layer_saves(tmp_path, LLAMA + "fused_swiglu: true\n", "model.layers.1.mlp.")


def test_bias_add_before_the_gelu(tmp_path):
    f = 4 * H
    x = torch.randn(T, H, requires_grad=True)
    w1, b1, w2 = (torch.randn(f, H, requires_grad=True), torch.randn(f, requires_grad=True),
                  torch.randn(H, f, requires_grad=True))
    unfused = torch_saves(lambda: F.linear(F.gelu(F.linear(x, w1) + b1), w2), [w1, b1, w2])
    assert unfused == torch_saves(lambda: F.linear(F.gelu(F.linear(x, w1, b1)), w2), [w1, b1, w2])
    spec = GPT + "dropout: 0\nfused_bias_gelu: false\n"
    assert unfused == layer_saves(tmp_path, spec, "transformer.h.1.mlp.")


def test_megatron_unfused_softmax(tmp_path):
    b, a, s = 2, 4, 8
    scores = torch.randn(b, a, s, s, dtype=torch.bfloat16, requires_grad=True)
    mask = torch.triu(torch.ones(1, 1, s, s, dtype=torch.bool), 1)

    def forward_torch_softmax():  # FusedScaleMaskSoftmax.forward_torch_softmax, softmax_in_fp32
        t = scores.float() * 0.5
        t.masked_fill_(mask, -10000.0)
        return torch.nn.Softmax(dim=-1)(t).bfloat16()

    # Without dropout and before probs v: the fp32 probabilities and the mask (memsim's
    # attention_mask input, seq x seq bool), and the scale as a 0-d tensor eager code keeps.
    scale_scalar = 8
    ours = layer_saves(tmp_path, GPT + "dtype: bf16\ndropout: 0\nfused_softmax: false\n",
                       "transformer.h.1.attn.softmax.")
    assert ours == b * a * s * s * 4
    assert torch_saves(forward_torch_softmax, []) == ours + s * s + scale_scalar
