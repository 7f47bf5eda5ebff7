"""Command-line entry point: ``tallmcmc reproduce <experiment> [options]`` and ``tallmcmc cache [--prune | --clear]``.

Every reproduction lives in its own module under :mod:`tallmcmc.reproduce`
and is found automatically (see :func:`tallmcmc.reproduce.experiments`).
``tallmcmc cache`` shows the compilation cache's folder, its size and its bound
(:mod:`tallmcmc.compilation_cache`), and prunes it to the bound or clears it.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from tallmcmc import compilation_cache, reproduce


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="tallmcmc",
        description="tallmcmc: minibatch Metropolis-Hastings for tall data.",
    )
    commands = parser.add_subparsers(dest="command", required=True)
    reproduce_parser = commands.add_parser(
        "reproduce",
        help="run one of the papers' experiments and print our numbers beside theirs",
    )
    experiments = reproduce_parser.add_subparsers(dest="experiment", required=True, metavar="EXPERIMENT")
    for name, module in sorted(reproduce.experiments().items()):
        sub = experiments.add_parser(name, help=module.HELP, description=module.__doc__)
        module.add_arguments(sub)
        sub.set_defaults(run=module.run)
    cache_parser = commands.add_parser(
        "cache",
        help="show the compilation cache's folder, size and bound; prune or clear it",
        description="The folder of JAX's persistent compilation cache that tallmcmc turns on (and of the chain "
        "programs it keeps): where it is, its size and its bound (TALLMCMC_COMPILATION_CACHE_MAX_SIZE).",
    )
    action = cache_parser.add_mutually_exclusive_group()
    action.add_argument(
        "--prune", action="store_true", help="delete the least recently used files down to the bound now"
    )
    action.add_argument("--clear", action="store_true", help="delete every compiled program in the folder")
    cache_parser.set_defaults(run=run_cache)
    return parser


def _bytes(size: int) -> str:
    """A size in KiB, MiB or GiB (the units ``TALLMCMC_COMPILATION_CACHE_MAX_SIZE`` reads)."""
    if size >= 1 << 30:
        return f"{size / (1 << 30):.2f} GiB"
    if size >= 1 << 20:
        return f"{size / (1 << 20):.1f} MiB"
    return f"{size / 1024:.1f} KiB"


def run_cache(args: argparse.Namespace) -> int:
    """``tallmcmc cache``: the folder's size and bound, or (``--prune``, ``--clear``) what was deleted."""
    folder = compilation_cache.managed_folder()
    if folder is None:
        import jax

        elsewhere = jax.config.jax_compilation_cache_dir
        if elsewhere:
            print(
                f"JAX's compilation cache is in {elsewhere}, configured outside tallmcmc (JAX_COMPILATION_CACHE_DIR "
                "or jax.config): tallmcmc neither bounds nor clears it."
            )
        else:
            print(f"The compilation cache is off ({compilation_cache.ENVIRONMENT_VARIABLE}=0).")
        return 1 if (args.prune or args.clear) else 0
    bound = compilation_cache.max_bytes()
    if args.clear:
        files = compilation_cache.usage(folder).files
        for file in files:
            file.path.unlink(missing_ok=True)
        print(f"Deleted {len(files)} files ({_bytes(sum(file.size for file in files))}) from {folder}.")
        return 0
    if args.prune:
        if bound is None:
            print(f"{folder} is unbounded ({compilation_cache.MAX_SIZE_VARIABLE}=unbounded): nothing to prune.")
            return 0
        pruned = compilation_cache.prune(folder, bound)
        print(
            f"Deleted {pruned.removed_files} files ({_bytes(pruned.removed_bytes)}) from {folder}; "
            f"{_bytes(pruned.kept_bytes)} left."
        )
        return 0
    usage = compilation_cache.usage(folder)
    shown = "unbounded" if bound is None else _bytes(bound)
    print(f"folder: {folder}")
    print(f"size:   {_bytes(usage.size)} in {len(usage.files)} files")
    print(f"bound:  {shown} ({compilation_cache.MAX_SIZE_VARIABLE}; pruned at most daily, at import)")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    status = args.run(args)
    return int(status or 0)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
