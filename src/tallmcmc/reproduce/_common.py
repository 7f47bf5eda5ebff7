"""What every reproduction shares: its command-line arguments, its figures, its summary and its tables.

Arguments
    :func:`add_common_arguments` gives an experiment's parser ``--out``
    (default ``runs/<name>/``), and when asked ``--seed`` and
    ``--no-progress``, and sets :class:`HelpFormatter`, so ``--help`` shows
    every default and prints the description's lists and references one item
    per line.
Figures
    :func:`new_figure` opens a Matplotlib figure on the non-interactive Agg
    backend; :func:`save_figure` lays it out, writes it at :data:`FIGURE_DPI`
    and closes it.
Summary
    :func:`write_summary` writes ``summary.json``; :func:`print_written` says
    what was written.
"""

from __future__ import annotations

import argparse
import inspect
import json
import math
import re
import textwrap
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

#: Resolution of every figure a reproduction writes (dots per inch).
FIGURE_DPI = 120

#: A line that starts a list item in a description: ``* ``, ``- `` or a numpydoc reference ``.. [1] ``.
_ITEM = re.compile(r"^(\* |- |\.\. \[[^\]]+\] )")
#: Sphinx roles and literals, shown bare in a terminal: ``:func:`x``` and double-backquoted ``x`` become ``x``.
_ROLE = re.compile(r":[a-z]+:`~?([^`]+)`")
_LITERAL = re.compile(r"``([^`]+)``")


class HelpFormatter(argparse.ArgumentDefaultsHelpFormatter):
    """Help formatter of the reproductions' parsers.

    Each option's help ends with its default, written as one would type it
    (``--sizes 1000 10000``: ``1000 10000``); flags, and options whose default
    is ``None`` (such as "all methods"), show none: their help says what the
    absence means. The description (the module's docstring) keeps
    its paragraphs; each paragraph is refilled to the terminal's width, but a
    list item (``*``, ``-``) or a reference (``.. [1]``) starts its own line,
    a section heading such as ``References`` stays on a line of its own, and
    a block indented by four spaces or more (a formula) is kept as written.
    """

    def _get_help_string(self, action: argparse.Action) -> str:
        help_text = action.help or ""
        default = action.default
        if (
            "%(default)" in help_text
            or default is None
            or default is False
            or default is argparse.SUPPRESS
            or not action.option_strings
            or action.nargs == 0
        ):
            return help_text
        if isinstance(default, (list, tuple)):
            shown = " ".join(str(value) for value in default)
        else:
            shown = str(default)
        return f"{help_text} (default: {shown.replace('%', '%%')})"

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        return describe(text, width, indent)


def describe(text: str, width: int = 79, indent: str = "") -> str:
    """Lay out a module docstring for a terminal (see :class:`HelpFormatter`).

    Parameters
    ----------
    text : str
        The docstring.
    width : int, optional
        Line width to fill to.
    indent : str, optional
        Prefix of every line.

    Returns
    -------
    str
        The paragraphs separated by blank lines, list items and references one
        per line, Sphinx markup removed.
    """
    text = _LITERAL.sub(r"\1", _ROLE.sub(r"\1", inspect.cleandoc(text)))
    width = max(width, 20)
    blocks: list[str] = []
    for block in re.split(r"\n\s*\n", text):
        lines = block.splitlines()
        if len(lines) >= 2 and re.fullmatch(r"-{3,}", lines[1].strip()):
            blocks.append(indent + lines[0].strip() + ":")  # a numpydoc section heading
            lines = lines[2:]
            if not lines:
                continue
            blocks[-1] += "\n" + _format_lines(lines, width, indent)
        else:
            blocks.append(_format_lines(lines, width, indent))
    return "\n\n".join(blocks)


def _format_lines(lines: list[str], width: int, indent: str) -> str:
    margin = min(len(line) - len(line.lstrip()) for line in lines if line.strip())
    if margin >= 4:  # a formula or a literal block: as written
        return "\n".join(indent + "    " + line[margin:] if line.strip() else "" for line in lines)
    indent += " " * margin
    entries: list[tuple[str, list[str]]] = []  # (marker, words)
    for line in lines:
        stripped = line.strip()
        item = _ITEM.match(stripped)
        if item:
            marker = item.group(1)
            marker = marker[3:] if marker.startswith(".. ") else marker
            entries.append((marker, stripped[item.end() :].split()))
        elif entries:
            entries[-1][1].extend(stripped.split())
        else:
            entries.append(("", stripped.split()))
    return "\n".join(
        textwrap.fill(
            " ".join(words),
            width,
            initial_indent=indent + marker,
            subsequent_indent=indent + " " * len(marker),
            break_on_hyphens=False,
        )
        for marker, words in entries
    )


def add_common_arguments(
    parser: argparse.ArgumentParser,
    name: str,
    *,
    seed: int | None = None,
    seed_help: str = "random seed",
    progress: bool = True,
) -> None:
    """Add the arguments every reproduction shares and make ``--help`` show defaults.

    Parameters
    ----------
    parser : argparse.ArgumentParser
        The experiment's parser; its ``formatter_class`` becomes
        :class:`HelpFormatter`.
    name : str
        The experiment's command-line name: ``--out`` defaults to
        ``runs/<name>``.
    seed : int or None, optional
        Default of ``--seed``; ``None`` adds no ``--seed``.
    seed_help : str, optional
        Help text of ``--seed`` (what the seed drives).
    progress : bool, optional
        Whether to add the flag ``--no-progress`` (``args.no_progress``).

    Raises
    ------
    ValueError
        If ``name`` is empty or ``seed`` is not an integer.
    """
    if not name:
        raise ValueError("name must be the experiment's non-empty command-line name")
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, (int, np.integer))):
        raise ValueError(f"seed must be an integer or None, got {seed!r}")
    parser.formatter_class = HelpFormatter
    parser.add_argument(
        "--out",
        type=Path,
        default=Path("runs") / name,
        metavar="DIR",
        help="folder for summary.json and the figures (created if missing)",
    )
    if seed is not None:
        parser.add_argument("--seed", type=int, default=int(seed), help=seed_help)
    if progress:
        parser.add_argument("--no-progress", action="store_true", help="hide the progress bars")


def output_folder(path: Path | str) -> Path:
    """Create the folder ``path`` (and its parents) if missing and return it as a :class:`~pathlib.Path`."""
    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    return path


def _jsonable(value: Any) -> Any:
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, np.ndarray):
        return _jsonable(value.tolist())
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, (np.floating, float)):
        value = float(value)
        return value if math.isfinite(value) else None
    if isinstance(value, (np.integer,)):
        return int(value)
    if isinstance(value, (np.bool_,)):
        return bool(value)
    return value


def write_summary(folder: Path | str, summary: dict[str, Any], name: str = "summary.json") -> Path:
    """Write ``summary`` as indented JSON in ``folder`` and return the file's path.

    NumPy arrays and scalars become lists and numbers, paths become strings,
    and non-finite numbers become ``null``.
    """
    path = output_folder(folder) / name
    path.write_text(json.dumps(_jsonable(summary), indent=2) + "\n")
    return path


def print_written(*paths: Path | str, seconds: float | None = None) -> None:
    """Print ``wrote a, b and c`` for the files written, with the run time in seconds when given."""
    names = [str(path) for path in paths]
    listed = names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]
    print(f"wrote {listed}" + ("" if seconds is None else f" ({seconds:.0f} s)"))


def pyplot():
    """:mod:`matplotlib.pyplot` on the non-interactive Agg backend (figures are only written to files)."""
    # imported here, not at the top: the backend must be chosen before pyplot is first imported, and pyplot takes
    # about 0.3 s to import, which `tallmcmc reproduce` would pay for every experiment it lists
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def new_figure(nrows: int = 1, ncols: int = 1, **subplots_options: Any):
    """A new figure and its axes: :func:`matplotlib.pyplot.subplots` on the Agg backend.

    Returns
    -------
    (matplotlib.figure.Figure, axes)
        As :func:`matplotlib.pyplot.subplots` returns them.
    """
    return pyplot().subplots(nrows, ncols, **subplots_options)


def save_figure(figure, folder: Path | str, filename: str) -> Path:
    """Lay ``figure`` out tightly, write it as ``folder/filename`` at :data:`FIGURE_DPI`, close it, return the path."""
    path = output_folder(folder) / filename
    figure.tight_layout()
    figure.savefig(path, dpi=FIGURE_DPI)
    pyplot().close(figure)
    return path


def format_table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """Plain-text table with right-aligned columns (strings are printed as they are)."""
    cells = [[str(h) for h in headers]] + [[str(c) for c in row] for row in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]
    lines = ["  ".join(c.rjust(w) for c, w in zip(row, widths)) for row in cells]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def mean_pm_std(values: Sequence[float], digits: int = 1) -> str:
    """``mean ± std`` (sample std over trials; 0 for a single trial)."""
    values = np.asarray(values, dtype=float)
    std = float(values.std(ddof=1)) if values.size > 1 else 0.0
    return f"{values.mean():.{digits}f} ± {std:.{digits}f}"


def log_grid(minimum: int, maximum: int, size: int) -> np.ndarray:
    """Distinct integers spaced evenly in log between ``minimum`` and ``maximum``."""
    return np.unique(np.round(np.geomspace(minimum, maximum, max(2, size))).astype(int))


def fitted_slope(sizes, values) -> tuple[float, float]:
    """Slope and intercept of the least-squares line of log(values) on log(sizes) (finite, positive values only)."""
    sizes = np.asarray(sizes, dtype=float)
    values = np.asarray(values, dtype=float)
    keep = np.isfinite(values) & (values > 0)
    if keep.sum() < 2:
        return float("nan"), float("nan")
    slope, intercept = np.polyfit(np.log(sizes[keep]), np.log(values[keep]), 1)
    return float(slope), float(intercept)
