"""What every reproduction shares: arguments, ``--help``, figures, summary, and a smoke test each."""

import argparse
import json
import math
import struct
from pathlib import Path

import numpy as np
import pytest

from tallmcmc import reproduce
from tallmcmc.cli import build_parser, main
from tallmcmc.reproduce import _common


def _experiment_parsers() -> dict[str, argparse.ArgumentParser]:
    parser = build_parser()
    commands = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    reproduce_parser = commands.choices["reproduce"]
    experiments = next(a for a in reproduce_parser._actions if isinstance(a, argparse._SubParsersAction))
    return dict(experiments.choices)


EXPERIMENTS = sorted(reproduce.experiments())


def test_every_experiment_is_a_subcommand():
    assert sorted(_experiment_parsers()) == EXPERIMENTS
    # every paper experiment has one (the MNIST posterior study beside the paper's MNIST run may join them)
    assert {
        "correction-table",
        "gmm",
        "mnist",
        "stein-austerity",
        "stein-compare",
        "stein-gaussian-vs-t",
        "stein-rates",
        "stein-samplers",
        "stein-sgld",
        "worst-case",
    } <= set(EXPERIMENTS)


@pytest.mark.parametrize("name", EXPERIMENTS)
def test_every_argument_has_help_and_out_defaults_to_runs(name):
    parser = _experiment_parsers()[name]
    assert parser.formatter_class is _common.HelpFormatter
    for action in parser._actions:
        assert action.help and action.help.strip(), f"{name}: {action.option_strings} has no help"
    assert parser.parse_args([]).out == Path("runs") / name
    assert parser.parse_args([]).no_progress is False


@pytest.mark.parametrize("name", EXPERIMENTS)
def test_help_shows_defaults_and_lists_references(name, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["reproduce", name, "--help"])
    assert exit_info.value.code == 0
    text = capsys.readouterr().out
    assert f"(default: runs/{name})" in " ".join(text.split())
    # the docstring's references: a heading, then one "[k] ..." line each
    assert "References:\n[1] " in text
    assert ".. [" not in text and "``" not in text and "----------" not in text


def test_every_experiment_has_a_smoke_test_through_the_cli():
    folder = Path(__file__).parent
    sources = "\n".join(path.read_text() for path in folder.glob("test_*.py") if path.name != Path(__file__).name)
    for name in EXPERIMENTS:
        assert f'"{name}"' in sources, f"no smoke test runs `tallmcmc reproduce {name}`"


def test_describe_fills_paragraphs_and_keeps_items_on_their_own_lines():
    doc = """Title line.

    A paragraph that argparse would squeeze: it goes on
    and on across
    lines.

    * first item, with ``literal`` and :func:`tallmcmc.sample`;
    * second item
      continued.

        formula = kept   as written

    References
    ----------
    .. [1] A. Author (2001). A title
       that wraps. Journal.
    .. [2] B. Author (2002). Another.
    """
    text = _common.describe(doc, width=200)
    assert text.split("\n\n") == [
        "Title line.",
        "A paragraph that argparse would squeeze: it goes on and on across lines.",
        "* first item, with literal and tallmcmc.sample;\n* second item continued.",
        "    formula = kept   as written",
        "References:\n[1] A. Author (2001). A title that wraps. Journal.\n[2] B. Author (2002). Another.",
    ]
    narrow = _common.describe(doc, width=30, indent="  ")
    assert all(len(line) <= 30 for line in narrow.splitlines() if "formula" not in line)
    assert "  [2] B. Author (2002)." in narrow


def test_add_common_arguments():
    parser = argparse.ArgumentParser()
    _common.add_common_arguments(parser, "demo", seed=7, seed_help="seed of the demo")
    args = parser.parse_args([])
    assert (args.out, args.seed, args.no_progress) == (Path("runs/demo"), 7, False)
    args = parser.parse_args(["--out", "elsewhere", "--seed", "3", "--no-progress"])
    assert (args.out, args.seed, args.no_progress) == (Path("elsewhere"), 3, True)
    help_text = " ".join(parser.format_help().split())
    assert "seed of the demo (default: 7)" in help_text and "(default: runs/demo)" in help_text
    assert "hide the progress bars (default" not in help_text  # flags show no default

    bare = argparse.ArgumentParser()
    _common.add_common_arguments(bare, "demo", progress=False)
    assert vars(bare.parse_args([])) == {"out": Path("runs/demo")}
    with pytest.raises(ValueError, match="seed"):
        _common.add_common_arguments(argparse.ArgumentParser(), "demo", seed=1.5)
    with pytest.raises(ValueError, match="name"):
        _common.add_common_arguments(argparse.ArgumentParser(), "")


def test_save_figure_writes_at_the_shared_resolution(tmp_path):
    figure, axis = _common.new_figure(figsize=(2, 1))
    axis.plot([0, 1], [0, 1])
    path = _common.save_figure(figure, tmp_path / "new", "line.png")
    assert path == tmp_path / "new" / "line.png"
    width, height = struct.unpack(">II", path.read_bytes()[16:24])  # the PNG header's IHDR chunk
    assert (width, height) == (2 * _common.FIGURE_DPI, 1 * _common.FIGURE_DPI)


def test_write_summary_converts_numpy_paths_and_non_finite_values(tmp_path):
    path = _common.write_summary(
        tmp_path,
        {
            "array": np.arange(3),
            "nan": math.nan,
            "scalar": np.float32(0.5),
            "flag": np.bool_(True),
            "where": tmp_path,
            "nested": {1: (np.int64(2), np.inf)},
        },
    )
    assert json.loads(path.read_text()) == {
        "array": [0, 1, 2],
        "nan": None,
        "scalar": 0.5,
        "flag": True,
        "where": str(tmp_path),
        "nested": {"1": [2, None]},
    }


def test_print_written(capsys):
    _common.print_written("a.json")
    _common.print_written("a.json", "b.png", "c.png", seconds=12.4)
    assert capsys.readouterr().out == "wrote a.json\nwrote a.json, b.png and c.png (12 s)\n"
