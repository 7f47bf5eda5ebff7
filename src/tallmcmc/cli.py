"""Command-line entry point: ``tallmcmc reproduce <experiment> [options]``.

Every reproduction lives in its own module under :mod:`tallmcmc.reproduce`
and is found automatically (see :func:`tallmcmc.reproduce.experiments`).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from tallmcmc import reproduce


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
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    status = args.run(args)
    return int(status or 0)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
