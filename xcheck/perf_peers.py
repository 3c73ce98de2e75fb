# PyTorch peers of `bnn-bench perf`: the same training step as its rows, timed in the same run so
# that the report gives ratios measured on one machine. Not part of the library: CI neither runs
# nor tests it.
#
# set-up: python3 -m venv ~/.venvs/peer && ~/.venvs/peer/bin/pip install torch bayesian-torch
# usage (from the repository root):
#   ~/.venvs/peer/bin/python xcheck/perf_peers.py KIND NET [THREADS]
#   KIND: bayesian_torch (mean-field Gaussian layers of bayesian-torch, LinearReparameterization
#         and Conv2dReparameterization with their defaults: one weight sample per step, the
#         closed-form KL over N = 60 000) | torch (PyTorch's deterministic nn.Linear/nn.Conv2d)
#   NET: mlp (784-400-400-10, batch 128) | lenet5 (conv 20x5x5/2, conv 50x5x5/2, 800-500-10,
#        batch 100, 28x28 inputs): bnn-bench's two nets, ReLU between layers
#   THREADS: torch's threads (default 2)
# The step: loss = mean (o - y)^2 [+ KL/N], Adam (lr 1e-3), on random inputs and targets; 5
# warm-up steps, then 100 timed, printed as `ms/step`.
import sys
import time

import torch
import torch.nn.functional as F

N_TRAIN = 60000.0


def layers(kind, net):
    """The net's layers as (module, is_conv) pairs."""
    if kind == "bayesian_torch":
        from bayesian_torch.layers import Conv2dReparameterization as Conv
        from bayesian_torch.layers import LinearReparameterization as Linear

        conv = lambda i, o: Conv(i, o, 5, stride=2)
    else:
        Linear = torch.nn.Linear
        conv = lambda i, o: torch.nn.Conv2d(i, o, 5, stride=2)
    if net == "mlp":
        convs, widths = [], [784, 400, 400, 10]
    else:
        convs, widths = [conv(1, 20), conv(20, 50)], [800, 500, 10]
    dense = [Linear(a, b) for a, b in zip(widths, widths[1:])]
    return convs, dense


def main():
    kind, net = sys.argv[1], sys.argv[2]
    if kind not in ("bayesian_torch", "torch") or net not in ("mlp", "lenet5"):
        sys.exit("usage: perf_peers.py bayesian_torch|torch mlp|lenet5 [THREADS]")
    torch.set_num_threads(int(sys.argv[3]) if len(sys.argv) > 3 else 2)
    torch.manual_seed(0)
    convs, dense = layers(kind, net)
    bayesian = kind == "bayesian_torch"
    params = [p for m in convs + dense for p in m.parameters()]
    opt = torch.optim.Adam(params, 1e-3)
    batch = 128 if net == "mlp" else 100
    x = torch.randn(batch, 784) if net == "mlp" else torch.randn(batch, 1, 28, 28)
    y = torch.randn(batch, 10)

    def apply(m, h):
        # bayesian-torch's layers return (output, KL) by default.
        return m(h) if bayesian else (m(h), 0.0)

    def step():
        h, kl = x, 0.0
        for c in convs:
            h, k = apply(c, h)
            h, kl = F.relu(h), kl + k
        h = h.flatten(1)
        for i, d in enumerate(dense):
            h, k = apply(d, h)
            kl = kl + k
            if i < len(dense) - 1:
                h = F.relu(h)
        loss = ((h - y) ** 2).mean() + kl / N_TRAIN
        opt.zero_grad()
        loss.backward()
        opt.step()

    for _ in range(5):
        step()
    n = 100
    t = time.time()
    for _ in range(n):
        step()
    el = time.time() - t
    print(f"{kind} {net}: {n} steps: {el:.3f}s, {el * 1000 / n:.2f} ms/step")


if __name__ == "__main__":
    main()
