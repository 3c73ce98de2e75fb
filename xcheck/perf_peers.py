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
#   ~/.venvs/peer/bin/python xcheck/perf_peers.py epoch lenet5 THREADS MNIST_DIR
#   one MNIST training epoch of bayesian-torch's mean-field LeNet5 (`bnn-bench perf-epoch`):
#   the 60 000 training images of MNIST_DIR (IDX, gzipped), normalised by MNIST's mean and
#   standard deviation, shuffled, batch 100, cross-entropy + KL/60 000, Adam (lr 1e-3); prints
#   the loop's `s/epoch` (loading excluded).
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


def forward(convs, dense, h, bayesian):
    """The net's output and its layers' summed KL (0 for PyTorch's deterministic layers)."""

    def apply(m, h):
        # bayesian-torch's layers return (output, KL) by default.
        return m(h) if bayesian else (m(h), 0.0)

    kl = 0.0
    for c in convs:
        h, k = apply(c, h)
        h, kl = F.relu(h), kl + k
    h = h.flatten(1)
    for i, d in enumerate(dense):
        h, k = apply(d, h)
        kl = kl + k
        if i < len(dense) - 1:
            h = F.relu(h)
    return h, kl


def idx(path):
    """The array of a gzipped IDX file, as a uint8 tensor of its shape."""
    import gzip

    with gzip.open(path, "rb") as f:
        data = f.read()
    dims = data[3]
    shape = [int.from_bytes(data[4 + 4 * i : 8 + 4 * i], "big") for i in range(dims)]
    return torch.frombuffer(bytearray(data[4 + 4 * dims :]), dtype=torch.uint8).reshape(shape)


def epoch(threads, folder):
    """One training epoch of the mean-field LeNet5 on MNIST; prints its seconds."""
    torch.set_num_threads(threads)
    torch.manual_seed(0)
    images = idx(f"{folder}/train-images-idx3-ubyte.gz").float().div(255.0)
    images = images.sub(0.1307).div(0.3081).unsqueeze(1)
    labels = idx(f"{folder}/train-labels-idx1-ubyte.gz").long()
    convs, dense = layers("bayesian_torch", "lenet5")
    params = [p for m in convs + dense for p in m.parameters()]
    opt = torch.optim.Adam(params, 1e-3)
    n = images.shape[0]
    t = time.time()
    order = torch.randperm(n)
    for start in range(0, n, 100):
        rows = order[start : start + 100]
        h, kl = forward(convs, dense, images[rows], True)
        loss = F.cross_entropy(h, labels[rows]) + kl / N_TRAIN
        opt.zero_grad()
        loss.backward()
        opt.step()
    el = time.time() - t
    print(f"bayesian_torch lenet5 epoch: {n} images, {el:.3f} s/epoch")


def main():
    if sys.argv[1] == "epoch":
        if len(sys.argv) != 5 or sys.argv[2] != "lenet5":
            sys.exit("usage: perf_peers.py epoch lenet5 THREADS MNIST_DIR")
        return epoch(int(sys.argv[3]), sys.argv[4])
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

    def step():
        h, kl = forward(convs, dense, x, bayesian)
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
