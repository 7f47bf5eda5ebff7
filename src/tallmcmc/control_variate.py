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
exactly. Every per-datum residual needs :math:`g_i^\top\delta` and
:math:`\bar u^\top H_i\delta` at the centre for the datum drawn: one
forward-over-forward pass (``jax.jvp`` of ``jax.jvp``) through the datum's
log-likelihood, never a length-d gradient or a d × d matrix per datum. See
``docs/control_variates.md`` for the derivation and the variance argument.

With ``curvature`` other than ``"per_datum"`` every datum shares one
curvature instead: :math:`q_i(\theta) = g_i^\top u + \tfrac12 u^\top (A/N) u`
with :math:`A` the summed Hessian itself (``"shared"``), its diagonal
(``"diagonal"``) or, for ``"low_rank"``, the k largest eigenpairs of the
diagonally scaled D^{-1/2}(−H̄)D^{-1/2} (D = −diag(H̄)), exact in their
directions, with a diagonal across them.
The proxy sum :math:`G^\top\delta + \bar u^\top A\delta` is still exact and
data-free, so the decisions stay exact for any :math:`A`; each residual needs
only :math:`g_i^\top\delta` (one forward-mode jvp per datum) and storage is O(d) or
O(dk). The shared term is the same for every datum, so the residuals' spread
is that of ``order=1``: :math:`A` only shifts their mean and shapes the proxy
posterior of the proxy proposals.

This is the device of Bardenet, Doucet & Holmes (2017), Quiroz et al.
(2019) and Cornish et al. (2019); NumPyro's ``HMCECS`` uses the same
second-order proxy.
"""

from __future__ import annotations

import dataclasses
import warnings
from collections.abc import Callable, Iterator
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.flatten_util import ravel_pytree

from tallmcmc import program_cache, sharding  # sharding.gather_partials is looked up at call time (tests replace it)
from tallmcmc._checks import integer_at_least, optional_integer_at_least
from tallmcmc._device import to_device
from tallmcmc.model import Model, Position, check_differentiable, check_model
from tallmcmc.precision import full_float32_dots, unwrapped
from tallmcmc.sharding import row_sharding

__all__ = ["CURVATURES", "ControlVariate", "ResidualModel", "taylor_control_variate"]

#: The ``curvature`` options of :func:`taylor_control_variate` (second order).
CURVATURES = ("per_datum", "shared", "diagonal", "low_rank")
_OVERSAMPLING = 10  # extra random directions of the randomized range finder (Halko et al. 2011, §4.2)
_POWER_ITERATIONS = 1  # power iterations of the range finder (Halko et al. 2011, Algorithm 4.4)
_DIRECTION_BLOCK = 32  # Hessian-vector products per compiled call when summing the Hessian's diagonal
#: Without ``batch_size``, a pass takes at most this many rows × d at once: its per-datum gradients (rows × d
#: floats, 512 MiB in float32) — all N rows at once below it, as before; chunks of 2²⁷/d rows above (a random
#: intercept per group at d = 2,001 and N = 10⁶ peaked at 8.2 GB in one pass of all rows).
_ROWS_TIMES_DIMENSION_AT_ONCE = 2**27
_SCALED_FLOOR = 1e-3  # least curvature of the "low_rank" approximation, relative to H̄'s own diagonal
_SCALE_FLOOR = 1e-12  # least −diag(H̄) used to scale, relative to its largest (Σ floored at 1e-6 of its largest)


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
        H̄ = Σᵢ ∇² log p(xᵢ|θ̂), untempered, shape (d, d), for the
        ``"per_datum"`` and ``"shared"`` curvatures; ``None`` for first order
        and for the ``"diagonal"`` and ``"low_rank"`` curvatures.
    order
        1 or 2.
    num_data, temperature
        Of the model it was built for (used to refuse another model).
    data_used
        Data points touched to build it: N per pass over the data (one pass,
        three for ``"low_rank"``).
    log_likelihood
        The model's per-datum log-likelihood (used to refuse another model).
    curvature
        One of :data:`CURVATURES`: ``"per_datum"`` (each datum's own Hessian
        Hᵢ, the default) or a curvature A/N shared by every datum, with A
        ``hessian_sum`` (``"shared"``), ``diag(hessian_diagonal)``
        (``"diagonal"``) or ``Σ (V diag(λ) Vᵀ + P diag(hessian_diagonal) P) Σ``
        with P = I − V Vᵀ and Σ = ``diag(hessian_scale)`` (``"low_rank"``,
        V = ``hessian_basis``, λ = ``hessian_eigenvalues``): exact along the
        k directions Σ⁻¹V, a diagonal across them (``docs/control_variates.md``).
    hessian_diagonal
        (d,): for ``"diagonal"`` the diagonal of H̄; for ``"low_rank"`` −E,
        the scaled curvature across V: Eⱼ = (Peⱼ)ᵀS(Peⱼ)/‖Peⱼ‖², the Rayleigh
        quotient of S = Σ⁻¹(−H̄)Σ⁻¹ along the j-th coordinate projected off V,
        floored at 10⁻³ (so < 0). ``None`` otherwise.
    hessian_basis, hessian_eigenvalues
        (d, k) orthonormal columns V and (k,) values λ = −μ: the k largest
        eigenpairs (μ, V) of the scaled S, from a randomized eigendecomposition,
        μ floored at 10⁻³ (so λ < 0 and A is negative definite) (``"low_rank"``
        only; ``None`` otherwise).
    hessian_scale
        (d,), ``"low_rank"`` only: Σ's diagonal, √(−diag(H̄)) (floored at
        10⁻⁶ of its largest entry), so that S has unit diagonal. ``None``
        otherwise (Σ = I).
    outlying_indices, outlying_rows
        Rows whose residuals are outliers, summed exactly at every step
        instead of sampled (:mod:`tallmcmc.outlying_rows`): their indices
        (m,), sorted int32, and their data (the model's data at those
        indices). A subsampling test then sees zero for them and adds their
        residual sum to the data-free part of Δ, so its estimate stays
        unbiased and loses their share of the variance (a stratified
        estimator). ``None`` for none (the default).
    outlying_gradient_sum, outlying_hessian_sum
        Where the proxy proposals follow the outlying rows' own
        log-likelihoods (:attr:`outlying_in_proxy`; ``with_outlying_rows(...,
        in_proxy=True)``): those rows' share of G (d,) and, for
        ``"per_datum"`` curvature, of H̄ (d, d) — their Taylor part, taken out
        of the proxy so that their own log-likelihoods can replace it
        (``None`` otherwise; with a shared curvature their share of A is
        m/N of it).
    """

    center: Position
    gradient_sum: jax.Array
    hessian_sum: jax.Array | None
    order: int
    num_data: int
    temperature: float
    data_used: int
    log_likelihood: Any
    curvature: str = "per_datum"
    hessian_diagonal: jax.Array | None = None
    hessian_basis: jax.Array | None = None
    hessian_eigenvalues: jax.Array | None = None
    hessian_scale: jax.Array | None = None
    outlying_indices: jax.Array | None = None
    outlying_rows: Any = None
    outlying_gradient_sum: jax.Array | None = None
    outlying_hessian_sum: jax.Array | None = None

    @property
    def num_outlying(self) -> int:
        """m, the number of rows summed exactly at every step (0 without any)."""
        return 0 if self.outlying_indices is None else int(self.outlying_indices.shape[0])

    @property
    def name(self) -> str:
        """Key of its setup cost in ``SamplingResult.setup_data_used``."""
        if self.order == 2 and self.curvature != "per_datum":
            return f"taylor control variate (order 2, {self.curvature} curvature)"
        return f"taylor control variate (order {self.order})"

    # ------------------------------------------------------------------ checks
    def check_model(self, model: Model) -> None:
        """Refuse a model other than the one this control variate was built for."""
        if (
            unwrapped(model.log_likelihood) is not unwrapped(self.log_likelihood)
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

    @full_float32_dots  # part of the target: float32 products at full precision (tallmcmc.precision)
    def hessian_times(self, vector: jax.Array) -> jax.Array:
        """A v for the summed curvature A of the proxy (H̄, or its diagonal or low-rank approximation).

        O(d²) for ``"per_datum"`` and ``"shared"``, O(d) for ``"diagonal"``,
        O(dk) for ``"low_rank"``; data-free. Second order only.
        """
        dtype = vector.dtype
        if self.hessian_sum is not None:
            return self.hessian_sum.astype(dtype) @ vector
        diagonal = self.hessian_diagonal.astype(dtype)
        if self.hessian_basis is None:
            return diagonal * vector
        scale = 1 if self.hessian_scale is None else self.hessian_scale.astype(dtype)
        scaled = scale * vector  # A = Σ (V Λ Vᵀ + P E P) Σ, P = I − V Vᵀ, Σ = diag(hessian_scale)
        basis = self.hessian_basis.astype(dtype)
        along = basis.T @ scaled
        across = diagonal * (scaled - basis @ along)
        inner = basis @ (self.hessian_eigenvalues.astype(dtype) * along) + across - basis @ (basis.T @ across)
        return scale * inner

    def hessian_matrix(self) -> np.ndarray:
        """The summed curvature A of the proxy as a dense (d, d) float64 matrix (O(d²) memory: for inspection).

        H̄ itself for ``"per_datum"`` and ``"shared"``; its diagonal or
        low-rank approximation otherwise. Second order only.
        """
        if self.order != 2:
            raise ValueError("a first-order control variate has no curvature; build it with order=2")
        if self.hessian_sum is not None:  # stored whole: no products to assemble it from (3.2 s of them at d = 2,001)
            matrix = np.asarray(self.hessian_sum, np.float64)
            return 0.5 * (matrix + matrix.T)

        # hessian_times itself, on float64 host copies of the parts: a few d-vectors, not worth compiling programs
        parts = ("hessian_sum", "hessian_diagonal", "hessian_basis", "hessian_eigenvalues", "hessian_scale")
        host = dataclasses.replace(
            self,
            **{
                name: None if getattr(self, name) is None else np.asarray(getattr(self, name), np.float64)
                for name in parts
            },
        )
        matrix = np.stack([host.hessian_times(column) for column in np.eye(self.gradient_sum.shape[0])])
        return 0.5 * (matrix + matrix.T)

    @full_float32_dots  # part of the target: float32 products at full precision (tallmcmc.precision)
    def proxy_log_ratio(self, position: Position, proposed: Position) -> jax.Array:
        """(1/K) Σᵢ [qᵢ(θ′) − qᵢ(θ)], exact and without data (O(d²), O(d) or O(dk): see :meth:`hessian_times`)."""
        theta, _ = ravel_pytree(position)
        theta_new, _ = ravel_pytree(proposed)
        center, _ = self._flat_center(theta.dtype)
        delta = theta_new - theta
        value = jnp.dot(self.gradient_sum.astype(theta.dtype), delta)
        if self.order == 2:
            midpoint_offset = 0.5 * (theta + theta_new) - center  # ½(u + u′)
            value = value + midpoint_offset @ self.hessian_times(delta)
        return value / self.temperature

    @full_float32_dots  # part of the target: float32 products at full precision (tallmcmc.precision)
    def proxy_log_likelihood(self, position: Position) -> jax.Array:
        """(1/K) Σᵢ qᵢ(θ): the proxy of the tempered log-likelihood, up to a constant (data-free)."""
        theta, _ = ravel_pytree(position)
        center, _ = self._flat_center(theta.dtype)
        u = theta - center
        value = jnp.dot(self.gradient_sum.astype(theta.dtype), u)
        if self.order == 2:
            value = value + 0.5 * u @ self.hessian_times(u)
        return value / self.temperature

    @full_float32_dots  # part of the target: float32 products at full precision (tallmcmc.precision)
    def proposal_log_likelihood(self, position: Position) -> jax.Array:
        """What the proxy proposals follow: :meth:`proxy_log_likelihood`, and with ``outlying_in_proxy`` the
        outlying rows' own (1/K) log p(xᵢ|θ) in place of their Taylor proxies qᵢ (up to a constant).

        Data-free without ``outlying_in_proxy``; with it, it reads the m outlying rows. Where a few rows inform
        directions that the rest barely do (a random intercept of a group of five rows), their Taylor proxies are
        what makes the proxy misfit the posterior, and the moves that follow them are rejected: following their
        exact log-likelihood costs m rows per evaluation and leaves the proxy quadratic only where the data are
        many (``docs/sample_tall.md``, "Rows the proxy cannot follow").
        """
        value = self.proxy_log_likelihood(position)
        return value + self.outlying_excess(position) if self.outlying_in_proxy else value

    @full_float32_dots  # part of the target: float32 products at full precision (tallmcmc.precision)
    def outlying_excess(self, position: Position) -> jax.Array:
        """(1/K) Σ over the outlying rows of [log p(xᵢ|θ) − qᵢ(θ)] (up to a constant): what
        :meth:`proposal_log_likelihood` adds to the proxy with ``outlying_in_proxy``. Reads the m rows."""
        theta, _ = ravel_pytree(position)
        center, _ = self._flat_center(theta.dtype)
        u = theta - center
        exact = jnp.sum(jax.vmap(self.log_likelihood, in_axes=(None, 0))(position, self.outlying_rows))
        taylor = jnp.dot(self.outlying_gradient_sum.astype(theta.dtype), u)
        if self.order == 2:
            if self.outlying_hessian_sum is not None:
                curved = self.outlying_hessian_sum.astype(theta.dtype) @ u
            else:  # a shared curvature: each row's proxy has A/N
                curved = self.hessian_times(u) * (self.num_outlying / self.num_data)
            taylor = taylor + 0.5 * jnp.dot(u, curved)
        return (exact.astype(theta.dtype) - taylor) / self.temperature

    @property
    def outlying_in_proxy(self) -> bool:
        """Whether the proxy proposals follow the outlying rows' own log-likelihoods instead of their Taylor proxies
        (:meth:`proposal_log_likelihood`): the test's Δ is the same either way; only the moves change, and each
        evaluation of the proposal's target reads the m rows."""
        return self.outlying_gradient_sum is not None

    @property
    def proposal_rows(self) -> int:
        """Rows one evaluation of :meth:`proposal_log_likelihood` reads: m with ``outlying_in_proxy``, else 0."""
        return self.num_outlying if self.outlying_in_proxy else 0

    @full_float32_dots  # part of the target: float32 products at full precision (tallmcmc.precision)
    def proxy_differences(self, position: Position, proposed: Position, data) -> jax.Array:
        """Per-datum qᵢ(θ′) − qᵢ(θ), untempered, for a batch of data.

        ``"per_datum"`` curvature: gᵢᵀδ + ūᵀHᵢδ, the first and the mixed
        second directional derivatives of ℓᵢ at the centre along δ and
        ū = ½(u + u′), from one forward-over-forward ``jvp`` per datum. First
        order and shared curvatures: gᵢᵀδ from one ``jvp`` per datum, plus the
        same ūᵀAδ/N for every datum.

        Forward mode carries the two directions through ℓᵢ itself, so a datum
        costs a few evaluations of its own log-likelihood whatever d is; the
        gradient and Hessian-vector product (reverse mode) it replaces built two
        length-d vectors per datum, which on a model whose rows each touch a few
        coordinates (a group's intercept) cost 5.5× as much at d = 501
        (``docs/sample_tall.md``, "What a residual costs").
        """
        theta, _ = ravel_pytree(position)
        theta_new, _ = ravel_pytree(proposed)
        center, unravel = self._flat_center(theta.dtype)
        delta = theta_new - theta
        midpoint_offset = 0.5 * (theta + theta_new) - center
        log_likelihood = self.log_likelihood
        per_datum = self.order == 2 and self.curvature == "per_datum"

        def forward(datum):
            def slope_along_delta(flat):  # gᵀδ at flat
                return jax.jvp(lambda point: log_likelihood(unravel(point), datum), (flat,), (delta,))[1]

            if not per_datum:
                return slope_along_delta(center)
            slope, curvature = jax.jvp(slope_along_delta, (center,), (midpoint_offset,))
            return slope + curvature

        def reverse(datum):  # the same quantities from a gradient and a Hessian-vector product
            def gradient(flat):
                return ravel_pytree(jax.grad(lambda point: log_likelihood(unravel(point), datum))(flat))[0]

            if not per_datum:
                return jnp.dot(gradient(center), delta)
            g, h_delta = jax.jvp(gradient, (center,), (delta,))
            return jnp.dot(g, delta) + jnp.dot(midpoint_offset, h_delta)

        one = reverse if _has_custom_vjp(log_likelihood, unravel, center, data) else forward

        differences = jax.vmap(one)(data)
        if self.order == 2 and self.curvature != "per_datum":
            differences = differences + midpoint_offset @ self.hessian_times(delta) / self.num_data
        return differences

    def residual_model(self, model: Model) -> ResidualModel:
        """The model whose per-datum log ratios are the residuals rᵢ (used by the subsampling tests).

        It reaches its rows as ``model`` does (the same ``shards``).
        """
        return ResidualModel(
            model.log_likelihood,
            model.log_prior,
            model.data,
            model.temperature,
            model.position_shape,
            model.constrain,
            control_variate=self,
        ).with_shards(model.shards)


def _has_custom_vjp(log_likelihood: Callable, unravel: Callable, center: jax.Array, data) -> bool:
    """Whether one datum's log-likelihood calls a ``jax.custom_vjp`` function (seen in its jaxpr, loops and nested
    calls included).

    JAX differentiates such a function through its backward rule only: a jvp
    of it fails (eagerly; under ``jit`` a first-order jvp is deferred to a
    linearisation that a second jvp cannot take). Its residuals then take the
    gradient-and-Hessian-vector form. Traced apart (``jax.make_jaxpr`` on
    shapes), so nothing is added to the program being traced.
    """
    datum = jax.tree_util.tree_map(lambda leaf: jax.ShapeDtypeStruct(leaf.shape[1:], leaf.dtype), data)
    point = jax.ShapeDtypeStruct(center.shape, center.dtype)
    closed = jax.make_jaxpr(lambda flat, row: log_likelihood(unravel(flat), row))(point, datum)
    return any("custom_vjp" in equation.primitive.name for equation in all_equations(closed.jaxpr))


def all_equations(jaxpr) -> Iterator:
    """Every equation of ``jaxpr`` and of the jaxprs inside it (loop bodies, nested calls, custom rules)."""
    for equation in jaxpr.eqns:
        yield equation
        for parameter in equation.params.values():
            for inner in parameter if isinstance(parameter, (tuple, list)) else (parameter,):
                inner = getattr(inner, "jaxpr", inner)  # a ClosedJaxpr holds its Jaxpr
                if hasattr(inner, "eqns"):
                    yield from all_equations(inner)


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

    def log_likelihood_ratios_at(self, position: Position, proposed: Position, indices: jax.Array) -> jax.Array:
        """The residuals at ``indices``, with 0 for the control variate's outlying rows (their residuals are summed
        exactly, :meth:`outlying_log_ratio`; a minibatch that draws one sees 0, so the estimate of the rest's sum
        stays unbiased)."""
        values = super().log_likelihood_ratios_at(position, proposed, indices)
        outlying = self.control_variate.outlying_indices
        if outlying is None:
            return values
        outlying = jnp.asarray(outlying, jnp.int32)
        where = jnp.clip(jnp.searchsorted(outlying, indices), 0, outlying.shape[0] - 1)
        return jnp.where(outlying[where] == indices, jnp.zeros((), values.dtype), values)

    def outlying_log_ratio(self, position: Position, proposed: Position) -> jax.Array:
        """(1/K) Σ of the residuals of the control variate's outlying rows (m residuals; 0 without any)."""
        if self.control_variate.outlying_indices is None:
            return jnp.zeros(())
        return jnp.sum(self.log_likelihood_ratios(position, proposed, self.control_variate.outlying_rows))


def taylor_control_variate(
    model: Model,
    center: Position,
    *,
    order: int = 2,
    curvature: str = "per_datum",
    rank: int | None = None,
    batch_size: int | None = None,
) -> ControlVariate:
    """Build a Taylor control variate of ``model`` around ``center`` (one pass over the data; three for low rank).

    Parameters
    ----------
    model
        The target.
    center
        The expansion point θ̂, ideally the posterior mode
        (``tallmcmc.find_mode(model, start).position``). The residuals are
        small only near it.
    order
        2 (default): gradient sum and curvature; 1: gradient sum only, no
        curvature (residuals of order ‖u‖‖δ‖, so a larger minibatch is needed).
    curvature
        Second order only; one of :data:`CURVATURES`.

        * ``"per_datum"`` (default): each datum's own Hessian Hᵢ in its proxy;
          stores H̄ (d × d, O(d²) per step); residuals of order ‖u‖²‖δ‖; one
          forward-over-forward jvp per datum drawn.
        * ``"shared"``: every datum's proxy uses H̄/N; stores H̄ (d × d).
        * ``"diagonal"``: every datum's proxy uses diag(H̄)/N; stores O(d).
        * ``"low_rank"``: every datum's proxy uses A/N with
          A = −Σ(V diag(μ) Vᵀ + P E P)Σ, Σ = √(−diag(H̄)), (μ, V) the
          ``rank`` largest eigenpairs of the scaled S = Σ⁻¹(−H̄)Σ⁻¹,
          P = I − V Vᵀ and E the Rayleigh quotients of S along the projected
          coordinates Peⱼ: exact along Σ⁻¹V, H̄'s diagonal corrected across
          them, always negative definite; stores O(d·rank).

        With a shared curvature each residual needs one forward-mode jvp per datum
        drawn and the residuals' spread is exactly that of ``order=1`` (the
        shared term is the same for every datum): the decisions stay exact,
        the curvature shifts the residuals' mean and makes the proxy
        posterior of :func:`tallmcmc.proxy_langevin` and
        :func:`tallmcmc.proxy_hamiltonian` a proper Gaussian-like density. See
        ``docs/control_variates.md``.
    rank
        k, for ``curvature="low_rank"`` only: 1 ≤ k < d.
    batch_size
        Data rows processed together in each setup pass (memory bound);
        ``None``: all rows at once where N·d ≤ 2²⁷, else chunks of 2²⁷/d rows
        (a pass's per-datum gradients then stay within 512 MiB in float32).

    Returns
    -------
    ControlVariate
        Pass it to a subsampling test (``minibatch_barker(..., control_variate=cv)``,
        ``austere``, ``austere_conservative``, ``austere_adaptive``,
        ``confidence_sampler``) or to a proxy proposal.

    Raises
    ------
    ValueError
        If ``order`` is not 1 or 2, ``curvature`` is unknown or given with
        ``order=1``, ``rank`` is missing, out of range or given without
        ``curvature="low_rank"``, or ``center`` does not fit the model.

    Warns
    -----
    RuntimeWarning
        If the summed Hessian is not negative semi-definite at ``center`` (the
        control variate stays exact, but ``center`` is not near a mode).

    Notes
    -----
    Setup cost, counted in ``data_used`` as N per pass over the data:
    ``"per_datum"``, ``"shared"`` and ``"diagonal"`` make one pass (the
    Hessian sum, or its diagonal from d Hessian-vector products per chunk of
    rows in blocks of 32, never a d × d matrix); ``"low_rank"`` makes three:
    the gradient, the diagonal and H̄Ω for a Gaussian Ω with k + 10 columns
    (seed 0, so builds are reproducible), one power iteration, and the
    projection QᵀSQ of the randomized eigendecomposition of the scaled
    S (Halko, Martinsson & Tropp 2011, Algorithms 4.4 and 5.3), its
    products SW = Σ⁻¹(−H̄)(Σ⁻¹W).

    Data split by rows over a mesh (``jax.device_put(leaf, NamedSharding(mesh,
    PartitionSpec("data")))`` or :func:`tallmcmc.distributed.shard_rows`) are
    used where they live: every device evaluates its own rows, ``batch_size``
    rows of its block at a time, and the per-device sums are added on the host
    in float64 (``docs/sharding.md``); the counts are the same.
    """
    if order not in (1, 2):
        raise ValueError(f"order must be 1 (gradient only) or 2 (gradient and Hessian); got {order!r}")
    if curvature not in CURVATURES:
        raise ValueError(f"curvature must be one of {', '.join(repr(c) for c in CURVATURES)}; got {curvature!r}")
    if order == 1 and curvature != "per_datum":
        raise ValueError(
            f"curvature={curvature!r} needs order=2 (a first-order proxy has no curvature): pass order=2 or drop "
            "curvature"
        )
    if curvature == "low_rank":
        rank = integer_at_least(rank, "rank", why="the number of eigenpairs of curvature='low_rank'")
    elif rank is not None:
        raise ValueError(f"rank is for curvature='low_rank' only; got rank={rank!r} with curvature={curvature!r}")
    batch_size = optional_integer_at_least(batch_size, "batch_size")
    center = jax.tree_util.tree_map(jnp.asarray, center)
    rows = row_sharding(model.data, "taylor_control_variate")  # data split over a mesh: passes run where rows live
    if rows is None:
        check_model(model, center, "center")
    else:
        rows.check_model(model, model.data)(center, "center")
    check_differentiable(model, center, "taylor_control_variate")
    flat_center, unravel = ravel_pytree(center)
    dimension = flat_center.shape[0]
    if curvature == "low_rank" and rank >= dimension:
        raise ValueError(
            f"rank must be smaller than d = {dimension} (the number of parameters); got rank={rank}. "
            "For the whole summed Hessian use curvature='shared'"
        )
    num_data = model.num_data
    passes = _SetupPasses(model, flat_center, unravel, batch_size, rows)
    largest = -np.inf  # largest eigenvalue (or diagonal entry) of H̄ seen: > 0 means not near a mode
    hessian_sum = hessian_diagonal = hessian_basis = hessian_eigenvalues = hessian_scale = None
    if order == 1:
        gradient_sum, _ = passes.gradient_and_hessian(hessian=False)
    elif curvature in ("per_datum", "shared"):
        gradient_sum, hessian_sum = passes.gradient_and_hessian(hessian=True)
        hessian_sum = 0.5 * (hessian_sum + hessian_sum.T)
        largest, scale = _extent(hessian_sum)
    elif curvature == "diagonal":
        gradient_sum, hessian_diagonal, _ = passes.gradient_diagonal_and_products(None)
        largest = float(hessian_diagonal.max())
        scale = float(np.abs(hessian_diagonal).max())
    else:
        gradient_sum, diagonal, root, basis, values, across = _randomized_eigenpairs(passes, rank)
        hessian_scale, hessian_basis = root, basis
        hessian_eigenvalues = -np.maximum(values, _SCALED_FLOOR)  # floored: A is negative definite (docs)
        hessian_diagonal = -np.maximum(across, _SCALED_FLOOR)
        scale = float(np.abs(diagonal).max())
        # S = D^{-1/2}(−H̄)D^{-1/2} not positive definite (a Ritz value or Rayleigh quotient ≤ 0): H̄ is not
        # negative semi-definite; in H̄'s units about −min(μ, E)·max(D)
        largest = float(max(diagonal.max(), -min(values.min(), across.min()) * scale))
    return _assembled(
        model,
        center,
        flat_center.dtype,
        order,
        curvature,
        gradient_sum,
        largest,
        scale if order == 2 else 1.0,
        passes.count * num_data,
        hessian_sum=hessian_sum,
        hessian_diagonal=hessian_diagonal,
        hessian_basis=hessian_basis,
        hessian_eigenvalues=hessian_eigenvalues,
        hessian_scale=hessian_scale,
    )


def control_variate_at_mode(model: Model, mode: Any) -> ControlVariate:
    """The second-order, per-datum control variate at ``mode.position`` from ``mode``'s own final pass (no pass).

    :func:`tallmcmc.find_mode` ends with a full-data pass that computes the likelihood's gradient and Hessian sums
    at the position it returns (``ModeResult.likelihood_sums``): exactly what :func:`taylor_control_variate` would
    compute there with a pass of its own. For a mode just found on ``model`` itself (``sample_tall`` uses it so);
    the sums of a mode found on other data would give a proxy sum that is not the sum of the per-datum proxies, so
    a wrong Δ. Its ``data_used`` is 0: the pass is counted in the mode's.
    """
    gradient_sum, hessian_sum = mode.likelihood_sums  # symmetric already (find_mode symmetrises its sums)
    dtype = jax.eval_shape(lambda position: ravel_pytree(position)[0], mode.position).dtype  # traced: no program
    largest, scale = _extent(hessian_sum)
    try:  # at a mode whose posterior Hessian is positive definite, H̄ may have positive curvature the prior outweighs
        np.linalg.cholesky(np.asarray(mode.hessian, np.float64))  # (a hierarchical scale against its group effects)
        at_a_mode = True
    except (np.linalg.LinAlgError, TypeError, ValueError):
        at_a_mode = False
    return _assembled(
        model,
        mode.position,
        dtype,
        2,
        "per_datum",
        gradient_sum,
        largest,
        scale,
        0,
        hessian_sum=hessian_sum,
        warn_curvature=not at_a_mode,
    )


def _extent(hessian_sum: np.ndarray) -> tuple[float, float]:
    """(H̄'s largest eigenvalue, ``-inf`` where H̄ is not finite; max |H̄ᵢⱼ|) for the check that H̄ is ≤ 0."""
    largest = float(np.linalg.eigvalsh(hessian_sum).max()) if np.all(np.isfinite(hessian_sum)) else -np.inf
    return largest, float(np.abs(hessian_sum).max())


def _assembled(
    model: Model,
    center: Position,
    dtype,
    order: int,
    curvature: str,
    gradient_sum: np.ndarray,
    largest: float,
    scale: float,
    data_used: int,
    warn_curvature: bool = True,
    **curvature_parts: np.ndarray | None,
) -> ControlVariate:
    """The :class:`ControlVariate` of the sums, after refusing non-finite ones and warning where H̄ is not ≤ 0
    (unless ``warn_curvature`` is false: a verified mode, where the prior may outweigh H̄'s upward curvature)."""
    parts = [part for part in curvature_parts.values() if part is not None]
    if not np.all(np.isfinite(gradient_sum)) or not all(np.all(np.isfinite(part)) for part in parts):
        raise ValueError("the gradient or Hessian sum at center is not finite; pick a center inside the support")
    if warn_curvature and order == 2 and largest > 1e-6 * max(1.0, scale):
        warnings.warn(
            f"hessian_sum, the summed log-likelihood Hessian at center, is not negative semi-definite (largest "
            f"eigenvalue or diagonal entry {largest:.3g}): center is probably not near a mode, the residuals may be "
            "large and a proxy proposal built on it may be improper. Use tallmcmc.find_mode(model, start).position",
            RuntimeWarning,
            stacklevel=3,
        )

    def stored(array):  # a host array is cast on the host and transferred (jnp.asarray would compile a program)
        if array is None:
            return None
        return to_device(array, dtype) if isinstance(array, np.ndarray) else jnp.asarray(array, dtype)

    return ControlVariate(
        center=center,
        gradient_sum=stored(gradient_sum),
        order=order,
        num_data=model.num_data,
        temperature=float(model.temperature),
        data_used=data_used,
        log_likelihood=model.log_likelihood,
        curvature=curvature,
        **{name: stored(part) for name, part in curvature_parts.items()},
    )


class _SetupPasses:
    """Passes over the data in chunks of rows, summed in float64; ``count`` says how many were made.

    With ``rows`` (a :class:`tallmcmc.sharding.RowSharding`: data split over a
    mesh) a chunk is the same ``size`` rows of every device's block: each
    device evaluates its own, and the per-device results are gathered
    (:func:`tallmcmc.sharding.gather_partials`) and added on the host in
    float64, in device order. ``batch_size`` then bounds the rows per chunk
    on each device.
    """

    def __init__(self, model: Model, flat_center: jax.Array, unravel, batch_size: int | None, rows=None):
        self.model = model
        self.center = flat_center
        self.rows = rows
        self.data = model.data if rows is None else rows.place(model.data)
        self.block = model.num_data if rows is None else rows.rows_per_shard
        if batch_size is None:  # all rows at once unless their per-datum gradients would be large
            batch_size = max(1, _ROWS_TIMES_DIMENSION_AT_ONCE // max(1, int(flat_center.shape[0])))
        self.size = min(batch_size, self.block)
        self.count = 0

        def per_datum(flat, rows):
            return model.per_datum_log_likelihood(unravel(flat), rows)

        def gradient(likelihood, rows, center):
            return jax.grad(lambda flat: jnp.sum(likelihood(flat, rows)))(center)

        def hessian(likelihood, rows, center):
            return jax.hessian(lambda flat: jnp.sum(likelihood(flat, rows)))(center)

        def hessian_products(likelihood, rows, center, directions):  # (m, d) directions -> (m, d) rows of H_chunk v
            def product(direction):
                return jax.jvp(lambda flat: gradient(likelihood, rows, flat), (center,), (direction,))[1]

            return jax.vmap(product)(directions)

        self._per_datum = per_datum
        # the centre an argument, not a constant of the programs: the next data set's centre compiles nothing new
        gradient_pass = self._per_chunk(gradient, "gradient")
        hessian_pass = self._per_chunk(hessian, "hessian")
        products = self._per_chunk(hessian_products, "hessian-vector products")
        self._gradient = lambda rows: gradient_pass(rows, flat_center)
        self._hessian = lambda rows: hessian_pass(rows, flat_center)
        self._products = lambda rows, directions: products(rows, flat_center, directions)

    def _per_chunk(self, function, name: str):
        """``function(likelihood, rows, *arguments)`` compiled, as a function of a chunk from :meth:`_chunks`
        (float64 NumPy); ``likelihood(flat θ, rows)`` gives the per-datum log-likelihoods.

        Without a mesh, per chunk size (at most two: full chunks and the last one), the likelihood of a chunk is
        traced once and replayed with its constants as an argument, and the program is kept between processes under
        the key of that trace (:class:`tallmcmc.program_cache.KeptPass`, as ``find_mode``'s and the fast setup's
        passes)."""
        if self.rows is None:
            by_size: dict[int, tuple[program_cache.KeptPass, list]] = {}

            def kept_run(rows, *arguments):
                size = jax.tree_util.tree_leaves(rows)[0].shape[0]
                if size not in by_size:
                    shapes = jax.tree_util.tree_map(lambda leaf: jax.ShapeDtypeStruct(leaf.shape, leaf.dtype), rows)
                    centre = jax.ShapeDtypeStruct(self.center.shape, self.center.dtype)
                    trace = program_cache.Traced.of(self._per_datum, centre, shapes)

                    def run(rows, *arguments_and_constants):
                        *arguments, constants = arguments_and_constants
                        return function(lambda flat, part: trace.replay(constants, flat, part), rows, *arguments)

                    out_tree = jax.tree_util.tree_structure(0)
                    kept = program_cache.KeptPass(run, trace, (f"control variate {name}",), out_tree)
                    by_size[size] = (kept, trace.constants)
                kept, constants = by_size[size]
                return np.asarray(kept(rows, *arguments, constants), np.float64)

            return kept_run
        rows, by_size_on_mesh = self.rows, {}

        def run_on_mesh(chunk, *arguments):
            start, size = chunk
            if size not in by_size_on_mesh:  # at most two sizes: full chunks and the last one

                def local(data, start, *arguments):
                    block = jax.tree_util.tree_map(lambda leaf: lax.dynamic_slice_in_dim(leaf, start, size), data)
                    return sharding.gather_partials(function(self._per_datum, block, *arguments), rows.axis)

                by_size_on_mesh[size] = rows.jit(local, ("rows", "replicated") + ("replicated",) * len(arguments))
            partials = by_size_on_mesh[size](self.data, np.int32(start), *arguments)
            return np.sum(np.asarray(partials, np.float64), axis=0)

        return run_on_mesh

    def _chunks(self):
        self.count += 1
        data, size = self.data, self.size
        for start in range(0, self.block, size):
            if self.rows is None:
                yield jax.tree_util.tree_map(lambda leaf: leaf[start : start + size], data)  # noqa: B023 (used within this iteration)
            else:
                yield start, min(size, self.block - start)

    def gradient_and_hessian(self, hessian: bool) -> tuple[np.ndarray, np.ndarray | None]:
        """One pass: G and, if ``hessian``, H̄ (d × d)."""
        dimension = self.center.shape[0]
        gradient_sum = np.zeros(dimension, np.float64)
        hessian_sum = np.zeros((dimension, dimension), np.float64) if hessian else None
        for rows in self._chunks():
            gradient_sum += self._gradient(rows)
            if hessian:
                hessian_sum += self._hessian(rows)
        return gradient_sum, hessian_sum

    def gradient_diagonal_and_products(self, directions: np.ndarray | None):
        """One pass: G, diag(H̄) from d Hessian-vector products per chunk, and H̄ W for ``directions`` W (d, m)."""
        dimension = self.center.shape[0]
        dtype = self.center.dtype
        gradient_sum = np.zeros(dimension, np.float64)
        diagonal = np.zeros(dimension, np.float64)
        products = None if directions is None else np.zeros(directions.shape, np.float64)
        block = min(_DIRECTION_BLOCK, dimension)
        for rows in self._chunks():
            gradient_sum += self._gradient(rows)
            for first in range(0, dimension, block):
                basis = np.zeros((block, dimension), dtype)  # padded with zero rows: one compiled shape
                count = min(block, dimension - first)
                basis[np.arange(count), first + np.arange(count)] = 1
                hessian_rows = self._products(rows, jnp.asarray(basis))
                diagonal[first : first + count] += hessian_rows[np.arange(count), first + np.arange(count)]
            if directions is not None:
                products += self.products_in_chunk(rows, directions)
        return gradient_sum, diagonal, products

    def products_in_chunk(self, rows, directions: np.ndarray) -> np.ndarray:
        return self._products(rows, jnp.asarray(directions.T, self.center.dtype)).T

    def products(self, directions: np.ndarray) -> np.ndarray:
        """One pass: H̄ W for ``directions`` W (d, m)."""
        total = np.zeros(directions.shape, np.float64)
        for rows in self._chunks():
            total += self.products_in_chunk(rows, directions)
        return total


def _randomized_eigenpairs(passes: _SetupPasses, rank: int):
    """G, diag(H̄) and the ``rank`` largest eigenpairs of the scaled S = D^{-1/2}(−H̄)D^{-1/2}, in three passes.

    D = −diag(H̄) (floored at a tiny positive fraction of its largest entry).
    Randomized eigendecomposition (Halko, Martinsson & Tropp 2011, Algorithms
    4.4 and 5.3) of S: pass 1 gives G, diag(H̄) and H̄Ω for a seed-0 Gaussian
    Ω with k + 10 columns, so Y = D^{-1/2}(−H̄Ω) = S(D^{1/2}Ω) (D is not known
    before the pass: the test matrix is D^{1/2}Ω, still Gaussian); pass 2 one
    power iteration Y = SQ = D^{-1/2}(−H̄)(D^{-1/2}Q); pass 3 SQ again, whose
    Rayleigh–Ritz pairs (μ, U) of QᵀSQ are kept for the k largest μ. Also
    returns E, the diagonal of S across them: Eⱼ = (Peⱼ)ᵀS(Peⱼ)/‖Peⱼ‖², the
    Rayleigh quotient of S along the j-th coordinate projected off span(U)
    (P = I − UUᵀ), from SU = (SQ)W at no extra pass.

    Returns
    -------
    tuple
        G (d,), diag(H̄) (d,), the scale D^{1/2} (d,), U (d, k), μ (k,) and
        E (d,), float64. Near a mode S is positive definite, so μ and E (Ritz
        values and Rayleigh quotients of S) lie within its spectrum, > 0; the
        caller floors them.
    """
    dimension = passes.center.shape[0]
    columns = min(rank + _OVERSAMPLING, dimension)
    test_matrix = np.random.default_rng(0).standard_normal((dimension, columns))
    gradient_sum, diagonal, products = passes.gradient_diagonal_and_products(test_matrix)
    curvatures = -diagonal
    floor = _SCALE_FLOOR * max(float(np.abs(curvatures).max()), np.finfo(np.float64).tiny)
    scale = np.sqrt(np.maximum(curvatures, floor))  # D^{1/2}

    def scaled_products(vectors):  # S W = D^{-1/2}(−H̄)(D^{-1/2} W), one pass
        return -passes.products(vectors / scale[:, None]) / scale[:, None]

    basis, _ = np.linalg.qr(-products / scale[:, None])
    for _ in range(_POWER_ITERATIONS):
        basis, _ = np.linalg.qr(scaled_products(basis))
    images = scaled_products(basis)
    projected = basis.T @ images
    values, vectors = np.linalg.eigh(0.5 * (projected + projected.T))
    keep = np.argsort(values)[::-1][:rank]  # the largest of S
    eigenvectors, eigenvalues = basis @ vectors[:, keep], values[keep]
    images = images @ vectors[:, keep]  # S U
    scaled_diagonal = curvatures / scale**2  # diag(S): 1 except where D was floored
    projected_diagonal = (  # (P S P)ⱼⱼ = Sⱼⱼ − 2 (U (SU)ᵀ)ⱼⱼ + (U UᵀSU Uᵀ)ⱼⱼ, UᵀSU = diag(μ)
        scaled_diagonal
        - 2 * np.einsum("jk,jk->j", eigenvectors, images)
        + np.einsum("jk,k,jk->j", eigenvectors, eigenvalues, eigenvectors)
    )
    remaining = 1.0 - np.einsum("jk,jk->j", eigenvectors, eigenvectors)  # Pⱼⱼ = ‖Peⱼ‖²
    across = np.where(remaining > _SCALED_FLOOR, projected_diagonal / np.maximum(remaining, _SCALED_FLOOR), 1.0)
    return gradient_sum, diagonal, scale, eigenvectors, eigenvalues, across


def warn_if_far_from_mode(control_variate: ControlVariate, spread: float, sigma: float) -> None:
    """Warn once when the measured residual spread is too large for a minibatch to help."""
    warnings.warn(
        f"the control variate's residuals are large (N·sd(rᵢ) ≈ {spread:.3g} against σ = {sigma:g}): most steps "
        "will use a large fraction of the data. Build it at the mode: "
        "tallmcmc.taylor_control_variate(model, tallmcmc.find_mode(model, start).position)",
        RuntimeWarning,
        stacklevel=3,
    )
