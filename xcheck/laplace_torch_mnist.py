"""The laplace-torch side of `bnn-bench perf-laplace`.

    laplace_torch_mnist.py DIR VARIANT THREADS

DIR holds what `perf-laplace` wrote: `manifest.json` (the layers of a point LeNet5 with ReLU
after every layer but the last), `weights.f32` (each layer's weight in torch's layout, then its
bias, little-endian float32), and the normalised images and labels of the `train`, `test` and
`ood` sets. VARIANT is `last-layer` (full covariance over the last layer) or `kfac` (Kronecker
factors over every layer). Both use laplace-torch's defaults (exact GGN by curvlinops), the prior
precision by marginal likelihood, and the GLM predictive with the probit approximation.

Writes `probs-test.f32` and `probs-ood.f32` to DIR (the predictive probabilities, `[n, C]`) and
prints one JSON line: fit and predict seconds and the prior precision.
"""

import json
import sys
import time
from pathlib import Path

import numpy as np
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from laplace import Laplace


def build(manifest, weights):
    layers, at = [], 0
    specs = manifest["layers"]
    for i, spec in enumerate(specs):
        shape = spec["shape"]
        numel = int(np.prod(shape))
        w = torch.from_numpy(weights[at : at + numel].reshape(shape).copy())
        at += numel
        out = shape[0]
        b = None
        if spec["bias"]:
            b = torch.from_numpy(weights[at : at + out].copy())
            at += out
        if spec["kind"] == "conv":
            layer = nn.Conv2d(
                shape[1],
                shape[0],
                (shape[2], shape[3]),
                stride=tuple(spec["stride"]),
                padding=tuple(spec["padding"]),
                dilation=tuple(spec["dilation"]),
                bias=spec["bias"],
            )
        else:
            if layers and not isinstance(layers[-1], nn.Linear) and not any(
                isinstance(l, nn.Flatten) for l in layers
            ):
                layers.append(nn.Flatten())
            layer = nn.Linear(shape[1], shape[0], bias=spec["bias"])
        with torch.no_grad():
            layer.weight.copy_(w)
            if b is not None:
                layer.bias.copy_(b)
        layers.append(layer)
        if i + 1 < len(specs):
            assert manifest["activation"] == "relu"
            layers.append(nn.ReLU())
    assert at == weights.size, f"{weights.size - at} weights left over"
    return nn.Sequential(*layers)


def load_set(folder, manifest, name):
    meta = manifest["sets"][name]
    n, shape = meta["n"], meta["shape"]
    x = np.fromfile(folder / f"{name}-images.f32", dtype="<f4").reshape([n] + shape)
    y = np.fromfile(folder / f"{name}-labels.u8", dtype=np.uint8).astype(np.int64)
    assert y.size == n
    return torch.from_numpy(x), torch.from_numpy(y)


def predict(la, x, batch):
    out = []
    for start in range(0, x.shape[0], batch):
        out.append(la(x[start : start + batch], pred_type="glm", link_approx="probit"))
    return torch.cat(out).detach().numpy().astype("<f4")


def main():
    folder, variant, threads = Path(sys.argv[1]), sys.argv[2], int(sys.argv[3])
    torch.set_num_threads(threads)
    torch.manual_seed(0)
    manifest = json.loads((folder / "manifest.json").read_text())
    weights = np.fromfile(folder / "weights.f32", dtype="<f4")
    model = build(manifest, weights).eval()
    x, y = load_set(folder, manifest, "train")
    xt, _ = load_set(folder, manifest, "test")
    xo, _ = load_set(folder, manifest, "ood")
    loader = DataLoader(TensorDataset(x, y), batch_size=256, shuffle=False)
    if variant == "last-layer":
        subset, structure = "last_layer", "full"
    elif variant == "kfac":
        subset, structure = "all", "kron"
    else:
        sys.exit(f"unknown variant {variant!r}: last-layer or kfac")
    start = time.perf_counter()
    la = Laplace(model, "classification", subset_of_weights=subset, hessian_structure=structure)
    la.fit(loader)
    la.optimize_prior_precision(method="marglik")
    fit_seconds = time.perf_counter() - start
    start = time.perf_counter()
    batch = 100 if variant == "last-layer" else 25
    pt = predict(la, xt, batch)
    po = predict(la, xo, batch)
    predict_seconds = time.perf_counter() - start
    pt.tofile(folder / "probs-test.f32")
    po.tofile(folder / "probs-ood.f32")
    prior = float(torch.as_tensor(la.prior_precision).reshape(-1)[0])
    print(
        json.dumps(
            {
                "fit_seconds": fit_seconds,
                "predict_seconds": predict_seconds,
                "prior_precision": prior,
                "torch": torch.__version__,
            }
        )
    )


if __name__ == "__main__":
    main()
