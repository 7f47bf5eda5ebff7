"""Sample the Gaussian-mixture posterior with its data split over several processes (hosts).

Every process runs this same script; each holds only its own block of the rows
(:func:`tallmcmc.distributed.row_block`) and the minibatch test evaluates
each drawn index on the process that holds it. Process 0 prints the result
(and writes it with ``--output``).

Two processes on one machine (two shells, or ``&``)::

    python examples/distributed_sampling.py --process-id 0 --num-processes 2 --coordinator 127.0.0.1:12355
    python examples/distributed_sampling.py --process-id 1 --num-processes 2 --coordinator 127.0.0.1:12355

Under SLURM (one task per host, or per GPU) nothing needs passing: JAX reads
the task's rank, the task count and the first host from SLURM's variables::

    srun --ntasks=2 --nodes=2 python examples/distributed_sampling.py

Many chains, each at its own pace (``tallmcmc.sample(driver="asynchronous")``), two
devices per process with a ``"chains"`` axis::

    export XLA_FLAGS=--xla_force_host_platform_device_count=2
    python examples/distributed_sampling.py --process-id 0 --num-processes 2 --coordinator 127.0.0.1:12355 --driver asynchronous --num-chains 16 --chain-devices 2
    python examples/distributed_sampling.py --process-id 1 --num-processes 2 --coordinator 127.0.0.1:12355 --driver asynchronous --num-chains 16 --chain-devices 2

A single process (no runtime started)::

    python examples/distributed_sampling.py --num-processes 1

The data are simulated from ``--data-seed`` in every process and each keeps
its rows; with ``--data file.npy`` each process instead reads only its rows
of a 1-D float array (memory-mapped). See ``docs/distributed.md``.
"""

from __future__ import annotations

import argparse
import sys
import time


def parse_arguments(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    runtime = parser.add_argument_group("processes (leave out under SLURM / Open MPI: detected by JAX)")
    runtime.add_argument("--coordinator", default=None, help="host:port of process 0 (the same in every process)")
    runtime.add_argument("--num-processes", type=int, default=None, help="number of processes")
    runtime.add_argument("--process-id", type=int, default=None, help="this process's index, 0 … num_processes − 1")
    runtime.add_argument(
        "--timeout",
        type=float,
        default=60,
        help="seconds of silence after which a process counts as dead (every other one then exits)",
    )
    runtime.add_argument("--chain-devices", type=int, default=1, help="size of the mesh's 'chains' axis per process")
    model = parser.add_argument_group("model and sampler")
    model.add_argument("--num-data", type=int, default=100_000, help="N, over all processes")
    model.add_argument("--temperature", type=float, default=None, help="K (default N / 100, the paper's N/K)")
    model.add_argument("--data-seed", type=int, default=0, help="seed of the simulated data")
    model.add_argument("--data", default=None, help="a .npy file of N floats to read instead (each process its rows)")
    model.add_argument("--test", choices=("minibatch_barker", "exact_barker"), default="minibatch_barker")
    model.add_argument("--batch-size", type=int, default=50, help="minibatch size m of the Barker test")
    model.add_argument("--step-size", type=float, default=0.15, help="random-walk standard deviation")
    model.add_argument("--num-samples", type=int, default=2000)
    model.add_argument("--num-chains", type=int, default=1)
    model.add_argument("--seed", type=int, default=0, help="seed of the chains (same draws for any process count)")
    model.add_argument(
        "--driver",
        choices=("vmap", "asynchronous"),
        default="vmap",
        help="tallmcmc.sample's driver: lockstep vmapped chains, or each chain at its own pace",
    )
    parser.add_argument("--output", default=None, help="process 0 writes draws, decisions and data counts (.npz)")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")
    return parser.parse_args(argv)


def model_and_settings(args: argparse.Namespace, data, temperature: float):
    """The model over ``data`` (global arrays, or all rows in one process) and ``sample``'s other arguments."""
    import jax.numpy as jnp

    import tallmcmc
    from tallmcmc.examples import gaussian_mixture

    model = tallmcmc.Model(
        gaussian_mixture.log_likelihood, gaussian_mixture.log_prior, data, temperature, position_shape=(2,)
    )
    if args.test == "minibatch_barker":
        test = tallmcmc.minibatch_barker(batch_size=args.batch_size)
    else:
        test = tallmcmc.exact_barker()
    settings = dict(
        proposal=tallmcmc.random_walk(args.step_size),
        test=test,
        initial_position=jnp.asarray(gaussian_mixture.TRUE_THETA, jnp.float32),
        num_samples=args.num_samples,
        num_chains=args.num_chains,
        seed=args.seed,
        driver=args.driver,
    )
    return model, settings


def main(argv=None) -> int:
    args = parse_arguments(argv)
    from tallmcmc import distributed

    # First, before anything touches JAX: join the other processes.
    who = distributed.initialize(args.coordinator, args.num_processes, args.process_id, timeout=args.timeout)
    # Then any error, here or a peer's death seen by a collective, ends this process at once (and so the others).
    with distributed.exit_on_error():
        return run(args, who)


def run(args: argparse.Namespace, who) -> int:
    """Load this process's rows, sample on the global mesh, report on process 0."""
    import numpy as np

    import tallmcmc
    from tallmcmc import distributed
    from tallmcmc.examples import gaussian_mixture

    main_process = distributed.is_main_process()
    say = print if main_process else (lambda *a, **k: None)
    mesh = distributed.global_mesh(args.chain_devices)
    say(
        f"{who.process_count} process(es), {who.device_count} {who.platform} device(s); mesh {dict(mesh.shape)}",
        flush=True,
    )

    if args.data is not None:  # each process reads only its own rows
        column = np.load(args.data, mmap_mode="r")
        num_data = column.shape[0]
        rows = distributed.row_block(num_data)
        local = np.asarray(column[rows], dtype=np.float32)
    else:
        num_data = args.num_data
        rows = distributed.row_block(num_data)
        local = gaussian_mixture.simulate_data(num_data, seed=args.data_seed)[rows]
    print(f"process {who.process_index}: rows {rows.start:,} to {rows.stop:,}", flush=True)
    data = distributed.shard_rows(local, mesh)

    temperature = args.temperature if args.temperature is not None else num_data / 100
    model, settings = model_and_settings(args, data, temperature)

    print(f"process {who.process_index}: sampling", flush=True)
    began = time.perf_counter()
    result = tallmcmc.sample(model, **settings, progress=main_process and not args.no_progress, mesh=mesh)
    seconds = time.perf_counter() - began

    # The result's draws and step statistics are NumPy arrays, the same on every process.
    positions = np.asarray(result.positions)
    say(
        f"{args.test}, N = {num_data:,}, K = {temperature:g}: {result.num_chains} chain(s) x {result.num_draws} "
        f"draws in {seconds:.1f} s (compiling {result.compile_seconds:.1f} s, sampling {result.sampling_seconds:.1f} s); "
        f"acceptance {result.acceptance_rate:.3f}; mean data per step "
        f"{result.data_used.mean():.1f}; posterior mean {positions.reshape(-1, 2).mean(axis=0).round(3).tolist()}",
        flush=True,
    )
    if main_process and args.output:
        np.savez(
            args.output,
            positions=positions,
            accepted=result.accepted,
            data_used=result.data_used,
            data_used_by_test=result.data_used_by_test,
            num_data=result.num_data,
            process_count=who.process_count,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
