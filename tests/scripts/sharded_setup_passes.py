"""The one-off passes before ``sample`` (find_mode, taylor_control_variate, TunaMH bounds) on rows split over 4 devices.

Run by ``tests/test_sharding.py`` (``run_on_host_devices``: four forced host
devices), no arguments; prints ``RESULT <json>``: each pass on sharded data
compared with the unsharded one, then deliberately wrong variants.
"""

import importlib.util
import json
import time
import warnings

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec

import tallmcmc
import tallmcmc.sharding as sharding
from tallmcmc.examples import gaussian_mixture, logistic_regression

warnings.simplefilter("ignore")
assert len(jax.devices()) == 4, jax.devices()
began = time.perf_counter()
EPS = float(np.finfo(np.float32).eps)
mesh = jax.make_mesh((4,), ("data",))  # explicit axes (JAX's default): plain indexing of the rows would fail
model = gaussian_mixture.model(num_data=1000, temperature=1.0)


def split(model, mesh, axis="data"):
    return model.with_data(jax.device_put(model.data, NamedSharding(mesh, PartitionSpec(axis))))


sharded = split(model, mesh)
start = jnp.array([0.5, 0.5])
center = jnp.array([0.1, 0.9])
# the size of the sums' float32 rounding: eps times the sums of |per-datum terms| (float64, from per-datum values)
per_datum_gradients = np.asarray(
    jax.vmap(jax.grad(gaussian_mixture.log_likelihood), (None, 0))(center, model.data), np.float64
)
per_datum_hessians = np.asarray(
    jax.vmap(jax.hessian(gaussian_mixture.log_likelihood), (None, 0))(center, model.data), np.float64
)
gradient_scale = EPS * np.abs(per_datum_gradients).sum(axis=0).max()
hessian_scale = EPS * np.abs(per_datum_hessians).sum(axis=0).max()


def modes(model):
    # tolerance 1e-4 on |∇log π|/(N/K): above the float32 noise of the sums, so that the optimiser's path (hence
    # its number of passes) does not hinge on their last bits (at 1e-6 it can, see docs/sharding.md)
    out = {
        "default": tallmcmc.find_mode(model, start, tolerance=1e-4),
        "chunks": tallmcmc.find_mode(model, start, tolerance=1e-4, batch_size=96),
        "L-BFGS-B": tallmcmc.find_mode(model, start, tolerance=1e-4, method="L-BFGS-B"),
    }
    if importlib.util.find_spec("optax") is not None:  # optax is an optional extra (find_mode's Adam steps)
        out["chunks + adam"] = tallmcmc.find_mode(
            model, start, tolerance=1e-4, batch_size=96, adam_steps=20, adam_batch_size=50
        )
    return out


def variates(model):
    return {
        "per_datum, chunks": tallmcmc.taylor_control_variate(model, center, batch_size=96),
        "low_rank": tallmcmc.taylor_control_variate(model, center, curvature="low_rank", rank=1),
    }


def compare_modes(reference, result):
    return {
        "position": float(np.max(np.abs(np.asarray(reference.position) - np.asarray(result.position)))),
        "hessian": float(np.max(np.abs(reference.hessian - result.hessian)) / np.max(np.abs(reference.hessian))),
        "same_data_used": reference.data_used == result.data_used,
        "same_iterations": reference.iterations == result.iterations,
        "converged": bool(reference.converged and result.converged),
    }


def compare_variates(reference, result):
    out = {
        "gradient": float(
            np.max(np.abs(np.asarray(reference.gradient_sum, np.float64) - np.asarray(result.gradient_sum, np.float64)))
            / gradient_scale
        ),
        "same_data_used": reference.data_used == result.data_used,
    }
    for name in ("hessian_sum", "hessian_diagonal", "hessian_eigenvalues"):
        if getattr(reference, name) is not None:
            out[name] = float(
                np.max(
                    np.abs(
                        np.asarray(getattr(reference, name), np.float64) - np.asarray(getattr(result, name), np.float64)
                    )
                )
                / hessian_scale
            )
    return out


out = {}
reference_modes, reference_variates = modes(model), variates(model)
for name, result in modes(sharded).items():
    out[f"find_mode {name}"] = compare_modes(reference_modes[name], result)
for name, result in variates(sharded).items():
    out[f"control variate {name}"] = compare_variates(reference_variates[name], result)
grid = split(model, jax.make_mesh((2, 2), ("data", "chains")))  # rows over 2 devices, copied over the other 2
out["control variate per_datum, chunks | data x chains"] = compare_variates(
    reference_variates["per_datum, chunks"], tallmcmc.taylor_control_variate(grid, center, batch_size=96)
)
out["find_mode default | data x chains"] = compare_modes(
    reference_modes["default"], tallmcmc.find_mode(grid, start, tolerance=1e-4)
)

covariates, response = logistic_regression.simulate(400, 4)
regression = logistic_regression.model(covariates, response)
reversed_mesh = Mesh(np.array(jax.devices()[::-1]), ("rows",))  # automatic axes, devices in reverse order
for name, (reference, result) in {
    "gaussian_mixture.tuna_bound": (gaussian_mixture.tuna_bound(model), gaussian_mixture.tuna_bound(sharded)),
    "logistic_regression.tuna_bound": (
        logistic_regression.tuna_bound(regression),
        logistic_regression.tuna_bound(split(regression, reversed_mesh, "rows")),
    ),
}.items():
    out[name] = {
        "identical": bool(
            np.array_equal(reference.constants, result.constants)
            and np.array_equal(reference.alias_index, result.alias_index)
        ),
        "same_data_used": reference.data_used == result.data_used,
    }
# the route of a process that holds only some rows, taken here by shard on the reversed mesh
leaf = split(model, reversed_mesh, "rows").data
by_shard, whole = sharding.HostRows(leaf, by_shard=True), sharding.HostRows(leaf)
out["HostRows by shard"] = {
    "blocks": len(by_shard.blocks),
    "map identical": bool(
        np.array_equal(
            by_shard.map(lambda b: np.asarray(b, np.float64) ** 2), whole.map(lambda b: np.asarray(b, np.float64) ** 2)
        )
    ),
    "sum": float(
        abs(
            by_shard.sum(lambda b: np.asarray(b, np.float64).sum())
            - whole.sum(lambda b: np.asarray(b, np.float64).sum())
        )
    ),
}
# a layout the passes do not know: split along the second axis
try:
    tallmcmc.find_mode(
        regression.with_data(
            {
                "covariates": jax.device_put(
                    regression.data["covariates"], NamedSharding(reversed_mesh, PartitionSpec(None, "rows"))
                ),
                "response": regression.data["response"],
            }
        ),
        jnp.zeros(4),
    )
    out["bad layout"] = None
except ValueError as error:
    out["bad layout"] = str(error)

# deliberately wrong: every device keeps its own partial sum (only the first block's reaches the result), and
# the TunaMH helper reads only the first block of rows
sharding.gather_partials = lambda value, axis: jax.tree_util.tree_map(lambda leaf: leaf[None], value)
out["wrong: find_mode default"] = compare_modes(
    reference_modes["default"], tallmcmc.find_mode(sharded, start, tolerance=1e-4)
)
out["wrong: control variate per_datum, chunks"] = compare_variates(
    reference_variates["per_datum, chunks"], tallmcmc.taylor_control_variate(sharded, center, batch_size=96)
)


class FirstBlock(sharding.HostRows):
    def __init__(self, leaf, by_shard=False):
        super().__init__(leaf, by_shard=True)
        self.blocks, self.starts, self.spread = self.blocks[:1], self.starts[:1], False


sharding.HostRows = FirstBlock
wrong = gaussian_mixture.tuna_bound(sharded)
out["wrong: gaussian_mixture.tuna_bound"] = {
    "identical": bool(
        wrong.constants.shape == (1000,)
        and np.array_equal(wrong.constants, gaussian_mixture.tuna_bound(model).constants)
    )
}
out["seconds"] = time.perf_counter() - began
print("RESULT " + json.dumps(out))
