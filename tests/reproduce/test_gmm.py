"""The GMM reproduction runs end to end (tiny sizes) and writes what it promises."""

import json

import numpy as np
import pytest

from tallmcmc.cli import main
from tallmcmc.reproduce import gmm


def test_gmm_smoke(tmp_path):
    status = main(
        [
            "reproduce",
            "gmm",
            "--trials",
            "2",
            "--samples",
            "200",
            "--num-data",
            "20000",
            "--temperature",
            "200",
            "--methods",
            "minibatch_barker",
            "exact_barker",
            "--no-progress",
            "--out",
            str(tmp_path),
        ]
    )
    assert status == 0
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert list(summary["methods"]) == ["minibatch_barker", "exact_barker"]
    assert summary["methods"]["minibatch_barker"]["display_name"] == "MHminibatch"
    for key in ("minibatch_barker", "exact_barker"):
        stats = summary["methods"][key]
        for field in (
            "mean_minibatch_size",
            "std_minibatch_size",
            "mean_data_used",
            "acceptance_rate",
            "seconds_per_step",
            "poisson_log_likelihood",
            "chi_squared",
        ):
            assert np.isfinite(stats[field]), field
    assert summary["methods"]["exact_barker"]["mean_minibatch_size"] == 20000
    assert summary["methods"]["minibatch_barker"]["mean_minibatch_size"] < 2000
    assert (tmp_path / "figure1_posterior.png").stat().st_size > 10_000
    assert (tmp_path / "figure2_minibatch_sizes.png").stat().st_size > 5_000


def test_bin_statistics_against_hand_computation():
    probabilities = np.array([0.5, 0.3, 0.2, 0.0])
    counts = np.array([6.0, 2.0, 2.0, 0.0])
    # Eq. (39) by hand: Σ c log(nP) − nP − log c!
    expected = 6 * np.log(5) - 5 - np.log(720) + 2 * np.log(3) - 3 - np.log(2) + 2 * np.log(2) - 2 - np.log(2)
    assert gmm.poisson_log_likelihood(counts, probabilities) == pytest.approx(expected)
    value, dof = gmm.chi_squared(counts, probabilities, minimum_expected=2.5)
    # bins with expected ≥ 2.5: 5 (obs 6) and 3 (obs 2); pooled rest: expected 2, observed 2
    assert value == pytest.approx(1 / 5 + 1 / 3 + 0) and dof == 2


@pytest.mark.slow
def test_gmm_paper_scale_minibatch_sizes(tmp_path):
    """Section 6.1 at paper scale (N = 10⁶, K = 10⁴): MHminibatch's mean minibatch size is the paper's.

    The paper reports 182.3 ± 11.4 over 10 trials (and 172 for the trial of its Figure 2); three trials of
    ours must fall within three of its standard deviations.
    """
    status = main(
        ["reproduce", "gmm", "--trials", "3", "--methods", "minibatch_barker", "--no-progress", "--out", str(tmp_path)]
    )
    assert status == 0
    stats = json.loads((tmp_path / "summary.json").read_text())["methods"]["minibatch_barker"]
    assert 182.3 - 3 * 11.4 < stats["mean_minibatch_size"] < 182.3 + 3 * 11.4
    assert stats["full_data_fraction"] == 0.0
    assert 0.3 < stats["acceptance_rate"] < 0.5
