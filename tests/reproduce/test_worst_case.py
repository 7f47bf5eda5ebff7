"""The worst-case reproduction runs end to end (tiny sizes) and writes what it promises."""

import json

from tallmcmc.cli import main

KEYS = {"austere", "confidence_sampler", "minibatch_barker"}


def test_worst_case_smoke(tmp_path):
    status = main(
        [
            "reproduce",
            "worst-case",
            "--sizes",  # one N: each N is three programs more (a 25 s test in a slow hour with two)
            "1000",
            "--steps",
            "60",
            "--chains",
            "2",
            "--no-progress",
            "--out",
            str(tmp_path),
        ]
    )
    assert status == 0
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["N"] == [1000]
    assert summary["display_names"] == {
        "austere": "AustereMH",
        "confidence_sampler": "MHSubLhd",
        "minibatch_barker": "MHminibatch",
    }
    for field in ("full_fraction", "standard_errors", "near_full_fraction", "mean_size", "mean_data_used"):
        assert set(summary[field]) == KEYS, field
        assert all(len(values) == 1 for values in summary[field].values()), field
    assert all(0 <= f <= 1 for f in summary["full_fraction"]["confidence_sampler"])
    # in the lemma's setting MHSubLhd needs essentially all the data on most steps
    assert min(summary["near_full_fraction"]["confidence_sampler"]) > 0.5
    assert (tmp_path / "worst_case.png").stat().st_size > 10_000
