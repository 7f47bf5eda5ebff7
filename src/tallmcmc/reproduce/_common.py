"""Small helpers every reproduction shares: output folder, JSON summary, tables."""

from __future__ import annotations

import argparse
import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np


def add_output_argument(parser: argparse.ArgumentParser, default: str) -> None:
    """Add ``--out DIR`` (created if missing) to an experiment's parser."""
    parser.add_argument(
        "--out",
        type=Path,
        default=Path(default),
        help=f"folder for summary.json and figures (default: {default})",
    )


def output_folder(path: Path) -> Path:
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
    if isinstance(value, (np.floating, float)):
        value = float(value)
        return value if math.isfinite(value) else None
    if isinstance(value, (np.integer,)):
        return int(value)
    if isinstance(value, (np.bool_,)):
        return bool(value)
    return value


def write_summary(folder: Path, summary: dict[str, Any], name: str = "summary.json") -> Path:
    """Write ``summary`` as indented JSON (NumPy values converted, non-finite as null)."""
    path = output_folder(folder) / name
    path.write_text(json.dumps(_jsonable(summary), indent=2) + "\n")
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
