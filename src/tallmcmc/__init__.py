"""tallmcmc: Bayesian posterior sampling on tall data sets.

Minibatch Metropolis–Hastings tests (the minibatch Barker test of Seita et al.
and the baselines it is measured against), proposals, and Stein sample-quality
diagnostics.

The package is organised by concept: :mod:`tallmcmc.proposals`,
:mod:`tallmcmc.acceptance`, :mod:`tallmcmc.correction`, :mod:`tallmcmc.stein`
and :mod:`tallmcmc.reproduce`, with the model, the kernel and the driver at the
top. The public factories are re-exported here (the BlackJAX practice), so
``tallmcmc.minibatch_barker(...)`` is the function and
``tallmcmc.acceptance.minibatch_barker`` its module.
"""

from tallmcmc import compilation_cache

compilation_cache.configure()  # JAX's persistent compilation cache, on unless TALLMCMC_COMPILATION_CACHE=0

from tallmcmc import threefry_lowering  # noqa: E402

threefry_lowering.configure()  # JAX's random numbers' hash straight-line on a CPU, unless TALLMCMC_THREEFRY_STRAIGHT=0

from typing import TYPE_CHECKING  # noqa: E402

from tallmcmc import acceptance, correction, distributed, proposals  # noqa: E402

if TYPE_CHECKING:
    from tallmcmc import stein
from tallmcmc._version import __version__ as __version__
from tallmcmc.acceptance.austere import austere, austere_adaptive, austere_conservative
from tallmcmc.acceptance.austere_design import choose_austere_parameters
from tallmcmc.acceptance.base import AcceptanceInfo, AcceptanceTest
from tallmcmc.acceptance.confidence import confidence_sampler
from tallmcmc.acceptance.exact import always_accept, exact_barker, exact_metropolis
from tallmcmc.acceptance.minibatch_barker import minibatch_barker
from tallmcmc.acceptance.penalty import minibatch_penalty
from tallmcmc.acceptance.tuna import tuna
from tallmcmc.automatic import TallDiagnosis, sample_tall
from tallmcmc.control_variate import ControlVariate, taylor_control_variate
from tallmcmc.correction.distribution import CorrectionDistribution, correction_distribution
from tallmcmc.interop.numpyro import from_numpyro
from tallmcmc.kernel import MHInfo, MHState, build_kernel
from tallmcmc.mode import ModeResult, find_mode
from tallmcmc.model import Model, check_model
from tallmcmc.proposals.base import Proposal
from tallmcmc.proposals.langevin import langevin, stochastic_gradient_langevin
from tallmcmc.proposals.laplace import laplace_covariance, laplace_independence, laplace_random_walk
from tallmcmc.proposals.minibatch_hamiltonian import minibatch_hamiltonian
from tallmcmc.proposals.proxy import proxy_hamiltonian, proxy_langevin
from tallmcmc.proposals.random_walk import random_walk
from tallmcmc.proposals.sghmc import sghmc
from tallmcmc.run_warnings import InexactProposalWarning
from tallmcmc.sampling import RunState, SamplingResult, WarmupResult, load_result, sample, warmup
from tallmcmc.setup_fast import FastSetup, fast_setup

__all__ = [
    "AcceptanceInfo",
    "AcceptanceTest",
    "CorrectionDistribution",
    "InexactProposalWarning",
    "MHInfo",
    "MHState",
    "Model",
    "Proposal",
    "RunState",
    "SamplingResult",
    "TallDiagnosis",
    "WarmupResult",
    "acceptance",
    "always_accept",
    "austere",
    "austere_adaptive",
    "austere_conservative",
    "build_kernel",
    "check_model",
    "ModeResult",
    "find_mode",
    "FastSetup",
    "fast_setup",
    "from_numpyro",
    "ControlVariate",
    "taylor_control_variate",
    "choose_austere_parameters",
    "confidence_sampler",
    "correction",
    "correction_distribution",
    "distributed",
    "exact_barker",
    "exact_metropolis",
    "langevin",
    "load_result",
    "minibatch_barker",
    "minibatch_hamiltonian",
    "minibatch_penalty",
    "proposals",
    "random_walk",
    "laplace_covariance",
    "laplace_independence",
    "laplace_random_walk",
    "proxy_hamiltonian",
    "proxy_langevin",
    "sample",
    "sample_tall",
    "sghmc",
    "stein",
    "stochastic_gradient_langevin",
    "tuna",
    "warmup",
]


def __getattr__(name: str):
    """:mod:`tallmcmc.stein` on first use: it imports numba and scipy.spatial, 0.4 s that a script which never
    measures a Stein discrepancy would otherwise wait for at ``import tallmcmc``."""
    if name == "stein":
        import importlib

        return importlib.import_module("tallmcmc.stein")
    raise AttributeError(f"module 'tallmcmc' has no attribute {name!r}")
