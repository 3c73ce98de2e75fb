# An independent PyTorch implementation of BEDL and BEDL-PAC for regression (Haussmann 2021
# sections 5.4, 5.6.1 and 5.8.2.1), written from the thesis and its digest in ../shared/spec, to
# cross-check the bench's Rust implementation on the UCI sets (Table 5.1). Not part of the
# library: CI neither runs nor tests it. It follows the bench's reading:
#   - one hidden layer of 50 ReLU units (100 for protein), two outputs (f1, f2);
#   - mean-field weights (means N(0, 1/fan_in), ln var ~ N(-9, 1e-6)), point biases at 0;
#   - CLT moments through the layers, exact Gaussian ReLU moments;
#   - the sampling-free marginal ln N(y | m1, 1/beta + s1^2 + exp(m2 + s2^2/2)), beta = 100;
#   - BEDL: type-II maximum likelihood of the weights (no weight KL);
#   - BEDL-PAC: eq. 5.10, -(1/N) sum ln p + sqrt((KL(Q||P) - ln delta)/N + (ln max B)/N), with
#     Q = prod_n N(lambda_n | m1, s1^2 + exp(m2 + s2^2/2)), P = prod_n N(lambda_n | 0, 1/alpha),
#     alpha = 1, delta = 0.1, the training set's KL (N times the batch's mean), and the thesis's
#     (ln max B)/N = beta/(2 pi);
#   - inputs and targets standardised with the training rows' statistics (a constant column
#     keeps scale 1); the fixed 90/10 splits of the data folder; Adam lr 1e-3 (PyTorch's eps
#     1e-8), 100 epochs, the PBP batch sizes (16/32/64/256);
#   - test log-likelihood and RMSE in the targets' original units.
#
# set-up: python3 -m venv ~/.venvs/peer && ~/.venvs/peer/bin/pip install torch numpy
# usage (from the repository root):
#   ~/.venvs/peer/bin/python xcheck/bedl_pac_uci_torch.py SET [SPLITS] [method] [init]
#   SET: boston | concrete | energy | kin8nm | naval | power | protein | wine | yacht
#   SPLITS: how many of the set's splits, from the first; 'all' (the default) runs every split
#   method: bedl-pac (default) | bedl
#   init: fanin (means N(0, 1/fan_in), as the bench; default) | he (N(0, 2/fan_in), the thesis text)
# The data directory is $BNN_DATA, else ../shared/data (the UCI_Datasets layout under uci/).
# Each split's line is printed as it finishes; the last line is the mean +- standard error.
# Threads: $XCHECK_THREADS, else 1 (the logs in assets/xcheck-torch/uci ran two such processes
# side by side on 2 cores).
import math
import os
import sys
import time

import numpy as np
import torch

torch.set_num_threads(int(os.environ.get("XCHECK_THREADS", "1")))

FOLDERS = {
    "boston": ("bostonHousing", 16),
    "concrete": ("concrete", 32),
    "energy": ("energy", 16),
    "kin8nm": ("kin8nm", 64),
    "naval": ("naval-propulsion-plant", 64),
    "power": ("power-plant", 64),
    "protein": ("protein-tertiary-structure", 256),
    "wine": ("wine-quality-red", 32),
    "yacht": ("yacht", 16),
}
USAGE = "usage: bedl_pac_uci_torch.py SET [SPLITS] [bedl-pac|bedl] [fanin|he]"
if len(sys.argv) < 2:
    raise SystemExit(USAGE)
SET = sys.argv[1]
if SET not in FOLDERS:
    raise SystemExit(f"SET is {SET!r}; expected one of {', '.join(FOLDERS)}")
METHOD = sys.argv[3] if len(sys.argv) > 3 else "bedl-pac"
INIT = sys.argv[4] if len(sys.argv) > 4 else "fanin"
for name, value, allowed in [("method", METHOD, ("bedl-pac", "bedl")), ("init", INIT, ("fanin", "he"))]:
    if value not in allowed:
        raise SystemExit(f"{name} is {value!r}; expected one of {', '.join(allowed)}")

DATA = os.environ.get("BNN_DATA", "../shared/data")
FOLDER = os.path.join(DATA, "uci", FOLDERS[SET][0], "data")
BATCH = FOLDERS[SET][1]
HIDDEN = 100 if SET == "protein" else 50
EPOCHS = 100
BETA = 100.0
ALPHA = 1.0
DELTA = 0.1
BOUND = BETA / (2 * math.pi)


def read(name, dtype):
    path = os.path.join(FOLDER, name)
    if not os.path.exists(path):
        raise SystemExit(f"{path} is missing: set BNN_DATA to the folder holding uci/")
    return np.loadtxt(path, dtype=dtype, ndmin=1)


data = read("data.txt", np.float64)
data = data.reshape(data.shape[0], -1)
features = read("index_features.txt", np.int64)
target = int(read("index_target.txt", np.int64)[0])
available = 0
while os.path.exists(os.path.join(FOLDER, f"index_train_{available}.txt")):
    available += 1
SPLITS = available
if len(sys.argv) > 2 and sys.argv[2] != "all":
    try:
        SPLITS = int(sys.argv[2])
    except ValueError:
        raise SystemExit(f"SPLITS must be an integer or 'all'; got {sys.argv[2]!r}")
    if not 1 <= SPLITS <= available:
        raise SystemExit(f"SPLITS is {SPLITS}; {SET} has splits 1 to {available}")


class MeanField(torch.nn.Module):
    """Mean-field Gaussian weights (means N(0, gain/fan_in), ln var ~ N(-9, 1e-6)), point bias 0."""

    def __init__(self, fan_in, fan_out):
        super().__init__()
        gain = 2.0 if INIT == "he" else 1.0
        self.mu = torch.nn.Parameter(torch.randn(fan_out, fan_in) * math.sqrt(gain / fan_in))
        self.logvar = torch.nn.Parameter(-9.0 + 1e-3 * torch.randn(fan_out, fan_in))
        self.bias = torch.nn.Parameter(torch.zeros(fan_out))

    def forward(self, m, v):
        mean = m @ self.mu.t() + self.bias
        second = m * m if v is None else m * m + v
        var = second @ self.logvar.exp().t()
        if v is not None:
            var = var + v @ (self.mu * self.mu).t()
        return mean, var


def relu_moments(m, v):
    s = (v + 1e-16).sqrt()
    z = m / s
    cdf = 0.5 * torch.erfc(-z / math.sqrt(2.0))
    pdf = torch.exp(-0.5 * z * z) / math.sqrt(2 * math.pi)
    mean = m * cdf + s * pdf
    second = (m * m + v) * cdf + m * s * pdf
    return mean, (second - mean * mean).clamp_min(0.0)


class Net(torch.nn.Module):
    def __init__(self, d):
        super().__init__()
        self.hidden = MeanField(d, HIDDEN)
        self.out = MeanField(HIDDEN, 2)

    def forward(self, x):
        m, v = relu_moments(*self.hidden(x, None))
        m, v = self.out(m, v)
        # the latent mean's moment-matched Gaussian: N(m1, s1^2 + E[exp f2])
        latent_var = v[:, 0] + torch.exp(m[:, 1] + 0.5 * v[:, 1])
        return m[:, 0], latent_var


def gaussian_ll(y, mean, var):
    return -0.5 * (math.log(2 * math.pi) + var.log() + (y - mean) ** 2 / var)


def loss_fn(net, x, y):
    mean, latent_var = net(x)
    nll = -gaussian_ll(y, mean, latent_var + 1.0 / BETA).mean()
    if METHOD == "bedl":
        return nll
    kl = 0.5 * (ALPHA * latent_var + ALPHA * mean * mean - 1.0 - (ALPHA * latent_var).log())
    return nll + (kl.mean() - math.log(DELTA) / N + BOUND).sqrt()


def standardise(train, rows):
    mean = train.mean(0)
    std = train.std(0)
    std = np.where(std > 0, std, 1.0)
    return (rows - mean) / std, mean, std


lls, rmses = [], []
t_all = time.time()
for split in range(SPLITS):
    torch.manual_seed(split)
    train = read(f"index_train_{split}.txt", np.int64)
    test = read(f"index_test_{split}.txt", np.int64)
    x_raw, y_raw = data[:, features], data[:, target]
    xtr, _, _ = standardise(x_raw[train], x_raw[train])
    xte, _, _ = standardise(x_raw[train], x_raw[test])
    ytr, y_mean, y_std = standardise(y_raw[train], y_raw[train])
    y_mean, y_std = float(y_mean), float(y_std)
    xtr, xte, ytr = (torch.tensor(a, dtype=torch.float32) for a in (xtr, xte, ytr))
    N = xtr.shape[0]
    net = Net(xtr.shape[1])
    opt = torch.optim.Adam(net.parameters(), lr=1e-3)
    t0 = time.time()
    for epoch in range(EPOCHS):
        perm = torch.randperm(N)
        for i in range(0, N, BATCH):
            b = perm[i : i + BATCH]
            loss = loss_fn(net, xtr[b], ytr[b])
            if not math.isfinite(loss.item()):
                raise SystemExit(f"{SET} split {split}: non-finite loss in epoch {epoch + 1}, batch {i // BATCH}")
            opt.zero_grad()
            loss.backward()
            opt.step()
    with torch.no_grad():
        mean, latent_var = net(xte)
        mean = mean.double() * y_std + y_mean
        var = (latent_var.double() + 1.0 / BETA) * y_std**2
        y = torch.tensor(y_raw[test], dtype=torch.float64)
        ll = gaussian_ll(y, mean, var).mean().item()
        rmse = ((y - mean) ** 2).mean().sqrt().item()
    lls.append(ll)
    rmses.append(rmse)
    print(f"{SET} {METHOD} {INIT} split {split}: test LL {ll:.4f}, RMSE {rmse:.4f} ({time.time() - t0:.1f} s)", flush=True)


def summary(values):
    a = np.array(values)
    se = a.std(ddof=1) / math.sqrt(len(a)) if len(a) > 1 else float("nan")
    return f"{a.mean():.3f} +- {se:.3f}"


print(
    f"final: {SET} {METHOD} init {INIT}, {SPLITS} splits, {EPOCHS} epochs, batch {BATCH}: "
    f"test LL {summary(lls)}, RMSE {summary(rmses)} (mean +- s.e.), {time.time() - t_all:.0f} s",
    flush=True,
)
