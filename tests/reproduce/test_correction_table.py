"""The Table 3 reproduction: the paper's ridge construction and the command end to end (tiny sizes)."""

import json

import numpy as np
import pytest
from scipy.special import expit, ndtr

from tallmcmc.cli import main
from tallmcmc.reproduce._ridge_correction import _ridge_gram, ridge_correction


def test_ridge_gram_matches_dense_product():
    n, sigma, v = 60, 0.9, 20.0
    step = v / n
    g = ndtr(np.arange(-3 * n, 3 * n + 1) * step / sigma)
    x = np.arange(-2 * n, 2 * n + 1) * step
    y = np.arange(-n, n + 1) * step
    m = ndtr((x[:, None] - y[None, :]) / sigma)
    np.testing.assert_allclose(_ridge_gram(g, n), m.T @ m, atol=1e-10)
    ridge = ridge_correction(sigma, n, 1.0)
    u = np.linalg.solve(m.T @ m + np.eye(2 * n + 1), m.T @ expit(x))
    np.testing.assert_allclose(ridge.raw, u, atol=1e-9)
    assert ridge.linf_raw == pytest.approx(np.abs(m @ u - expit(x)).max(), rel=1e-9)
    assert ridge.linf_clipped == pytest.approx(np.abs(m @ np.maximum(u, 0) - expit(x)).max(), rel=1e-9)


@pytest.mark.slow
@pytest.mark.parametrize(("sigma", "lam", "paper"), [(0.8, 10.0, 4.0e-4), (1.0, 10.0, 1.3e-3), (1.1, 1.0, 7.5e-3)])
def test_ridge_reproduces_paper_table3_n2000(sigma, lam, paper):
    ridge = ridge_correction(sigma, 2000, lam)
    assert ridge.linf_clipped == pytest.approx(paper, rel=0.05)


@pytest.mark.parametrize(
    ("arguments", "named"),
    [
        ((0.0, 50, 1.0), "sigma"),
        ((1.0, 0, 1.0), "grid_points"),
        ((1.0, 2.5, 1.0), "grid_points"),
        ((1.0, 50, 0.0), "regularization"),
        ((1.0, 50, float("nan")), "regularization"),
    ],
)
def test_ridge_rejects_bad_input_naming_the_argument(arguments, named):
    with pytest.raises(ValueError, match=named):
        ridge_correction(*arguments)


def test_correction_table_smoke(tmp_path):
    status = main(
        [
            "reproduce",
            "correction-table",
            "--sigmas",
            "1.0",
            "--lambdas",
            "10",
            "1",
            "--grid-points",
            "100",
            "--resolve-sigmas",
            "1.0",
            "--no-progress",
            "--out",
            str(tmp_path),
        ]
    )
    assert status == 0
    summary = json.loads((tmp_path / "summary.json").read_text())
    cells = summary["table3"]
    assert [(c["N"], c["sigma"], c["lambda"]) for c in cells] == [(100, 1.0, 10.0), (100, 1.0, 1.0)]
    for cell in cells:
        assert cell["paper"] is None  # the paper's table has N = 2000 and 4000 only
        assert 0 < cell["ours_raw"] < 1 and 0 < cell["ours_clipped"] < 1
    assert set(summary["nonnegative_lp"]) == {"1.0"}
    solve = summary["nonnegative_lp"]["1.0"]
    assert solve["max_cdf_error_resolved"] == pytest.approx(solve["max_cdf_error_shipped"], rel=1e-3)
    assert solve["max_cdf_error_shipped"] < 1e-6
    assert (tmp_path / "correction_table.png").stat().st_size > 10_000


def test_correction_table_rejects_bad_grid_points(tmp_path):
    with pytest.raises(ValueError, match="--grid-points"):
        main(["reproduce", "correction-table", "--grid-points", "0", "--no-progress", "--out", str(tmp_path)])
