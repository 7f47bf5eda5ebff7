"""tallmcmc: Bayesian posterior sampling on tall data sets."""

__version__ = "0.1.0"
