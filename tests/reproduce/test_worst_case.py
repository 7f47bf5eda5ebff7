"""The worst-case reproduction runs end to end (tiny sizes) and writes what it promises."""

import json

from tallmcmc.cli import main


def test_worst_case_smoke(tmp_path):
    status = main([
        "reproduce", "worst-case", "--sizes", "200", "1000", "--steps", "60", "--chains", "2",
        "--no-progress", "--out", str(tmp_path),
    ])
    assert status == 0
    summary = json.loads((tmp_path / "summary.json").read_text())
    for key in ("N", "austere_full_fraction", "confidence_full_fraction", "minibatch_mean_size"):
        assert len(summary[key]) == 2, key
    assert all(0 <= f <= 1 for f in summary["confidence_full_fraction"])
    # in the lemma's setting MHSubLhd needs essentially all the data on most steps
    assert min(summary["near_full_fraction"]["confidence"]) > 0.5
    assert (tmp_path / "worst_case.png").stat().st_size > 10_000
