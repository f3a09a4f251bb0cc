"""Commissioning measured end to end (hil/bench_identify.py): an identified set applied exactly as
--params applies it, compared with the true set and the oracle."""

from __future__ import annotations

import math

import pytest

from hil.bench_identify import check_identified, exact_counterpart
from hil.identify import IdentifyResult, _write_params

from .conftest import reference_config


def test_check_with_the_true_set_as_params_matches_the_true_run(tmp_path):
    """params.yaml holding the plant's own friction and J: the identified-set runs are the true-set
    runs (deterministic lockstep), so every ratio against the true set is exactly 1."""
    cfg = reference_config()
    path = tmp_path / "params.yaml"
    _write_params(path, IdentifyResult(friction=cfg.plant.friction, uncertainty={}, diagnostics={},
                                       sources={}, directional=False, points=[], J=cfg.plant.J))
    report = check_identified(cfg, path, tmp_path / "check", duration_scale=0.05)
    assert set(report) == {"creep", "reversal", "scan"}
    for sc, r in report.items():
        assert r["vs_true"] == 1.0, sc
        assert math.isfinite(r["vs_oracle"]) and r["oracle"] > 0


def test_check_with_a_wrong_J_differs_from_the_true_run(tmp_path):
    cfg = reference_config()
    path = tmp_path / "params.yaml"
    _write_params(path, IdentifyResult(friction=cfg.plant.friction, uncertainty={}, diagnostics={},
                                       sources={}, directional=False, points=[], J=1.3 * cfg.plant.J))
    report = check_identified(cfg, path, tmp_path / "check", duration_scale=0.05)
    assert report["reversal"]["vs_true"] != pytest.approx(1.0, abs=1e-9)


def test_exact_counterpart_of_an_identified_case():
    kinds = {"damped": "exact", "damped/id": "identified", "mc0": "mc", "mc0/exact": "exact",
             "mc0/id": "identified", "x/id": "identified"}
    assert exact_counterpart("damped/id", kinds) == "damped"
    assert exact_counterpart("mc0/id", kinds) == "mc0/exact"
    assert exact_counterpart("x/id", kinds) is None
