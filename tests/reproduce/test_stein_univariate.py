"""The univariate Stein reproductions (Gorham & Mackey 2015, Figures 1, 2, 5) run end to end through the CLI."""

import json

import numpy as np
import pytest

from tallmcmc.cli import main


def _run(tmp_path, name, *arguments):
    assert main(["reproduce", name, *arguments, "--no-progress", "--out", str(tmp_path)]) == 0
    return json.loads((tmp_path / "summary.json").read_text())


def test_stein_gaussian_vs_t_smoke(tmp_path):
    summary = _run(tmp_path, "stein-gaussian-vs-t", "--max-n", "200", "--min-n", "20", "--grid-size", "4")
    assert summary["max_n"] == 200 and summary["seed"] == 7 and summary["solver"] == "ipm"
    assert set(summary["discrepancy"]) == {"gaussian", "scaled_student_t"}
    for values in summary["discrepancy"].values():
        assert len(values) == len(summary["sizes"]) and all(np.isfinite(values)) and min(values) > 0
    assert summary["failures"] == []
    assert (tmp_path / "discrepancy.png").stat().st_size > 5_000
    assert (tmp_path / "test_functions.png").stat().st_size > 5_000


def test_stein_gaussian_vs_t_defaults_to_the_papers_n_and_highs_agrees(tmp_path):
    import argparse

    from tallmcmc.reproduce import stein_gaussian_vs_t as module

    parser = argparse.ArgumentParser()
    module.add_arguments(parser)
    assert parser.parse_args([]).max_n == 200_000 == module.PAPER_MAX_N
    fast = _run(tmp_path / "ipm", "stein-gaussian-vs-t", "--max-n", "120", "--min-n", "30", "--grid-size", "2")
    reference = _run(
        tmp_path / "highs",
        "stein-gaussian-vs-t",
        "--max-n",
        "120",
        "--min-n",
        "30",
        "--grid-size",
        "2",
        "--solver",
        "highs",
    )
    for name, values in fast["discrepancy"].items():
        np.testing.assert_allclose(values, reference["discrepancy"][name], rtol=1e-6)


def test_stein_compare_smoke(tmp_path):
    summary = _run(tmp_path, "stein-compare", "--max-n", "150", "--min-n", "20", "--grid-size", "3", "--seeds", "7")
    assert summary["seeds"] == [7] and summary["max_n"] == 150
    for target in ("gaussian", "uniform"):
        # Wasserstein <= classical <= graph with these Stein factors, in every run
        assert summary["targets"][target]["wasserstein_at_most_classical_fraction"] == 1.0
        assert summary["targets"][target]["classical_at_most_graph_fraction"] == 1.0
        for key in ("classical", "graph", "wasserstein"):
            assert len(summary["targets"][target]["per_seed"]["7"][key]) == len(summary["sizes"])
    assert summary["classical_above_graph"] == [] and summary["failures"] == []
    # for Unif(0, 1) the classical Stein discrepancy is the Wasserstein distance
    assert summary["targets"]["uniform"]["classical_vs_wasserstein_max_relative_difference"] < 1e-6
    assert (tmp_path / "comparison.png").stat().st_size > 5_000


def test_stein_rates_smoke(tmp_path):
    summary = _run(
        tmp_path, "stein-rates", "--max-n", "60", "--min-n", "10", "--grid-size", "4", "--num-sequences", "3"
    )
    assert summary["num_iid_sequences"] == 3 and summary["max_n"] == 60
    assert set(summary["fitted_slope"]) == {"iid", "sobol", "herding"}
    assert all(slope < 0 for slope in summary["fitted_slope"].values())
    assert (tmp_path / "rates.png").stat().st_size > 5_000


@pytest.mark.parametrize("name", ["stein-gaussian-vs-t", "stein-compare", "stein-rates"])
def test_bad_sizes_raise_naming_the_arguments(tmp_path, name):
    with pytest.raises(ValueError, match="--min-n"):
        main(["reproduce", name, "--min-n", "50", "--max-n", "20", "--no-progress", "--out", str(tmp_path)])
