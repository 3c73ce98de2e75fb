"""The eight-schools peer of `bnn-bench eight-schools --peer-python`: numpyro's NUTS on the same
model, and arviz's diagnostics of both samplers' draws and of the bench's PSIS log ratios.

Usage: eight_schools_numpyro.py INPUT.json
INPUT holds the bench's run: {"model": "centred" | "non-centred", "warmup", "draws", "chains",
"target_accept", "seed", "ours": [[[10 floats] per draw] per chain], "ours_seconds",
"log_ratios": [floats]}. Prints one JSON line: numpyro's posterior means, MCSE, bulk ESS and
wall time (4 parallel chains; the second of two runs: the first compiles), and arviz's bulk ESS and MCSE of the
bench's draws and k̂ of its log ratios.

Set-up: python3 -m venv ~/.venvs/peer && ~/.venvs/peer/bin/pip install numpyro arviz
"""

import json
import sys
import time

import numpy as np

import numpyro

# Four CPU devices, so that the four chains run in parallel as the bench's threads do (must
# precede jax's first use).
numpyro.set_host_device_count(4)

import jax
import numpyro.distributions as dist
from numpyro.infer import MCMC, NUTS
import arviz as az

Y = np.array([28.0, 8.0, -3.0, 7.0, -1.0, 1.0, 18.0, 12.0])
SIGMA = np.array([15.0, 10.0, 16.0, 11.0, 9.0, 11.0, 10.0, 18.0])


def model(centred):
    mu = numpyro.sample("mu", dist.Normal(0.0, 5.0))
    tau = numpyro.sample("tau", dist.HalfCauchy(5.0))
    with numpyro.plate("schools", 8):
        if centred:
            theta = numpyro.sample("theta", dist.Normal(mu, tau))
        else:
            tilde = numpyro.sample("theta_tilde", dist.Normal(0.0, 1.0))
            theta = mu + tau * tilde
        numpyro.sample("y", dist.Normal(theta, SIGMA), obs=Y)


def unconstrained(samples, centred):
    """[chains, draws, 10] in the bench's order: mu, log tau, theta (centred) or theta~."""
    last = samples["theta"] if centred else samples["theta_tilde"]
    return np.concatenate(
        [samples["mu"][..., None], np.log(samples["tau"])[..., None], last], axis=-1
    )


def summary(draws):
    """arviz's bulk ESS, MCSE of the mean and mean of each of the 10 entries."""
    data = az.convert_to_dataset({"x": draws})
    ess = az.ess(data, method="bulk")["x"].values
    mcse = az.mcse(data, method="mean")["x"].values
    return {
        "mean": draws.reshape(-1, draws.shape[-1]).mean(axis=0).tolist(),
        "mcse": mcse.tolist(),
        "ess_bulk": ess.tolist(),
    }


def main():
    with open(sys.argv[1]) as f:
        run = json.load(f)
    centred = run["model"] == "centred"
    kernel = NUTS(lambda: model(centred), target_accept_prob=run["target_accept"])
    seconds = []
    for attempt in range(2):
        mcmc = MCMC(
            kernel,
            num_warmup=run["warmup"],
            num_samples=run["draws"],
            num_chains=run["chains"],
            chain_method="parallel",
            progress_bar=False,
        )
        start = time.perf_counter()
        mcmc.run(jax.random.PRNGKey(run["seed"] + attempt))
        samples = {k: np.asarray(v) for k, v in mcmc.get_samples(group_by_chain=True).items()}
        seconds.append(time.perf_counter() - start)
    theirs = unconstrained(samples, centred)
    ours = np.asarray(run["ours"])
    _, k_hat = az.psislw(np.asarray(run["log_ratios"]))
    out = {
        "numpyro": numpyro.__version__,
        "arviz": az.__version__,
        "jax": jax.__version__,
        "numpyro_seconds": seconds[1],
        "numpyro_first_seconds": seconds[0],
        "numpyro_divergences": int(np.asarray(mcmc.get_extra_fields()["diverging"]).sum()),
        "theirs": summary(theirs),
        "ours": summary(ours),
        "arviz_k_hat": float(k_hat),
    }
    print(json.dumps(out))


if __name__ == "__main__":
    main()
