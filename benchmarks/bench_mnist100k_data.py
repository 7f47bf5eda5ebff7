"""How much MNIST-100k's minibatch sizes depend on how its 87,000 extra digits are made.

The paper's MNIST-100k adds 87,000 digits from infinite MNIST (Loosli et al. 2007), which we cannot ship;
``tallmcmc.datasets.load_mnist_100k`` generates its own deformations. This benchmark runs one test at the
paper's 100k settings (K = 100, flat prior, random walk with standard deviation 0.01, zero start) on three
versions of the 87,000 extra digits and prints each version's mean test minibatch size:

* ``default``: ``load_mnist_100k()`` as shipped (``DeformationParams()``: elastic α = 16, σ = 4; rotation ≤ 8°,
  scale 0.9–1.1, shear ≤ 0.1, shift ≤ 1 pixel);
* ``milder``: α = 8, rotation ≤ 4°, scale 0.95–1.05, shear ≤ 0.05, shift ≤ 0.5 (not cached; about a minute to make);
* ``repeated``: the 13,007 originals repeated, no deformation.

    python benchmarks/bench_mnist100k_data.py                                  # MHminibatch, 5 × 3000
    python benchmarks/bench_mnist100k_data.py --test austere_conservative --chains 2
    python benchmarks/bench_mnist100k_data.py --spread   # originals vs deformed at an L-BFGS fit (NumPy/SciPy)

The per-datum log ratios' spread, and with it the minibatch a test needs, is a property of the data set:
a minibatch size "within the paper's band" on a data set that is not the paper's is only as meaningful as
the data are alike.
"""

from __future__ import annotations

import argparse
import time

import jax.numpy as jnp
import numpy as np

import tallmcmc
from tallmcmc import datasets
from tallmcmc.deformations import DeformationParams
from tallmcmc.reproduce.mnist import build_model

VARIANTS = {
    "default": DeformationParams(),
    "milder": DeformationParams(
        alpha=8.0, sigma=4.0, max_rotation=4.0, min_scale=0.95, max_scale=1.05, max_shear=0.05, max_translation=0.5
    ),
    "repeated": None,
}
NUM_DATA = 100_007


def training_set(variant: str) -> tuple[np.ndarray, np.ndarray]:
    """The 100,007 training digits of ``variant`` (see the module docstring)."""
    params = VARIANTS[variant]
    if params is None:
        x, y = datasets.load_mnist_ones_sevens("train")
        copies = -(-NUM_DATA // len(y))
        return np.tile(x, (copies, 1))[:NUM_DATA], np.tile(y, copies)[:NUM_DATA]
    return datasets.load_mnist_100k(params=params, progress=False, cache=params == DeformationParams())


def residual_spread(seed: int = 0) -> None:
    """Print the originals' and the shipped deformations' mean (y − p)² and per-datum Var(lᵢ) at a ridge fit.

    The fit is SciPy's L-BFGS-B on the 100k log-likelihood with a 10⁻² ridge (300 iterations); lᵢ is the
    K = 100 tempered log ratio for a random-walk step of standard deviation 0.01 (20 steps averaged).
    """
    import scipy.optimize

    x, y = training_set("default")
    x, y = np.asarray(x, np.float64), np.asarray(y, np.float64)

    def objective(theta):
        z = x @ theta
        return (
            -(y * z - np.logaddexp(0, z)).sum() + 0.5e-2 * theta @ theta,
            -(x.T @ (y - 1 / (1 + np.exp(-z)))) + 1e-2 * theta,
        )

    theta = scipy.optimize.minimize(
        objective, np.zeros(x.shape[1]), jac=True, method="L-BFGS-B", options={"maxiter": 300}
    ).x
    p = 1 / (1 + np.exp(-x @ theta))
    rng = np.random.default_rng(seed)
    print(f"ridge fit on the shipped 100k: training error {np.mean((p > 0.5) != y):.4f}")
    for part, rows in (("originals", slice(0, 13_007)), ("deformed", slice(13_007, None))):
        xs, ys = x[rows], y[rows]
        variances = []
        for _ in range(20):
            step = 0.01 * rng.standard_normal(x.shape[1])
            ratios = (ys * (xs @ step) - np.logaddexp(0, xs @ (theta + step)) + np.logaddexp(0, xs @ theta)) / 100
            variances.append(ratios.var())
        print(f"  {part:>9}: mean (y - p)^2 {np.mean((ys - p[rows]) ** 2):.4f}, Var(l_i) {np.mean(variances):.3e}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--test", choices=["minibatch_barker", "austere_conservative"], default="minibatch_barker")
    parser.add_argument("--variants", nargs="+", choices=list(VARIANTS), default=list(VARIANTS))
    parser.add_argument("--chains", type=int, default=5)
    parser.add_argument("--samples", type=int, default=3000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--spread", action="store_true", help="print the residual spread of originals vs deformed and stop"
    )
    args = parser.parse_args()
    if args.spread:
        residual_spread(args.seed)
        return
    print(f"{args.test}, {args.chains} chains × {args.samples} samples, K = 100, step 0.01, seed {args.seed}")
    for variant in args.variants:
        began = time.perf_counter()
        x, y = training_set(variant)
        made = time.perf_counter()
        if args.test == "minibatch_barker":
            test = tallmcmc.minibatch_barker(100, variance_rse=None)  # Algorithm 1 as printed, as in Table 2
        else:
            test = tallmcmc.austere_conservative(error_bound=0.2, num_data=len(y))
        result = tallmcmc.sample(
            build_model(x, y, 100.0),
            tallmcmc.random_walk(0.01),
            test,
            initial_position=jnp.zeros(x.shape[1], jnp.float32),
            num_samples=args.samples,
            num_chains=args.chains,
            seed=args.seed,
            progress=False,
        )
        per_chain = np.asarray(result.data_used_by_test, float).mean(axis=1)
        spread = per_chain.std(ddof=1) if per_chain.size > 1 else float("nan")
        print(
            f"  {variant:>9}: mean test minibatch {per_chain.mean():8.1f} ± {spread:6.1f} (sd over chains); "
            f"acceptance {float(np.mean(result.accepted)):.3f}; data {made - began:.0f} s, "
            f"sampling {time.perf_counter() - made:.0f} s",
            flush=True,
        )


if __name__ == "__main__":
    main()
