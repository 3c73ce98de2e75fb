# An independent PyTorch implementation of BEDL-PAC (Haussmann 2021 ch. 5), written from the
# thesis and its digest in ../shared/spec, to cross-check the bench's Rust implementation on
# MNIST. Not part of the library: CI neither runs nor tests it. It follows the bench's reading:
# mean-field weights (means N(0, 1/fan_in), ln var ~ N(-9, 1e-6)) and point biases (0), CLT
# moments through the convolutions and exact Gaussian ReLU moments, alpha = exp(f) on 5 draws
# of the logits' moments, the data term -ln mean_s softmax(f_s)_y, and eq. 5.10's regulariser
# sqrt((KL(Q||P) - ln delta)/N + (ln max B)/N) with delta = 0.1; weights fitted by type-II
# maximum likelihood (no weight KL); Adam lr 1e-3 (PyTorch's eps 1e-8), batch 100; predictions
# average softmax over 100 draws of the logits.
#
# set-up: python3 -m venv ~/.venvs/peer && ~/.venvs/peer/bin/pip install torch numpy
# usage (from the repository root):
#   ~/.venvs/peer/bin/python xcheck/bedl_pac_torch.py EPOCHS SEED [arch] [kl] [complexity] [draws]
#   arch: lenet5 (the strided LeNet5; default) | conv96 (Table 5.3's net, stride 2)
#         | conv96s5 (the same with section 5.8.2.3's printed stride of 5: 28 -> 5 -> 1)
#         | mlp (784-400-400-10, the MLP of `bnn-bench perf`)
#   kl: sum (KL of the product over the training set, N * mean KL: the thesis; default)
#       | mean (one point's KL: the reference code)
#   complexity: thesis ((ln max B)/N = 1; default) | logn (ln N / N: the reference code)
#   draws: separate (the KL takes its own 5 draws, as the bench; default) | shared (the KL
#          takes the data term's draws)
#   ~/.venvs/peer/bin/python xcheck/bedl_pac_torch.py time [ARCH] [THREADS]
#   times training steps instead (ARCH's net, default lenet5, and the default options; random
#   images and labels of MNIST's shape, batch 100, 128 for mlp; N = 60 000): 5 warm-up steps,
#   then 100, printed as `ms/step`; the peer of `bnn-bench perf`'s BEDL-PAC rows (LeNet5 and
#   MLP). THREADS: torch's threads (default 2).
# The data directory is $BNN_DATA, else ../shared/data (MNIST and Fashion-MNIST IDX files).
import gzip
import math
import os
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F

ARCHS = ("lenet5", "conv96", "conv96s5", "mlp")
TIME = len(sys.argv) > 1 and sys.argv[1] == "time"
if TIME:
    rest = sys.argv[2:]
    time_arch = rest.pop(0) if rest and rest[0] in ARCHS else "lenet5"
    if len(rest) > 1:
        raise SystemExit(f"time mode takes [ARCH] [THREADS]; got {' '.join(sys.argv[2:])!r}")
    try:
        THREADS = int(rest[0]) if rest else 2
    except ValueError:
        raise SystemExit(f"THREADS must be an integer (or ARCH one of {', '.join(ARCHS)}); got {rest[0]!r}")
    if THREADS < 1:
        raise SystemExit(f"THREADS is {THREADS}; expected at least 1")
    sys.argv = sys.argv[:1] + ["1", "0", time_arch]
torch.set_num_threads(THREADS if TIME else 2)
if len(sys.argv) < 3:
    raise SystemExit("usage: bedl_pac_torch.py EPOCHS SEED [arch] [kl] [complexity] [draws]")
try:
    EPOCHS, SEED = int(sys.argv[1]), int(sys.argv[2])
except ValueError:
    raise SystemExit(f"EPOCHS and SEED must be integers; got {sys.argv[1]!r} and {sys.argv[2]!r}")
ARCH = sys.argv[3] if len(sys.argv) > 3 else "lenet5"
KL_MODE = sys.argv[4] if len(sys.argv) > 4 else "sum"
COMPLEXITY = sys.argv[5] if len(sys.argv) > 5 else "thesis"
DRAWS = sys.argv[6] if len(sys.argv) > 6 else "separate"
for name, value, allowed in [
    ("arch", ARCH, ARCHS),
    ("kl", KL_MODE, ("sum", "mean")),
    ("complexity", COMPLEXITY, ("thesis", "logn")),
    ("draws", DRAWS, ("separate", "shared")),
]:
    if value not in allowed:
        raise SystemExit(f"{name} is {value!r}; expected one of {', '.join(allowed)}")
if EPOCHS < 1:
    raise SystemExit(f"EPOCHS is {EPOCHS}; expected at least 1")
DATA = os.environ.get("BNN_DATA", "../shared/data")
torch.manual_seed(SEED)
np.random.seed(SEED)


def idx(path):
    if not os.path.exists(path):
        raise SystemExit(f"{path} is missing: set BNN_DATA to the folder holding mnist/ and fashion-mnist/")
    with gzip.open(path, "rb") as f:
        raw = f.read()
    dims = raw[3]
    shape = [int.from_bytes(raw[4 + 4 * i : 8 + 4 * i], "big") for i in range(dims)]
    return np.frombuffer(raw, dtype=np.uint8, offset=4 + 4 * dims).reshape(shape)


def images(family, split, mean, std):
    x = idx(f"{DATA}/{family}/{split}-images-idx3-ubyte.gz").astype(np.float32) / 255.0
    y = idx(f"{DATA}/{family}/{split}-labels-idx1-ubyte.gz").astype(np.int64)
    return torch.from_numpy((x - mean) / std).unsqueeze(1), torch.from_numpy(y)


if TIME:
    N = 60000
else:
    xtr, ytr = images("mnist", "train", 0.1307, 0.3081)
    xte, yte = images("mnist", "t10k", 0.1307, 0.3081)
    xood, _ = images("fashion-mnist", "train", 0.28604, 0.35302)
    N = xtr.shape[0]


class MeanField(torch.nn.Module):
    """Mean-field Gaussian weights (means N(0, 1/fan_in), ln var ~ N(-9, 1e-6)), point bias 0."""

    def __init__(self, shape, fan_in, conv=None):
        super().__init__()
        self.mu = torch.nn.Parameter(torch.randn(shape) / math.sqrt(fan_in))
        self.logvar = torch.nn.Parameter(-9.0 + 1e-3 * torch.randn(shape))
        self.bias = torch.nn.Parameter(torch.zeros(shape[0]))
        self.conv = conv

    def op(self, x, w, b=None):
        if self.conv is None:
            return F.linear(x, w, b)
        return F.conv2d(x, w, b, stride=self.conv)

    def forward(self, m, v):
        mean = self.op(m, self.mu, self.bias)
        second = m * m if v is None else m * m + v
        var = self.op(second, self.logvar.exp())
        if v is not None:
            var = var + self.op(v, self.mu * self.mu)
        return mean, var


SQRT2 = math.sqrt(2.0)


def relu_moments(m, v):
    s = (v + 1e-16).sqrt()
    z = m / s
    cdf = 0.5 * torch.erfc(-z / SQRT2)
    pdf = torch.exp(-0.5 * z * z) / math.sqrt(2 * math.pi)
    mean = m * cdf + s * pdf
    second = (m * m + v) * cdf + m * s * pdf
    return mean, (second - mean * mean).clamp_min(0.0)


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        if ARCH == "lenet5":
            self.layers = torch.nn.ModuleList(
                [
                    MeanField((20, 1, 5, 5), 25, conv=2),
                    MeanField((50, 20, 5, 5), 500, conv=2),
                    MeanField((500, 800), 800),
                    MeanField((10, 500), 500),
                ]
            )
        elif ARCH == "conv96s5":
            # section 5.8.2.3's printed "stride of 5": 28 -> 5 -> 1
            self.layers = torch.nn.ModuleList(
                [
                    MeanField((96, 1, 5, 5), 25, conv=5),
                    MeanField((96, 96, 5, 5), 2400, conv=5),
                    MeanField((10, 96), 96),
                ]
            )
        elif ARCH == "mlp":
            # the MLP of `bnn-bench perf`: 784-400-400-10
            self.layers = torch.nn.ModuleList(
                [
                    MeanField((400, 784), 784),
                    MeanField((400, 400), 400),
                    MeanField((10, 400), 400),
                ]
            )
        else:
            self.layers = torch.nn.ModuleList(
                [
                    MeanField((96, 1, 5, 5), 25, conv=2),
                    MeanField((96, 96, 5, 5), 2400, conv=2),
                    MeanField((10, 1536), 1536),
                ]
            )
        # the convolutional nets have two convolutions before their dense layers
        self.flatten_at = None if ARCH == "mlp" else 2

    def forward(self, x):
        m, v = (x.flatten(1) if ARCH == "mlp" else x), None
        for i, layer in enumerate(self.layers):
            if i == self.flatten_at:
                m, v = m.flatten(1), v.flatten(1)
            m, v = layer(m, v)
            if i + 1 < len(self.layers):
                m, v = relu_moments(m, v)
        return m, v


def draws(m, v, s):
    eps = torch.randn((s,) + m.shape)
    return m + (v.clamp_min(0.0) + 1e-16).sqrt() * eps


def kl_to_uniform(alpha):
    a0 = alpha.sum(-1)
    c = alpha.shape[-1]
    return (
        torch.lgamma(a0)
        - torch.lgamma(alpha).sum(-1)
        - math.lgamma(c)
        + ((alpha - 1.0) * (torch.digamma(alpha) - torch.digamma(a0).unsqueeze(-1))).sum(-1)
    )


DELTA = 0.1
BOUND = 1.0 if COMPLEXITY == "thesis" else math.log(N) / N


def loss_fn(net, x, y, s=5):
    m, v = net(x)
    f = draws(m, v, s)
    ll = torch.logsumexp(F.log_softmax(f, -1).gather(-1, y.expand(s, -1).unsqueeze(-1)).squeeze(-1), 0) - math.log(s)
    nll = -ll.mean()
    kl_draws = f if DRAWS == "shared" else draws(m, v, s)
    kl = kl_to_uniform(kl_draws.exp()).mean()
    per_point = kl.clamp_min(0.0) if KL_MODE == "sum" else kl.clamp_min(0.0) / N
    reg = (per_point - math.log(DELTA) / N + BOUND).sqrt()
    return nll + reg


@torch.no_grad()
def predict(net, x, s=100, chunk=1000):
    out = []
    for i in range(0, x.shape[0], chunk):
        m, v = net(x[i : i + chunk])
        f = draws(m, v, s)
        out.append(F.softmax(f, -1).mean(0))
    return torch.cat(out)


def test_error():
    return (predict(net, xte).argmax(1) != yte).float().mean().item() * 100


net = Net()
opt = torch.optim.Adam(net.parameters(), lr=1e-3)
if TIME:
    # the batches of `bnn-bench perf`: 100 images for LeNet5, 128 flat inputs for the MLP
    batch = 128 if ARCH == "mlp" else 100
    x, y = torch.randn(batch, 1, 28, 28), torch.randint(0, 10, (batch,))

    def step():
        loss = loss_fn(net, x, y)
        opt.zero_grad()
        loss.backward()
        opt.step()

    for _ in range(5):
        step()
    t0 = time.time()
    for _ in range(100):
        step()
    elapsed = time.time() - t0
    print(f"torch {torch.__version__}, BEDL-PAC {ARCH}: 100 steps: {elapsed:.3f} s, {elapsed * 10:.2f} ms/step")
    raise SystemExit(0)
t0 = time.time()
for epoch in range(EPOCHS):
    perm = torch.randperm(N)
    tot = 0.0
    for i in range(0, N, 100):
        b = perm[i : i + 100]
        loss = loss_fn(net, xtr[b], ytr[b])
        value = loss.item()
        if not math.isfinite(value):
            raise SystemExit(f"non-finite loss in epoch {epoch + 1}, batch {i // 100}")
        opt.zero_grad()
        loss.backward()
        opt.step()
        tot += value
    err = test_error()
    print(f"epoch {epoch + 1} loss {tot / (N / 100):.4f} test error {err:.2f} % ({time.time() - t0:.0f} s)", flush=True)

err = test_error()
q = predict(net, xood)
ent = -(q * q.clamp_min(1e-30).log()).sum(1)
area = math.log(10) - ent.mean().item()
pin = predict(net, xtr[:10000])
py = pin.gather(1, ytr[:10000].unsqueeze(1)).mean().item()
print(f"final: arch {ARCH} kl {KL_MODE} complexity {COMPLEXITY} draws {DRAWS} seed {SEED} epochs {EPOCHS}: "
      f"test error {err:.2f} %, Fashion ECDF area {area:.3f}, train p_y {py:.3f}, {time.time() - t0:.0f} s")
