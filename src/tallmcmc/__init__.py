"""tallmcmc: Bayesian posterior sampling on tall data sets.

Minibatch Metropolis–Hastings tests (the minibatch Barker test of Seita et al.
and the baselines it is measured against), proposals, and Stein sample-quality
diagnostics.
"""

from tallmcmc.acceptance import AcceptanceTest, TestInfo, always_accept, exact_barker, exact_metropolis
from tallmcmc.austere import austere, austere_adaptive, austere_conservative, choose_austere_parameters
from tallmcmc.confidence import confidence_sampler
from tallmcmc.correction import CorrectionDistribution, correction_distribution
from tallmcmc.kernel import MHInfo, MHState, build_kernel
from tallmcmc.langevin import langevin, stochastic_gradient_langevin
from tallmcmc.minibatch_barker import minibatch_barker
from tallmcmc.model import Model, check_model
from tallmcmc.proposals import Proposal, random_walk
from tallmcmc.sampling import SamplingResult, sample

__version__ = "0.1.0"

__all__ = [
    "AcceptanceTest",
    "CorrectionDistribution",
    "MHInfo",
    "MHState",
    "Model",
    "Proposal",
    "SamplingResult",
    "TestInfo",
    "austere",
    "austere_adaptive",
    "austere_conservative",
    "always_accept",
    "build_kernel",
    "check_model",
    "choose_austere_parameters",
    "confidence_sampler",
    "correction_distribution",
    "exact_barker",
    "exact_metropolis",
    "langevin",
    "minibatch_barker",
    "random_walk",
    "sample",
    "stochastic_gradient_langevin",
]
