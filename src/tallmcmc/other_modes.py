"""Other modes: a look for modes of the posterior other than the one ``sample_tall`` samples.

``sample_tall`` finds one mode, builds its proposals on the Laplace approximation there and starts every chain from
it, so its chains cannot cross to another mode and r̂ cannot see one. An unordered mixture is the common case: its
components can swap labels, the posterior has a mode per labelling, and which one the chains sampled was decided by
the seed (the fourth user-model audit: mu = (−1.01, 1.49) at seeds 0 and 2, (1.49, −1.01) at seeds 1 and 3, r̂ 1.001
at every seed, no warning).

:func:`other_modes` looks in two steps, on ``fast_setup``'s own compiled pass
(:func:`tallmcmc.setup_fast.subsample_passes`: after that setup it compiles nothing new):

1. Trust-region Newton iterations (:func:`tallmcmc.mode._trust_region_newton`, as ``find_mode`` runs them) on a
   subsample of one chunk, 4,096 rows (all N below 8,192), its likelihood scaled to N, so that its curvature is the
   full data's, from the mode sampled and from :data:`STARTS` other starts: the mode reflected through the search's
   start, then random points of the unconstrained space. The modes of that one subsample posterior are compared with
   each other, never with the full-data mode (a subsample's mode lies about √(d·N/n) posterior sd from it by noise
   alone): one more than :data:`DISTINCT_SD` posterior sd from the sampled mode's counterpart is distinct. A
   unimodal posterior stops here, after about 26 evaluations of the chunk (≈ 0.1 pass at N = 10⁶).
2. From the distinct one of highest density, the same iterations on all the data (a few passes, only then): where
   they converge more than :data:`DISTINCT_SD` posterior sd from the mode sampled, with a log density within
   :data:`GAP_NATS` of it, the look reports that mode. A mode that much lower carries next to no mass (e^−10 of the
   sampled mode's, for equal curvatures), like the swapped labelling of a mixture whose weights are known.

A mode that is the sampled one moved by whole turns (2π) in some coordinates, at the same height, is a periodic
parameter's copy of it (NumPyro's ``CircularReparam`` samples an unwrapped angle) and is not reported.

It is a heuristic: a mode that none of its starts reaches is not seen.
"""

from __future__ import annotations

from typing import NamedTuple

import jax.numpy as jnp
import numpy as np
from jax.flatten_util import ravel_pytree

from tallmcmc.mode import _trust_region_newton
from tallmcmc.model import Model, Position
from tallmcmc.setup_fast import subsample_passes

#: Starts besides the mode sampled: its reflection through the search's start, then random points.
STARTS = 3
#: Two modes further apart than this, in posterior sd (the Laplace metric at the mode sampled), are distinct. Two
#: searches that reach the same mode stop within 0.01 sd of it.
DISTINCT_SD = 6.0
#: A distinct mode whose full-data log density is more than this below the sampled mode's is not reported.
GAP_NATS = 10.0
#: Each search's iterations (one pass of its data each).
MAX_ITERATIONS = 60
_STREAM = 0x0DE5  # the subsample's rows and the random starts


class OtherMode(NamedTuple):
    """A mode of the posterior other than the one sampled (:func:`other_modes`)."""

    position: Position  # the mode, unconstrained
    shown: str  # the same, as the model reports its draws (constrained, by site)
    distance_sd: float  # from the mode sampled, in posterior sd
    gap: float  # log π(sampled) − log π(other) on all the data (negative: the other is higher)

    def problem(self) -> str:
        if abs(self.gap) < 1.0:
            relation = f"as high as the one sampled (they differ by {abs(self.gap):.2g})"
        elif self.gap > 0:
            relation = f"{self.gap:.3g} below the one sampled"
        else:
            relation = f"{-self.gap:.3g} above the one sampled"
        return (
            f"the posterior has more than one mode: a mode search from another start reached a mode "
            f"{self.distance_sd:.3g} posterior sd from the one sampled ({self.shown}), with a log density "
            f"{relation}. The chains start at one mode and do not cross between modes, so the draws describe that "
            "mode only. In a mixture whose components can swap labels, the run's seed chose the labelling: "
            "identify the components (order them, e.g. dist.TransformedDistribution(dist.Normal(0, 5).expand([K]), "
            "transforms.OrderedTransform()) for their means) and sample again; for modes that differ in kind, use "
            "a sampler for multimodal posteriors (docs/sample_tall.md, 'More than one mode')"
        )


class Look(NamedTuple):
    """What :func:`other_modes` did: the mode it reports (or ``None``) and the data points its searches touched."""

    other: OtherMode | None
    data_used: int


def other_modes(model: Model, mode, covariance: np.ndarray, start: Position, seed: int = 0) -> Look | None:
    """Look for a mode other than ``mode`` (a :class:`tallmcmc.mode.ModeResult`, the mode sampled, whose Laplace
    covariance is ``covariance``) from its reflection through ``start`` (the search's start) and random starts
    (module docstring). ``None`` where the look cannot start (a model whose pass cannot be built).
    """
    flat, unravel = ravel_pytree(mode.position)
    flat = np.asarray(flat)
    here = flat.astype(np.float64)
    precision = np.linalg.inv(covariance)

    def apart(theta, base) -> float:
        step = np.asarray(theta, np.float64) - base
        return float(np.sqrt(max(step @ precision @ step, 0.0)))

    rng = np.random.default_rng([_STREAM, seed])
    counter = None
    try:
        evaluate, counter = subsample_passes(model, flat, unravel, seed=[_STREAM, seed])
        # one chunk of rows (the setup's compiled pass evaluates a chunk per call), or all N below two chunks
        level = evaluate.chunk if model.num_data >= 2 * evaluate.chunk else None

        def search(theta, rows):
            evaluate.level(rows)
            theta = evaluate.cast(theta)
            theta, point, _, stop = _trust_region_newton(evaluate, theta, evaluate.full(theta), 0.01, MAX_ITERATIONS)
            return theta, point, stop.startswith("converged") and bool(np.all(np.isfinite(point.gradient)))

        centre = np.asarray(ravel_pytree(start)[0], np.float64)
        scale = max(1.0, float(np.sqrt(np.mean(here**2))))
        starts = [here, 2 * centre - here] + [rng.normal(0.0, scale, here.shape) for _ in range(STARTS - 1)]
        found = [search(theta, level) for theta in starts]
        counterpart, _, settled = found[0]
        base = np.asarray(counterpart, np.float64)
        candidates = [
            (theta, point) for theta, point, converged in found[1:] if converged and apart(theta, base) > DISTINCT_SD
        ]
        if not (settled and candidates):
            return Look(None, counter.spent)
        highest = min(candidates, key=lambda candidate: candidate[1].value)[0]  # value: −log π
        other, at_other, converged = search(highest, None)  # on all the data now
        evaluate.level(None)
        at_sampled = evaluate.full(flat)
    except Exception:  # the look is a courtesy: a model that fails on it says nothing here, what it read is counted
        return None if counter is None else Look(None, counter.spent)
    gap = float(at_other.value - at_sampled.value)  # log π(sampled) − log π(other)
    distance = apart(other, here)
    if not (converged and distance > DISTINCT_SD and gap <= GAP_NATS) or _whole_turns_apart(
        other, here, precision, gap
    ):
        return Look(None, counter.spent)
    position = unravel(jnp.asarray(other, flat.dtype))
    return Look(OtherMode(position, _shown(model, position), distance, gap), counter.spent)


def _whole_turns_apart(other: np.ndarray, here: np.ndarray, precision: np.ndarray, gap: float) -> bool:
    """Whether ``other`` is the mode sampled moved by whole turns (2π) in some coordinates, at the same height: a
    periodic parameter's copy of that mode (an angle left unwrapped, as NumPyro's ``CircularReparam`` leaves
    ``<site>_unwrapped``), the same posterior, nothing to report. Within 1 posterior sd and 1 nat."""
    step = np.asarray(other, np.float64) - here
    turns = np.round(step / (2 * np.pi))
    left = step - 2 * np.pi * turns
    return bool(np.any(turns != 0)) and abs(gap) < 1.0 and float(np.sqrt(max(left @ precision @ left, 0.0))) < 1.0


def _shown(model: Model, position: Position) -> str:
    """A position as the model reports its draws (its ``constrain``: by site for a NumPyro model), in a few digits."""
    try:
        reported = model.constrain(position) if model.constrain is not None else position
    except Exception:
        reported = position
    if isinstance(reported, dict):
        return ", ".join(
            f"{name} = {np.array2string(np.asarray(value), precision=3, threshold=6)}"
            for name, value in reported.items()
        )
    return f"at {np.array2string(np.asarray(ravel_pytree(reported)[0]), precision=3, threshold=8)}"
