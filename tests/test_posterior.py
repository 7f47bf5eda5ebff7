"""Every (proposal, acceptance test) pair reproduces a known posterior: the one registry.

Each entry of :data:`REGISTRY` runs a sampler on one of the analytic targets of
``analytic_models`` (conjugate Gaussian-mean models whose tempered posterior is
known exactly) with :func:`tallmcmc.testing.run_and_check`: mean and variance
per coordinate within 4 Monte Carlo standard errors, from ArviZ's ESS across
chains. Every chain starts at an exact posterior draw (or at the posterior
mean), so no burn-in is discarded. Settings and seeds are fixed per entry.

The entries marked ``wrong`` are deliberately wrong samplers; each must fail
the same check, on the moment it names, at every coordinate:

* a random walk with a drift that claims to be symmetric (exact and minibatch
  tests): the mean is off;
* the Langevin proposal with its proposal ratio dropped: the variance is off;
* the minibatch Hamiltonian proposal with its kinetic-energy ratio dropped
  (exact and minibatch Barker tests): the variance is off (too small);
* SGHMC under the minibatch Barker test as Chen et al. (2016) ran it, the
  proposal ratio taken as 0: the variance comes out about half the
  posterior's (plain SGHMC at the same step passes);
* AustereMH with an adaptive design at error bound 0.05: the design chosen for
  each μ_std errs at the bound's rate at *every* μ_std, so even hopeless
  downhill moves are accepted about 5 % of the time and the variance comes out
  about 60 % too large (bound 0.002 passes).
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from analytic_models import CONJUGATE_1D, SMALL_2D, TEMPERED_2D, AnalyticModel

import tallmcmc
from tallmcmc.examples import gaussian_mean
from tallmcmc.proposals.base import Proposal, Proposed
from tallmcmc.testing import run_and_check

# --- deliberately wrong proposals ----------------------------------------------


def drifting_walk(scale: float, drift: float) -> Proposal:
    """A random walk with a drift that wrongly claims to be symmetric."""

    def propose(key, position, model):
        step = drift + scale * jax.random.normal(key, position.shape, position.dtype)
        return Proposed(position + step, jnp.zeros((), position.dtype), jnp.zeros((), jnp.int32))

    return Proposal(propose, "drifting_walk")


def without_ratio(proposal: Proposal) -> Proposal:
    """The same proposal with its log proposal ratio replaced by 0 (a wrong MH correction)."""

    def propose(rng_key, position, model):
        proposed = proposal.propose(rng_key, position, model)
        return Proposed(proposed.position, jnp.zeros_like(proposed.log_proposal_ratio), proposed.data_used)

    return Proposal(propose, f"{proposal.name} without its ratio")


# --- the registry ----------------------------------------------------------------


def every_step_uses(multiple: int) -> Callable[[np.ndarray, int], bool]:
    """Cost check: every step touches exactly ``multiple`` × N data points."""
    return lambda used, num_data: bool(np.all(used == multiple * num_data))


def every_step_uses_points(points: int) -> Callable[[np.ndarray, int], bool]:
    """Cost check: every step touches exactly ``points`` data points (the first minibatch)."""
    return lambda used, num_data: bool(np.all(used == points))


def on_average_below(fraction: float) -> Callable[[np.ndarray, int], bool]:
    """Cost check: steps touch fewer than ``fraction`` × N points on average."""
    return lambda used, num_data: bool(used.mean() < fraction * num_data)


@dataclasses.dataclass(frozen=True)
class Case:
    """One sampler on one analytic target, with the settings of its run."""

    model: AnalyticModel
    proposal: Callable[[AnalyticModel], Proposal]
    test: Callable[[], tallmcmc.AcceptanceTest]
    num_chains: int
    num_samples: int
    seed: int
    starts: int | str | None  # see AnalyticModel.starts
    acceptance: tuple[float, float] | None = None  # bounds on the acceptance rate
    data_used: Callable[[np.ndarray, int], bool] | None = None
    wrong: str | None = None  # deliberately wrong: "mean" or "variance" must be off (|z| > 4) everywhere
    # with --runslow only (the default suite's ten minutes): the subsampling baselines' long runs, and a twin whose
    # code the default suite already checks (the exact-test run of a proposal checked under the minibatch test, a
    # wrong sampler's exact-test twin, exact Barker, checked by tests/acceptance/test_exact_chains.py and
    # tests/test_warmup.py)
    slow: bool = False
    allow_inexact_proposal: bool = False  # SGHMC under a real test (the 2016 paper's heuristic)


# minibatch tests: N = 10⁴, d = 2, 8 chains × 3000 steps of a random walk 0.1
MINIBATCH = dict(
    model=TEMPERED_2D,
    proposal=lambda target: tallmcmc.random_walk(0.1),
    num_chains=8,
    num_samples=3000,
    seed=0,
    starts=None,
)
# subsampling baselines: N = 2000, d = 1, 4 chains × 1500 steps of a random walk of 2 posterior sd
BASELINE = dict(
    model=CONJUGATE_1D,
    proposal=lambda target: tallmcmc.random_walk(float(2.0 * np.sqrt(target.variance[0]))),
    num_chains=4,
    num_samples=1500,
    seed=11,
    starts=3,
    acceptance=(0.2, 0.9),
)
# gradient proposals: N = 100, d = 2, Langevin step ε with ελ = 1.5 (λ the posterior precision)
GRADIENT = dict(model=SMALL_2D, num_chains=4, num_samples=2000, seed=1, starts="mean")


@functools.cache
def control_variate(target: AnalyticModel) -> tallmcmc.ControlVariate:
    """The Taylor control variate of ``target`` at its posterior mean (built once per process)."""
    return tallmcmc.taylor_control_variate(target.model, jnp.asarray(target.mean, jnp.float32))


def laplace(target: AnalyticModel) -> np.ndarray:
    return np.diag(target.variance)


# proposals that know the posterior's shape: N = 10⁴, d = 2, K = 100; 4 chains × 2000 steps
SHAPED = dict(model=TEMPERED_2D, num_chains=4, num_samples=2000, seed=3, starts=None)


def cv_barker() -> tallmcmc.AcceptanceTest:
    return tallmcmc.minibatch_barker(50, control_variate=control_variate(TEMPERED_2D))


def minibatch_hmc(target: AnalyticModel, minibatch: str = "step", persistence: float = 0.0) -> Proposal:
    """The minibatch Hamiltonian proposal on ``target``: ε = 0.5 on the posterior's scale, L = 3, b = 200."""
    return tallmcmc.minibatch_hamiltonian(
        0.5, 3, 200, preconditioner=target.variance, minibatch=minibatch, momentum_persistence=persistence
    )


def sghmc_at(target: AnalyticModel, step_times_precision: float) -> Proposal:
    """SGHMC on ``target`` with η·λ = ``step_times_precision`` (λ its largest posterior precision), α = 0.1, b = 200."""
    return tallmcmc.sghmc(step_times_precision * float(np.min(target.variance)), 0.1, 200)


def tuna_on(target: AnalyticModel) -> tallmcmc.AcceptanceTest:
    """TunaMH with χ = 1 and the Gaussian-mean bound of ``target``."""
    return tallmcmc.tuna(1.0, gaussian_mean.tuna_bound(target.model), chunk_size=128)


def mala_step(target: AnalyticModel) -> float:
    precision = target.num_data / target.temperature + 1.0 / target.prior_variance
    return 1.5 / precision


REGISTRY: dict[str, Case] = {
    "random_walk+exact_metropolis": Case(
        **MINIBATCH, test=tallmcmc.exact_metropolis, acceptance=(0.2, 0.9), data_used=every_step_uses(1)
    ),
    "random_walk+exact_barker": Case(
        **MINIBATCH, test=tallmcmc.exact_barker, acceptance=(0.2, 0.9), data_used=every_step_uses(1), slow=True
    ),
    "random_walk+minibatch_barker": Case(
        **MINIBATCH,
        test=lambda: tallmcmc.minibatch_barker(50),
        acceptance=(0.2, 0.9),
        data_used=on_average_below(0.1),
    ),
    "random_walk+minibatch_barker_geometric": Case(
        **MINIBATCH,
        test=lambda: tallmcmc.minibatch_barker(50, growth="geometric", growth_factor=1.5),
        acceptance=(0.2, 0.9),
        data_used=on_average_below(0.1),
    ),
    "random_walk+austere": Case(**BASELINE, test=lambda: tallmcmc.austere(100, 0.001), slow=True),
    "random_walk+austere_conservative": Case(
        **BASELINE, test=lambda: tallmcmc.austere_conservative(0.1, (100, 200, 400), (0.005, 0.01, 0.05))
    ),
    "random_walk+confidence_sampler": Case(**BASELINE, test=lambda: tallmcmc.confidence_sampler(50), slow=True),
    "random_walk+austere_adaptive": Case(
        **{**BASELINE, "seed": 12, "starts": 4},
        test=lambda: tallmcmc.austere_adaptive(0.002, batch_sizes=(50, 100, 200)),
        slow=True,
    ),
    "langevin+exact_metropolis": Case(
        **GRADIENT,
        proposal=lambda target: tallmcmc.langevin(mala_step(target)),
        test=tallmcmc.exact_metropolis,
        acceptance=(0.3, 1.0),
        data_used=every_step_uses(3),  # θ′ on all N points, and the two full gradients of the proposal
    ),
    "laplace_random_walk+exact_metropolis": Case(
        **SHAPED,
        proposal=lambda t: tallmcmc.laplace_random_walk(covariance=laplace(t)),
        test=tallmcmc.exact_metropolis,
        acceptance=(0.2, 0.6),
    ),
    "laplace_random_walk+minibatch_barker_cv": Case(
        **SHAPED,
        proposal=lambda t: tallmcmc.laplace_random_walk(covariance=laplace(t)),
        test=cv_barker,
        data_used=every_step_uses_points(50),
    ),
    "laplace_independence_t+minibatch_barker_cv": Case(
        **SHAPED,
        proposal=lambda t: tallmcmc.laplace_independence(mean=t.mean, covariance=laplace(t), degrees_of_freedom=5),
        test=cv_barker,
    ),
    "proxy_langevin+minibatch_barker_cv": Case(
        **SHAPED,
        proposal=lambda t: tallmcmc.proxy_langevin(control_variate(t), 0.8, preconditioner=laplace(t)),
        test=cv_barker,
    ),
    "proxy_hamiltonian+exact_metropolis": Case(
        **SHAPED,
        proposal=lambda t: tallmcmc.proxy_hamiltonian(control_variate(t), 0.4, 3, preconditioner=laplace(t)),
        test=tallmcmc.exact_metropolis,
        acceptance=(0.8, 1.0),
    ),
    "proxy_hamiltonian+minibatch_barker_cv": Case(
        **SHAPED,
        proposal=lambda t: tallmcmc.proxy_hamiltonian(control_variate(t), 0.4, 3, preconditioner=laplace(t)),
        test=cv_barker,
    ),
    # minibatch gradients drawn independently of θ: exact with every test (4·200 or 6·200 points per proposal)
    "minibatch_hamiltonian+exact_metropolis": Case(
        **SHAPED,
        proposal=minibatch_hmc,
        test=tallmcmc.exact_metropolis,
        acceptance=(0.5, 0.9),
        data_used=every_step_uses_points(10_000 + 6 * 200),
    ),
    "minibatch_hamiltonian_trajectory+exact_metropolis": Case(
        **SHAPED,
        proposal=lambda t: minibatch_hmc(t, "trajectory"),
        test=tallmcmc.exact_metropolis,
        acceptance=(0.4, 0.8),
        data_used=every_step_uses_points(10_000 + 4 * 200),
        slow=True,
    ),
    "minibatch_hamiltonian+minibatch_barker": Case(
        **SHAPED,
        proposal=minibatch_hmc,
        test=lambda: tallmcmc.minibatch_barker(50),
        acceptance=(0.3, 0.5),
        data_used=on_average_below(0.2),
    ),
    "minibatch_hamiltonian+tuna": Case(  # TunaMH evaluates ~2,000 points per step here: half the steps
        **{**SHAPED, "num_samples": 1000},
        proposal=minibatch_hmc,
        test=lambda: tuna_on(TEMPERED_2D),
        acceptance=(0.5, 0.9),
        data_used=on_average_below(0.4),
    ),
    # generalised HMC: the momentum persists and is partially refreshed (ρ = 0.8), flipped on a rejection
    "minibatch_hamiltonian_persistent+exact_metropolis": Case(
        **SHAPED,
        proposal=lambda t: minibatch_hmc(t, persistence=0.8),
        test=tallmcmc.exact_metropolis,
        acceptance=(0.5, 0.9),
        slow=True,
    ),
    "minibatch_hamiltonian_persistent+minibatch_barker": Case(
        **SHAPED,
        proposal=lambda t: minibatch_hmc(t, persistence=0.8),
        test=lambda: tallmcmc.minibatch_barker(50),
        acceptance=(0.3, 0.5),
    ),
    # plain SGHMC is not exact, but at ηλ = 0.05 (λ the posterior precision) its bias is below the check's resolution
    "sghmc+always_accept": Case(**SHAPED, proposal=lambda t: sghmc_at(t, 0.05), test=tallmcmc.always_accept),
    # deliberately wrong samplers: each must fail the same check
    # SGHMC under an MH test as Chen et al. (2016) ran it (ratio taken as 0): the test treats the gradient drift as
    # a symmetric move and halves the variance, where plain SGHMC at the same step is right
    "wrong:sghmc+minibatch_barker_as_printed": Case(
        **SHAPED,
        proposal=lambda t: sghmc_at(t, 0.2),
        test=lambda: tallmcmc.minibatch_barker(50),
        wrong="variance",
        allow_inexact_proposal=True,
    ),
    "wrong:minibatch_hamiltonian_without_kinetic+exact_metropolis": Case(
        **SHAPED,
        proposal=lambda t: without_ratio(minibatch_hmc(t)),
        test=tallmcmc.exact_metropolis,
        wrong="variance",
        slow=True,
    ),
    "wrong:minibatch_hamiltonian_without_kinetic+minibatch_barker": Case(
        **SHAPED,
        proposal=lambda t: without_ratio(minibatch_hmc(t)),
        test=lambda: tallmcmc.minibatch_barker(50),
        wrong="variance",
    ),
    "wrong:proxy_hamiltonian_without_ratio+exact_metropolis": Case(
        **SHAPED,
        proposal=lambda t: without_ratio(
            tallmcmc.proxy_hamiltonian(control_variate(t), 0.4, 3, preconditioner=laplace(t))
        ),
        test=tallmcmc.exact_metropolis,
        wrong="variance",
    ),
    "wrong:drifting_walk+exact_metropolis": Case(
        **{**MINIBATCH, "proposal": lambda target: drifting_walk(0.1, 0.02)},
        test=tallmcmc.exact_metropolis,
        wrong="mean",
        slow=True,
    ),
    "wrong:drifting_walk+minibatch_barker": Case(
        **{**MINIBATCH, "proposal": lambda target: drifting_walk(0.1, 0.02)},
        test=lambda: tallmcmc.minibatch_barker(50),
        wrong="mean",
    ),
    "wrong:langevin_without_ratio+exact_metropolis": Case(
        **GRADIENT,
        proposal=lambda target: without_ratio(tallmcmc.langevin(mala_step(target))),
        test=tallmcmc.exact_metropolis,
        wrong="variance",
    ),
    "wrong:random_walk+austere_adaptive_loose": Case(
        **{**BASELINE, "seed": 12, "starts": 4, "acceptance": None},
        test=lambda: tallmcmc.austere_adaptive(0.05, batch_sizes=(50, 100, 200)),
        wrong="variance",
        slow=True,
    ),
}


@pytest.mark.parametrize(
    "name", [pytest.param(name, marks=pytest.mark.slow) if case.slow else name for name, case in REGISTRY.items()]
)
def test_posterior_check(name):
    case = REGISTRY[name]
    target = case.model
    result, check = run_and_check(
        target.model,
        case.proposal(target),
        case.test(),
        target.mean,
        target.variance,
        initial_positions=target.starts(case.starts, case.num_chains),
        num_samples=case.num_samples,
        seed=case.seed,
        **({"allow_inexact_proposal": True} if case.allow_inexact_proposal else {}),
    )
    if case.wrong is not None:
        assert not check.passed, str(check)
        z = check.mean_z if case.wrong == "mean" else check.variance_z
        assert np.all(np.abs(z) > 4), str(check)
        return
    assert check.passed, str(check)
    if case.acceptance is not None:
        low, high = case.acceptance
        assert low < result.acceptance_rate < high, result.acceptance_rate
    if case.data_used is not None:
        assert case.data_used(result.data_used, target.num_data), (result.data_used.min(), result.data_used.mean())


def test_same_seed_same_draws():
    starts = jnp.asarray(TEMPERED_2D.starts(None, 8))

    def draws():
        return tallmcmc.sample(
            TEMPERED_2D.model,
            tallmcmc.random_walk(0.1),
            tallmcmc.minibatch_barker(50),
            initial_positions=starts,
            num_samples=40,
            num_chains=8,
            progress=False,
            num_chunks=1,
        ).positions

    np.testing.assert_array_equal(draws(), draws())
