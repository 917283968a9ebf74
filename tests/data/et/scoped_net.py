"""The model of scoped-1.0.json, a fixture of layer names from scopes: two residual blocks, a
record_function range of the model's own ("pool"), a head. Recorded with

    /usr/bin/python3 workloads/capture/capture.py --module tests/data/et/scoped_net.py:ScopedNet \\
        --input-shape 12 --batch 4 --name scoped --out /tmp && cp /tmp/scoped.et.json tests/data/et/scoped-1.0.json

capture.py wraps each submodule's forward in a record_function named by its path (blocks.0.fc).
"""
import torch


class Block(torch.nn.Module):
    def __init__(self, width):
        super().__init__()
        self.norm = torch.nn.LayerNorm(width)
        self.fc = torch.nn.Linear(width, width)

    def forward(self, x):
        return x + torch.relu(self.fc(self.norm(x)))


class ScopedNet(torch.nn.Module):
    def __init__(self, width=12, classes=4):
        super().__init__()
        self.blocks = torch.nn.ModuleList([Block(width), Block(width)])
        self.head = torch.nn.Linear(width, classes)

    def forward(self, x):
        for b in self.blocks:
            x = b(x)
        with torch.autograd.profiler.record_function("pool"):
            x = torch.tanh(x) * 2
        return self.head(x)
