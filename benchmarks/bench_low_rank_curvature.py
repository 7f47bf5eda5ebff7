"""How the ``curvature="low_rank"`` approximation of H̄ shapes the proxy posterior, and what that does to proxy HMC.

Usage::

    python benchmarks/bench_low_rank_curvature.py [--designs equi,ar1,scaled] [--dims 50,100] [--ranks 1,5,10]
        [--variants shared,diagonal,top,unit,scaled] [--warmup 200] [--draws 300] [--no-hmc] [--json out.json]

Logistic regression (``tallmcmc.examples.logistic_regression.model``, prior N(0, I)), N = 10⁵, d = 50 and 100,
covariates xᵢ ~ N(0, S C S) with

* ``equi``: equicorrelation C = 0.5·11ᵀ + 0.5·I, S = I;
* ``ar1``: C_jl = 0.9^|j − l|, S = I;
* ``scaled``: C_jl = 0.5^|j − l| and column scales S = diag(10^U(−1, 1)) (badly scaled columns),

coefficients β*_j ~ N(0, 1/4)·√(10/d)/S_jj (so xᵢᵀβ* has sd ≈ 0.5·√(10/d)·‖C‖-ish, of order 1), seed 0.
``find_mode`` at the start 0, then H̄ (``taylor_control_variate(..., curvature="shared")``, one pass) and the
summed-curvature approximations A of H̄ compared (``M = −H̄``, ``D = diag(M)``, ``S = D^{-1/2} M D^{-1/2}``; every
randomized one uses the library's sketch: a seed-0 Gaussian test matrix with k + 10 columns, one power iteration,
Rayleigh–Ritz; computed here in float64 from the dense H̄, which gives the same A as the three data passes):

* ``shared`` — A = H̄ (the proxy posterior of ``per_datum`` is the same: both use H̄ in Σqᵢ);
* ``diagonal`` — A = diag(H̄);
* ``top`` — the k most negative eigenpairs (V, λ) of H̄ plus P D' P, P = I − VVᵀ, D' = diag(H̄) − diag(VΛVᵀ)
  capped at 0 (the library's choice up to this change);
* ``unit`` — the k eigenpairs (U, μ) of the scaled matrix S with the largest |log μ| among the Ritz pairs and
  A = −D^{1/2}(I + U diag(μ − 1) Uᵀ)D^{1/2} (the diagonal elsewhere);
* ``scaled`` — the k largest eigenpairs (U, μ) of S (test matrix D^{1/2}Ω), and
  A = −D^{1/2}(U diag(μ) Uᵀ + P E P)D^{1/2}, P = I − UUᵀ, Eⱼ = (PSP)ⱼⱼ/Pⱼⱼ (the Rayleigh quotient of S along
  Peⱼ), μ and E floored at 10⁻³: the library's choice after this change (``docs/control_variates.md``), also
  checked against ``taylor_control_variate(..., curvature="low_rank")`` ("library" in the worst column).

Reported: (a) the generalised eigenvalues γ of (A, H̄) (``scipy.linalg.eigh(−A, −H̄)``): γ_min, γ_max, the worst
ratio max(γ_max, 1/γ_min) and the root mean square of log γ over the d directions; (b) proxy HMC,
``proxy_hamiltonian(cv_A, INTEGRATION_TIME/NUM_LEAPFROG_STEPS, NUM_LEAPFROG_STEPS,
preconditioner=laplace_covariance(mode), step_size_jitter=STEP_SIZE_JITTER)`` (``sample_tall``'s settings, from
``tallmcmc.automatic``) under ``exact_metropolis()``, 4 chains from Laplace draws, ``--warmup`` warm-up steps
(warm-up adapts the step on the proxy acceptance, aiming at 0.9, keeping ε·L) and ``--draws`` kept draws each: the
proxy acceptance, the exact-test acceptance and the tuned number of leapfrog steps (data-free work per step). The
exact test's rejections come only from the proxy's misfit to the posterior; every A gives an exact chain.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import json
import math
import os
import warnings

import jax.numpy as jnp
import numpy as np
import scipy.linalg

import tallmcmc
from tallmcmc.examples import logistic_regression
from tallmcmc.tall_warmup import INTEGRATION_TIME, NUM_LEAPFROG_STEPS, STEP_SIZE_JITTER

NUM_DATA = 100_000
NUM_CHAINS = 4
OVERSAMPLING = 10  # as the library's randomized eigendecomposition
FLOOR = 1e-3


def simulate(design: str, dimension: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    lags = np.abs(np.subtract.outer(np.arange(dimension), np.arange(dimension)))
    if design == "equi":
        correlation, scales = 0.5 * np.ones((dimension, dimension)) + 0.5 * np.eye(dimension), np.ones(dimension)
    elif design == "ar1":
        correlation, scales = 0.9**lags, np.ones(dimension)
    elif design == "scaled":
        correlation, scales = 0.5**lags, 10 ** rng.uniform(-1, 1, dimension)
    else:
        raise ValueError(f"unknown design {design!r}")
    covariates = (rng.standard_normal((NUM_DATA, dimension)) @ np.linalg.cholesky(correlation).T) * scales
    truth = rng.standard_normal(dimension) / 2 * math.sqrt(10 / dimension) / scales
    response = (rng.random(NUM_DATA) < 1 / (1 + np.exp(-(covariates @ truth)))).astype(np.float32)
    return covariates.astype(np.float32), response


def sketch(matrix: np.ndarray, rank: int, test_scale=1.0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Ritz values, vectors and ``matrix`` × vectors from the library's sketch (k + 10 columns, one power step).

    The Gaussian test matrix (seed 0) has its rows multiplied by ``test_scale`` (the library's scaled sketch uses
    D^{1/2}: D is not known before the first pass).
    """
    dimension = matrix.shape[0]
    test = np.random.default_rng(0).standard_normal((dimension, min(rank + OVERSAMPLING, dimension)))
    basis, _ = np.linalg.qr(matrix @ (np.reshape(test_scale, (-1, 1)) * test))
    basis, _ = np.linalg.qr(matrix @ basis)
    images = matrix @ basis
    projected = basis.T @ images
    values, vectors = np.linalg.eigh(0.5 * (projected + projected.T))
    return values, basis @ vectors, images @ vectors


def approximation(hessian: np.ndarray, variant: str, rank: int | None) -> np.ndarray:
    """The summed curvature A (negative definite, float64) of ``variant`` for H̄ = ``hessian``."""
    dimension = hessian.shape[0]
    if variant == "shared":
        return hessian
    if variant == "diagonal":
        return np.diag(np.diag(hessian))
    if variant == "top":
        values, vectors, _ = sketch(-hessian, rank)
        keep = np.argsort(values)[::-1][:rank]
        basis, eigenvalues = vectors[:, keep], -values[keep]
        rest = np.minimum(np.diag(hessian) - np.einsum("jk,k,jk->j", basis, eigenvalues, basis), 0.0)
        projector = np.eye(dimension) - basis @ basis.T
        return basis @ np.diag(eigenvalues) @ basis.T + projector @ np.diag(rest) @ projector
    root = np.sqrt(-np.diag(hessian))
    scaled = -hessian / np.outer(root, root)
    values, vectors, images = sketch(scaled, rank, root if variant == "scaled" else 1.0)
    if variant == "unit":
        keep = np.argsort(-np.abs(np.log(np.maximum(values, 1e-300))))[:rank]
        basis, mu = vectors[:, keep], values[keep]
        inner = np.eye(dimension) + basis @ np.diag(mu - 1) @ basis.T
    elif variant == "scaled":
        keep = np.argsort(values)[::-1][:rank]
        basis, mu, images = vectors[:, keep], values[keep], images[:, keep]
        projected = 1.0 - 2 * np.einsum("jk,jk->j", basis, images) + np.einsum("jk,k,jk->j", basis, mu, basis)
        remaining = 1.0 - np.einsum("jk,jk->j", basis, basis)
        rest = np.maximum(np.where(remaining > FLOOR, projected / np.maximum(remaining, FLOOR), 1.0), FLOOR)
        mu = np.maximum(mu, FLOOR)
        projector = np.eye(dimension) - basis @ basis.T
        inner = basis @ np.diag(mu) @ basis.T + projector @ np.diag(rest) @ projector
    else:
        raise ValueError(f"unknown variant {variant!r}")
    return -np.outer(root, root) * inner


def ratios(curvature: np.ndarray, hessian: np.ndarray) -> dict:
    gamma = scipy.linalg.eigh(-curvature, -hessian, eigvals_only=True)
    return {
        "gamma_min": float(gamma.min()),
        "gamma_max": float(gamma.max()),
        "worst": float(max(gamma.max(), 1 / gamma.min())),
        "rms_log": float(np.sqrt(np.mean(np.log(gamma) ** 2))),
    }


def hmc(model, mode, covariance, control_variate, warmup: int, draws: int, seed: int = 0) -> dict:
    factor = np.linalg.cholesky(np.asarray(covariance, np.float64))
    flat = np.asarray(mode.position, np.float64)
    noise = np.random.default_rng(seed).standard_normal((NUM_CHAINS, flat.shape[0]))
    starts = jnp.asarray(flat + noise @ factor.T, jnp.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # a stiff proxy's half-period warning is part of what is measured
        proposal = tallmcmc.proxy_hamiltonian(
            control_variate,
            INTEGRATION_TIME / NUM_LEAPFROG_STEPS,
            NUM_LEAPFROG_STEPS,
            preconditioner=covariance,
            step_size_jitter=STEP_SIZE_JITTER,
        )
        result = tallmcmc.sample(
            model,
            proposal,
            tallmcmc.exact_metropolis(),
            initial_positions=starts,
            num_samples=draws,
            num_warmup=warmup,
            num_chains=NUM_CHAINS,
            seed=seed,
            progress=False,
        )
    factors = np.asarray(result.step_size_factor if result.step_size_factor is not None else [1.0], np.float64)
    step = INTEGRATION_TIME / NUM_LEAPFROG_STEPS
    steps = np.clip(np.round(INTEGRATION_TIME / np.minimum(step * factors, INTEGRATION_TIME)), 1, 1000)
    return {
        "acceptance": float(np.mean(result.info["accepted"])),
        "proxy_acceptance": float(np.nanmean(result.info["proxy_acceptance"])),
        "leapfrog_steps": float(np.mean(steps)),
        "seconds": result.sampling_seconds,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--designs", default="equi,ar1,scaled")
    parser.add_argument("--dims", default="50,100")
    parser.add_argument("--ranks", default="1,5,10")
    parser.add_argument("--variants", default="shared,diagonal,top,unit,scaled")
    parser.add_argument("--warmup", type=int, default=200)
    parser.add_argument("--draws", type=int, default=300)
    parser.add_argument("--no-hmc", action="store_true", help="only the generalised eigenvalues (part a)")
    parser.add_argument("--json", default=None)
    args = parser.parse_args()
    started = datetime.datetime.now(datetime.UTC)
    print(f"# {started:%Y-%m-%d %H:%M} UTC, load {os.getloadavg()[0]:.1f}", flush=True)
    rows = []
    for design in args.designs.split(","):
        for dimension in (int(d) for d in args.dims.split(",")):
            covariates, response = simulate(design, dimension)
            model = logistic_regression.model(covariates, response)
            mode = tallmcmc.find_mode(model, jnp.zeros(dimension))
            base = tallmcmc.taylor_control_variate(model, mode.position, curvature="shared", batch_size=10_000)
            hessian = np.asarray(base.hessian_sum, np.float64)
            hessian = 0.5 * (hessian + hessian.T)
            covariance = tallmcmc.laplace_covariance(mode)
            spectrum = np.linalg.eigvalsh(-hessian / np.sqrt(np.outer(np.diag(hessian), np.diag(hessian))))
            print(
                f"## {design}, d = {dimension}: scaled matrix D^-1/2 M D^-1/2 has eigenvalues "
                f"{spectrum[0]:.3g} … {spectrum[-1]:.3g}",
                flush=True,
            )
            print("| variant | k | γ_min | γ_max | worst | rms log γ | proxy acc. | exact acc. | leapfrog steps |")
            print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
            for variant in args.variants.split(","):
                for rank in [None] if variant in ("shared", "diagonal") else [int(k) for k in args.ranks.split(",")]:
                    curvature = approximation(hessian, variant, rank)
                    row = {"design": design, "d": dimension, "variant": variant, "k": rank}
                    row.update(ratios(curvature, hessian))
                    if variant == "scaled":  # the library's build, three passes over the data
                        built = tallmcmc.taylor_control_variate(
                            model, mode.position, curvature="low_rank", rank=rank, batch_size=10_000
                        )
                        row["library_worst"] = ratios(built.hessian_matrix(), hessian)["worst"]
                    if not args.no_hmc:
                        cv = dataclasses.replace(base, hessian_sum=jnp.asarray(curvature, jnp.float32))
                        row.update(hmc(model, mode, covariance, cv, args.warmup, args.draws))
                    rows.append(row)
                    hmc_part = (
                        ""
                        if args.no_hmc
                        else f" {row['proxy_acceptance']:.3f} | {row['acceptance']:.3f} | {row['leapfrog_steps']:.1f} |"
                    )
                    library = f" (library {row['library_worst']:.3g})" if "library_worst" in row else ""
                    print(
                        f"| {variant} | {rank or '–'} | {row['gamma_min']:.3g} | {row['gamma_max']:.3g} | "
                        f"{row['worst']:.3g}{library} | {row['rms_log']:.3f} |{hmc_part}",
                        flush=True,
                    )
    print(f"# finished {datetime.datetime.now(datetime.UTC):%H:%M} UTC, load {os.getloadavg()[0]:.1f}", flush=True)
    if args.json:
        with open(args.json, "w") as handle:
            json.dump(rows, handle, indent=1)


if __name__ == "__main__":
    main()
