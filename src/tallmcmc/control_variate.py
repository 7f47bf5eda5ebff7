r"""Taylor control variates: subsample only what a quadratic proxy cannot explain.

Around a centre :math:`\hat\theta` near the mode, each per-datum
log-likelihood has the Taylor proxy

.. math::

    q_i(\theta) = g_i^\top u + \tfrac12 u^\top H_i u, \qquad u = \theta - \hat\theta,

with :math:`g_i = \nabla \log p(x_i\mid\hat\theta)` and
:math:`H_i = \nabla^2 \log p(x_i\mid\hat\theta)` (first order: drop
:math:`H_i`). The sum of proxy differences is exact and data-free per step,

.. math::

    \sum_i [q_i(\theta') - q_i(\theta)] = G^\top\delta + \tfrac12 (u + u')^\top \bar H \delta,
    \qquad \delta = \theta' - \theta,\; G = \sum_i g_i,\; \bar H = \sum_i H_i,

from two sums made in one pass over the data when the control variate is
built. A subsampling test then estimates only the sum of the **residuals**

.. math:: r_i = \tfrac1K\{[\log p(x_i\mid\theta') - \log p(x_i\mid\theta)] - [q_i(\theta') - q_i(\theta)]\},

whose spread is of order :math:`\|u\|^2\|\delta\|` instead of :math:`\|\delta\|`
near the mode, and adds :math:`\tfrac1K \sum_i [q_i(\theta') - q_i(\theta)]`
exactly. Every per-datum residual needs :math:`g_i` and
:math:`H_i\delta` at the centre for the datum drawn: one forward-over-reverse
pass (``jax.jvp`` of ``jax.grad``), never a d × d matrix per datum. See
``docs/control_variates.md`` for the derivation and the variance argument.

This is the device of Bardenet, Doucet & Holmes (2017), Quiroz et al.
(2019) and Cornish et al. (2019); NumPyro's ``HMCECS`` uses the same
second-order proxy.
"""

from __future__ import annotations

import dataclasses
import warnings
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.flatten_util import ravel_pytree

from tallmcmc._checks import optional_integer_at_least
from tallmcmc.model import Model, Position, check_model

__all__ = ["ControlVariate", "ResidualModel", "taylor_control_variate"]


@dataclasses.dataclass(frozen=True)
class ControlVariate:
    """A Taylor proxy of the per-datum log-likelihoods around ``center`` (see the module docstring).

    Attributes
    ----------
    center
        The expansion point θ̂ (a position, same pytree as the model's).
    gradient_sum
        G = Σᵢ ∇ log p(xᵢ|θ̂), untempered, flat shape (d,).
    hessian_sum
        H̄ = Σᵢ ∇² log p(xᵢ|θ̂), untempered, shape (d, d); ``None`` for first order.
    order
        1 or 2.
    num_data, temperature
        Of the model it was built for (used to refuse another model).
    data_used
        Data points touched to build it (one pass: N).
    log_likelihood
        The model's per-datum log-likelihood (used to refuse another model).
    """

    center: Position
    gradient_sum: jax.Array
    hessian_sum: jax.Array | None
    order: int
    num_data: int
    temperature: float
    data_used: int
    log_likelihood: Any

    @property
    def name(self) -> str:
        return f"taylor control variate (order {self.order})"

    # ------------------------------------------------------------------ checks
    def check_model(self, model: Model) -> None:
        """Refuse a model other than the one this control variate was built for."""
        if (
            model.log_likelihood is not self.log_likelihood
            or model.num_data != self.num_data
            or float(model.temperature) != self.temperature
        ):
            raise ValueError(
                "control_variate was built for another model (a different log_likelihood, N or temperature); "
                "build it with tallmcmc.taylor_control_variate(model, center) for the model you sample"
            )

    # ------------------------------------------------------------------ the proxy
    def _flat_center(self, dtype) -> tuple[jax.Array, Any]:
        flat, unravel = ravel_pytree(self.center)
        return flat.astype(dtype), unravel

    def proxy_log_ratio(self, position: Position, proposed: Position) -> jax.Array:
        """(1/K) Σᵢ [qᵢ(θ′) − qᵢ(θ)], exact, in O(d²) and without data."""
        theta, _ = ravel_pytree(position)
        theta_new, _ = ravel_pytree(proposed)
        center, _ = self._flat_center(theta.dtype)
        delta = theta_new - theta
        value = jnp.dot(self.gradient_sum.astype(theta.dtype), delta)
        if self.order == 2:
            midpoint_offset = 0.5 * (theta + theta_new) - center  # ½(u + u′)
            value = value + midpoint_offset @ (self.hessian_sum.astype(theta.dtype) @ delta)
        return value / self.temperature

    def proxy_log_likelihood(self, position: Position) -> jax.Array:
        """(1/K) Σᵢ qᵢ(θ): the proxy of the tempered log-likelihood, up to a constant (data-free)."""
        theta, _ = ravel_pytree(position)
        center, _ = self._flat_center(theta.dtype)
        u = theta - center
        value = jnp.dot(self.gradient_sum.astype(theta.dtype), u)
        if self.order == 2:
            value = value + 0.5 * u @ (self.hessian_sum.astype(theta.dtype) @ u)
        return value / self.temperature

    def proxy_differences(self, position: Position, proposed: Position, data) -> jax.Array:
        """Per-datum qᵢ(θ′) − qᵢ(θ), untempered, for a batch of data (one jvp of the gradient per datum)."""
        theta, _ = ravel_pytree(position)
        theta_new, _ = ravel_pytree(proposed)
        center, unravel = self._flat_center(theta.dtype)
        delta = theta_new - theta
        midpoint_offset = 0.5 * (theta + theta_new) - center
        log_likelihood = self.log_likelihood

        def one(datum):
            def gradient(flat):
                return ravel_pytree(jax.grad(lambda p: log_likelihood(p, datum))(unravel(flat)))[0]

            if self.order == 1:
                return jnp.dot(gradient(center), delta)
            g, h_delta = jax.jvp(gradient, (center,), (delta,))
            return jnp.dot(g, delta) + jnp.dot(midpoint_offset, h_delta)

        return jax.vmap(one)(data)

    def residual_model(self, model: Model) -> ResidualModel:
        """The model whose per-datum log ratios are the residuals rᵢ (used by the subsampling tests)."""
        return ResidualModel(
            model.log_likelihood,
            model.log_prior,
            model.data,
            model.temperature,
            model.position_shape,
            control_variate=self,
        )


@dataclasses.dataclass(frozen=True)
class ResidualModel(Model):
    """A :class:`Model` whose :meth:`log_likelihood_ratios` are control-variate residuals.

    The subsampling tests see it in place of the model, so their estimators,
    variances, finite-population factors, range bounds and error bounds all work
    on the residuals; the exact proxy sum is added to the data-free part of Δ.
    """

    control_variate: ControlVariate | None = None

    def log_likelihood_ratios(self, position: Position, proposed: Position, data) -> jax.Array:
        exact = super().log_likelihood_ratios(position, proposed, data)
        proxy = self.control_variate.proxy_differences(position, proposed, data)
        return exact - proxy.astype(exact.dtype) / self.temperature


def taylor_control_variate(
    model: Model,
    center: Position,
    *,
    order: int = 2,
    batch_size: int | None = None,
) -> ControlVariate:
    """Build a Taylor control variate of ``model`` around ``center`` (one pass over the data).

    Parameters
    ----------
    model
        The target.
    center
        The expansion point θ̂, ideally the posterior mode
        (``tallmcmc.find_mode(model, start).position``). The residuals are
        small only near it.
    order
        2 (default): gradient and Hessian sums; residuals of order ‖u‖²‖δ‖.
        1: gradient sum only (no d × d matrix: for large d); residuals of
        order ‖u‖‖δ‖, so a larger minibatch is needed.
    batch_size
        Data rows processed together in the setup pass (memory bound);
        ``None`` processes all rows at once.

    Returns
    -------
    ControlVariate
        Pass it to a subsampling test (``minibatch_barker(..., control_variate=cv)``,
        ``austere``, ``austere_conservative``, ``austere_adaptive``,
        ``confidence_sampler``) or to a proxy proposal.

    Raises
    ------
    ValueError
        If ``order`` is not 1 or 2, or ``center`` does not fit the model.

    Warns
    -----
    RuntimeWarning
        If the summed Hessian is not negative semi-definite at ``center`` (the
        control variate stays exact, but ``center`` is not near a mode).
    """
    if order not in (1, 2):
        raise ValueError(f"order must be 1 (gradient only) or 2 (gradient and Hessian); got {order!r}")
    batch_size = optional_integer_at_least(batch_size, "batch_size")
    center = jax.tree_util.tree_map(jnp.asarray, center)
    check_model(model, center, "center")
    flat_center, unravel = ravel_pytree(center)
    num_data = model.num_data

    def chunk_sums(data):
        def total(flat):
            return jnp.sum(model.per_datum_log_likelihood(unravel(flat), data))

        gradient = jax.grad(total)(flat_center)
        hessian = jax.hessian(total)(flat_center) if order == 2 else None
        return gradient, hessian

    chunk_sums = jax.jit(chunk_sums)
    size = num_data if batch_size is None else min(batch_size, num_data)
    gradient_sum = np.zeros(flat_center.shape, np.float64)
    hessian_sum = np.zeros(flat_center.shape * 2, np.float64) if order == 2 else None
    for start in range(0, num_data, size):
        rows = jax.tree_util.tree_map(lambda leaf: leaf[start : start + size], model.data)
        gradient, hessian = chunk_sums(rows)
        gradient_sum += np.asarray(gradient, np.float64)
        if order == 2:
            hessian_sum += np.asarray(hessian, np.float64)
    if order == 2:
        hessian_sum = 0.5 * (hessian_sum + hessian_sum.T)
        largest = float(np.linalg.eigvalsh(hessian_sum).max())
        if largest > 1e-6 * max(1.0, float(np.abs(hessian_sum).max())):
            warnings.warn(
                f"hessian_sum, the summed log-likelihood Hessian at center, is not negative semi-definite (largest "
                f"eigenvalue {largest:.3g}): center is probably not near a mode, the residuals may be large and a "
                "proxy proposal built on it may be improper. Use tallmcmc.find_mode(model, start).position",
                RuntimeWarning,
                stacklevel=2,
            )
    if not np.all(np.isfinite(gradient_sum)) or (order == 2 and not np.all(np.isfinite(hessian_sum))):
        raise ValueError("the gradient or Hessian sum at center is not finite; pick a center inside the support")
    dtype = flat_center.dtype
    return ControlVariate(
        center=center,
        gradient_sum=jnp.asarray(gradient_sum, dtype),
        hessian_sum=None if hessian_sum is None else jnp.asarray(hessian_sum, dtype),
        order=order,
        num_data=num_data,
        temperature=float(model.temperature),
        data_used=num_data,
        log_likelihood=model.log_likelihood,
    )


def warn_if_far_from_mode(control_variate: ControlVariate, spread: float, sigma: float) -> None:
    """Warn once when the measured residual spread is too large for a minibatch to help."""
    warnings.warn(
        f"the control variate's residuals are large (N·sd(rᵢ) ≈ {spread:.3g} against σ = {sigma:g}): most steps "
        "will use a large fraction of the data. Build it at the mode: "
        "tallmcmc.taylor_control_variate(model, tallmcmc.find_mode(model, start).position)",
        RuntimeWarning,
        stacklevel=3,
    )
