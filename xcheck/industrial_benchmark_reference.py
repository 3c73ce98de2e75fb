"""Reference trajectories of the Industrial Benchmark for the Rust port's step-by-step test.

Runs the public Python reference (PyPI `industrial-benchmark-python` 2.0, Siemens' `IDS`) and
records, for every step, the action, every random draw the step made and the 31 values of the
hidden Markov state after it. The Rust test replays the draws, so it checks the deterministic
dynamics exactly, independent of NumPy's random stream.

Usage: industrial_benchmark_reference.py OUT_DIR
Writes OUT_DIR/trajectory_<k>.csv (one row per step; row 0 is the step the constructor takes
with a zero action). Columns: p, a_v, a_g, a_h, e_g, e_v, u_g, u_v, b_g, b_v, alpha_normal
(NaN where the step drew none), consumption_normal, then the state: o0..o9, coc, fb, oc, hg,
hv, he, gs_domain, gs_sys_response, gs_phi_idx, ge, ve, MC, v, g, h, f, c, cost, reward.

Set-up: python3 -m venv ~/.venvs/ib && ~/.venvs/ib/bin/pip install numpy scipy \
    industrial-benchmark-python==2.0
"""

import os
import sys

import numpy as np

# The reference calls `np.float`, which NumPy 2 removed.
np.float = float

from industrial_benchmark_python.IDS import IDS  # noqa: E402

LOG = []


def _logged(name, draw):
    def wrapper(*args, **kwargs):
        value = draw(*args, **kwargs)
        LOG.append((name, value))
        return value

    return wrapper


for _name in ["exponential", "rand", "binomial", "normal", "randn", "randint"]:
    setattr(np.random, _name, _logged(_name, getattr(np.random, _name)))

STATE_KEYS = ["coc", "fb", "oc", "hg", "hv", "he", "gs_domain", "gs_sys_response",
              "gs_phi_idx", "ge", "ve", "MC", "v", "g", "h", "f", "c", "cost", "reward"]


def draws(log):
    """The step's draws, in the order the reference makes them."""
    named = {}
    for name, value in log:
        named.setdefault(name, []).append(value)
    e_g, e_v = named["exponential"]
    u_g, u_v = named["rand"][-2:]  # the constructor's sequence draws come first
    b_g, b_v = named["binomial"]
    alpha = named.get("normal", [float("nan")])
    assert len(alpha) == 1
    (noise,) = named["randn"]
    return [e_g, e_v, u_g, u_v, b_g, b_v, alpha[0], noise]


def state(env):
    return list(env.state["o"]) + [float(env.state[k]) for k in STATE_KEYS]


def trajectory(p, actions, seed):
    LOG.clear()
    env = IDS(p, stationary_p=True, inital_seed=seed)
    rows = [[p, 0.0, 0.0, 0.0] + draws(LOG) + state(env)]
    for a in actions:
        LOG.clear()
        env.step(a)
        rows.append([p] + list(a) + draws(LOG) + state(env))
    return rows


def actions(kind, steps, rng):
    if kind == "uniform":
        return 2 * rng.random((steps, 3)) - 1
    if kind == "saturating":
        # Push velocity and gain to their bounds (fatigue's amplification branch) and the
        # shift back and forth across the goldstone's domains.
        a = 2 * rng.random((steps, 3)) - 1
        a[:, 0] = np.where(np.arange(steps) < steps // 2, 1.0, -1.0)
        a[:, 1] = np.where(np.arange(steps) < steps // 2, -1.0, 1.0)
        a[:, 2] = np.sign(np.sin(np.arange(steps) / 12.0))
        return a
    if kind == "beyond":
        # Actions outside [-1, 1] (the reference clips them).
        return 3 * (2 * rng.random((steps, 3)) - 1)
    raise ValueError(kind)


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    rng = np.random.default_rng(20261204)
    cases = [(10, "uniform"), (55, "uniform"), (100, "uniform"), (1, "saturating"),
             (80, "saturating"), (35, "beyond")]
    header = (["p", "a_v", "a_g", "a_h", "e_g", "e_v", "u_g", "u_v", "b_g", "b_v",
               "alpha_normal", "consumption_normal"]
              + [f"o{i}" for i in range(10)] + STATE_KEYS)
    for k, (p, kind) in enumerate(cases):
        rows = trajectory(p, actions(kind, 250, rng), seed=1000 + k)
        with open(os.path.join(out, f"trajectory_{k}.csv"), "w") as f:
            f.write(",".join(header) + "\n")
            for row in rows:
                f.write(",".join(repr(float(x)) for x in row) + "\n")


if __name__ == "__main__":
    main()
