"""Running chains: :func:`sample` and its steps, one module each.

* :mod:`~tallmcmc.sampling.run` — :func:`sample`, the orchestration;
* :mod:`~tallmcmc.sampling.plan` — every argument check, the layout over a mesh, the driver, the warm-up target,
  the setup counts and the memory estimate (:mod:`~tallmcmc.sampling.memory`), before anything is compiled;
* :mod:`~tallmcmc.sampling.warmup_phase` — warm-up as its own step (:func:`warmup`, :class:`WarmupResult`) and
  the step-size adaptation it runs (:mod:`~tallmcmc.sampling.adaptation`);
* :mod:`~tallmcmc.sampling.drivers` and :mod:`~tallmcmc.sampling.asynchronous` — the vmapped and asynchronous
  drivers, one calling convention (:class:`~tallmcmc.sampling.drivers.DriverCall` in,
  :class:`~tallmcmc.sampling.drivers.DriverOutput` out);
* :mod:`~tallmcmc.sampling.continuation` — :class:`RunState` (``result.last_state``) and the checks that a resumed
  run goes on with the same chains; :mod:`~tallmcmc.sampling.checkpoint` — results on disk (:func:`load_result`,
  ``result.save``, ``sample(checkpoint=...)``);
* :mod:`~tallmcmc.sampling.program` — the compiled pieces they share; :mod:`~tallmcmc.sampling.schedule` — the
  per-step schedules; :mod:`~tallmcmc.sampling.result` — :class:`SamplingResult` (every chain program compiled with
  :mod:`tallmcmc.compiler_options`).
"""

from tallmcmc.run_warnings import VACUOUS_ERROR_BOUND
from tallmcmc.sampling import (
    adaptation,
    asynchronous,
    checkpoint,
    continuation,
    drivers,
    memory,
    plan,
    program,
    result,
    run,
    schedule,
    warmup_phase,
)
from tallmcmc.sampling.checkpoint import load_result
from tallmcmc.sampling.continuation import RunState
from tallmcmc.sampling.drivers import AUTO_ASYNCHRONOUS_CHAINS, DRIVERS, choose_driver
from tallmcmc.sampling.result import SamplingResult, reported_draws
from tallmcmc.sampling.run import sample
from tallmcmc.sampling.schedule import Schedule
from tallmcmc.sampling.warmup_phase import WarmupResult, warmup

__all__ = [
    "AUTO_ASYNCHRONOUS_CHAINS",
    "DRIVERS",
    "RunState",
    "Schedule",
    "SamplingResult",
    "VACUOUS_ERROR_BOUND",
    "WarmupResult",
    "choose_driver",
    "load_result",
    "reported_draws",
    "sample",
    "warmup",
]
