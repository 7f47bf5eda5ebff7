"""The acceptance tests the reproductions compare: one registry, with canonical keys and display names.

Every experiment names a test by its key in :data:`METHODS` (the name of the
public factory that builds it, ``"minibatch_barker"``, ``"austere"``, ...): on
the command line (``--methods``), in ``summary.json`` and in code. Tables and
figures show the display name the papers use (``MHminibatch``,
``AustereMH(c)``, ``MHSubLhd``, ...). An experiment's settings reach the
factories through :class:`MethodSettings`.

References
----------
.. [1] Seita, D., Pan, X., Chen, H. and Canny, J. (2017). An efficient
   minibatch acceptance test for Metropolis-Hastings. UAI 2017.
.. [2] Korattikara, A., Chen, Y. and Welling, M. (2014). Austerity in MCMC
   land: cutting the Metropolis-Hastings budget. ICML 2014.
.. [3] Bardenet, R., Doucet, A. and Holmes, C. (2014). Towards scaling up
   Markov chain Monte Carlo: an adaptive subsampling approach. ICML 2014.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

import tallmcmc

#: MHSubLhd's confidence-sequence parameters in every reproduction (Seita et al. 2017, Section 6.1).
CONFIDENCE_GAMMA = 1.5
CONFIDENCE_P = 2.0
CONFIDENCE_DELTA = 0.01


@dataclass(frozen=True)
class MethodSettings:
    """An experiment's settings that the test factories read.

    Attributes
    ----------
    batch_size : int
        m: the minibatch size of ``minibatch_barker``, the stage size of
        ``austere`` and the first batch of ``confidence_sampler``.
    austere_epsilon : float
        ε of the fixed-design ``austere`` test.
    austere_error_bound : float
        Bound on ``austere_conservative``'s worst-case per-test error, for its
        (m, ε) grid search.
    num_data : int or None
        N, for ``austere_conservative``'s design (``None``: the design's own
        default).
    """

    batch_size: int = 50
    austere_epsilon: float = 0.005
    austere_error_bound: float = 0.2
    num_data: int | None = None


@dataclass(frozen=True)
class Method:
    """One acceptance test of the registry.

    Attributes
    ----------
    key : str
        Canonical key: the name of the public factory.
    display_name : str
        The name tables and figures show.
    description : str
        One line: what the test is and which settings it reads.
    factory : callable
        ``factory(settings) -> tallmcmc.AcceptanceTest``.
    """

    key: str
    display_name: str
    description: str
    factory: Callable[[MethodSettings], tallmcmc.AcceptanceTest]

    def build(self, settings: MethodSettings | None = None) -> tallmcmc.AcceptanceTest:
        """The test for ``settings`` (the defaults of :class:`MethodSettings` when ``None``)."""
        return self.factory(MethodSettings() if settings is None else settings)


METHODS: dict[str, Method] = {
    method.key: method
    for method in (
        Method(
            "minibatch_barker",
            "MHminibatch",
            "minibatch Barker test of Seita et al., minibatch size batch_size",
            lambda s: tallmcmc.minibatch_barker(s.batch_size),
        ),
        Method(
            "austere",
            "AustereMH",
            "sequential t-test of Korattikara et al., stage size batch_size, tolerance austere_epsilon",
            lambda s: tallmcmc.austere(s.batch_size, s.austere_epsilon),
        ),
        Method(
            "austere_conservative",
            "AustereMH(c)",
            "AustereMH with (m, ε) chosen for a worst-case error bound austere_error_bound at N = num_data",
            lambda s: tallmcmc.austere_conservative(error_bound=s.austere_error_bound, num_data=s.num_data),
        ),
        Method(
            "confidence_sampler",
            "MHSubLhd",
            f"confidence sampler of Bardenet et al., first batch batch_size, γ = {CONFIDENCE_GAMMA}, "
            f"p = {CONFIDENCE_P:g}, δ = {CONFIDENCE_DELTA}",
            lambda s: tallmcmc.confidence_sampler(
                s.batch_size, gamma=CONFIDENCE_GAMMA, p=CONFIDENCE_P, delta=CONFIDENCE_DELTA
            ),
        ),
        Method(
            "exact_metropolis",
            "full-data MH",
            "Metropolis-Hastings test on all N points",
            lambda s: tallmcmc.exact_metropolis(),
        ),
        Method(
            "exact_barker",
            "full-data Barker",
            "Barker test on all N points",
            lambda s: tallmcmc.exact_barker(),
        ),
    )
}


def method(key: str) -> Method:
    """The registry's entry for ``key``.

    Raises
    ------
    ValueError
        If ``key`` is not a key of :data:`METHODS`.
    """
    try:
        return METHODS[key]
    except (KeyError, TypeError):
        raise ValueError(f"method must be one of {', '.join(METHODS)}; got {key!r}") from None


def display_name(key: str) -> str:
    """The display name of the test ``key`` (e.g. ``"MHSubLhd"`` for ``"confidence_sampler"``)."""
    return method(key).display_name


def build(key: str, settings: MethodSettings | None = None) -> tallmcmc.AcceptanceTest:
    """The test ``key`` built for ``settings``."""
    return method(key).build(settings)


def add_methods_argument(parser: argparse.ArgumentParser, keys: Sequence[str]) -> None:
    """Add ``--methods KEY [KEY ...]`` choosing among ``keys`` (all of them when it is not given).

    Raises
    ------
    ValueError
        If a key is not in :data:`METHODS`.
    """
    keys = list(keys)
    for key in keys:
        method(key)
    parser.add_argument(
        "--methods",
        nargs="+",
        choices=keys,
        default=None,
        metavar="KEY",
        help="tests to run, in this order (default: all): "
        + ", ".join(f"{key} ({METHODS[key].display_name})" for key in keys),
    )


def selected(requested: Iterable[str] | None, keys: Sequence[str], argument: str = "--methods") -> list[str]:
    """The keys to run: ``requested`` in its order (repeats dropped), or all ``keys`` when it is ``None``.

    Raises
    ------
    ValueError
        If ``requested`` names a key outside ``keys`` (the message names ``argument``).
    """
    if requested is None:
        return list(keys)
    requested = list(dict.fromkeys(requested))
    unknown = [key for key in requested if key not in keys]
    if unknown:
        raise ValueError(f"{argument}: unknown method(s) {', '.join(unknown)}; choose from {', '.join(keys)}")
    if not requested:
        raise ValueError(f"{argument}: name at least one method")
    return requested
