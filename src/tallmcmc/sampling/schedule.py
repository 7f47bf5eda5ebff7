"""Per-step schedules of a run's kept draws: temperatures and step-size factors, and the rules that tie them to the
rest of the run."""

from __future__ import annotations

from typing import NamedTuple

import jax.numpy as jnp
import numpy as np

from tallmcmc.proposals.base import Proposal

__all__ = ["Schedule"]


class Schedule(NamedTuple):
    """Temperatures K_t and step-size factors for kept step t (``None``: not scheduled).

    Build it with :meth:`checked`, which holds every rule that ties a schedule
    to the other arguments of :func:`tallmcmc.sample`.
    """

    temperatures: np.ndarray | None = None
    step_factors: np.ndarray | None = None

    @classmethod
    def checked(
        cls,
        temperature_schedule,
        step_size_schedule,
        num_samples: int,
        proposal: Proposal,
        uses_control_variate: bool,
        temperature: float,
    ) -> Schedule:
        """The schedules as float64 arrays of length ``num_samples``, or a ``ValueError`` naming the argument.

        Rules: one finite positive value per kept step; a step-size schedule
        needs a proposal whose step size can be tuned; a temperature schedule
        cannot be used with a control-variate test, whose proxy sums were built
        at the model's one temperature ``temperature``.
        """
        temperatures = _values(temperature_schedule, "temperature_schedule", num_samples, "temperatures K_t > 0")
        step_factors = _values(step_size_schedule, "step_size_schedule", num_samples, "step-size factors > 0")
        if step_factors is not None and proposal.tune is None:
            raise ValueError(
                f"step_size_schedule needs a proposal whose step size can be tuned (random walks, Langevin, proxy "
                f"proposals); {proposal.name!r} has none"
            )
        if temperatures is not None and uses_control_variate:
            raise ValueError(
                "temperature_schedule cannot be used with a control-variate test: its proxy sums were built at "
                f"temperature {temperature}; run one sample() per temperature with a control variate for each"
            )
        return cls(temperatures, step_factors)

    def window(self, start: int, length: int, dtype) -> tuple:
        """``(temperatures, step factors)`` of kept steps ``start`` to ``start + length`` as JAX arrays (or ``None``)."""
        return tuple(
            None if values is None else jnp.asarray(values[start : start + length], dtype)
            for values in (self.temperatures, self.step_factors)
        )


def _values(values, name: str, num_samples: int, what: str) -> np.ndarray | None:
    """A per-step schedule as a float64 array of length ``num_samples``, or a ``ValueError`` naming it."""
    if values is None:
        return None
    array = np.asarray(values, dtype=np.float64)
    if array.shape != (num_samples,):
        raise ValueError(f"{name} must have one value per kept step, shape ({num_samples},); got shape {array.shape}")
    if not np.all(np.isfinite(array) & (array > 0)):
        raise ValueError(
            f"{name} must hold finite {what}; step {int(np.argmin(np.isfinite(array) & (array > 0)))} is not"
        )
    return array
