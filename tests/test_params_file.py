"""Identified parameter files applied with --params (sim, run, hil, replay, api.load_config):
one loader for identify's params.yaml, a run's proposed_params.yaml and a config; errors name the
file and the key; the schedule follows the applied set."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
import yaml

from controller import api, cli
from controller.estimation_config import anchored
from controller.friction import FrictionUncertainty, LuGreParams
from controller.params_file import apply_params, load_params_file
from controller.runlog import read_log
from controller.schema import ConfigError
from hil.identify import IdentifyResult, _write_params
from hil.replay import config_from_log

from .conftest import reference_config

IDENTIFIED = LuGreParams(Fc=0.23, Fs=0.31, vs=0.014, sigma0=2.2e4, sigma1=0.11, sigma2=0.05)


def write_identified(path: Path, friction=IDENTIFIED, J: float | None = 0.0915) -> Path:
    """A params file written by identify's own writer (also the one of proposed_params.yaml)."""
    _write_params(path, IdentifyResult(friction=friction, uncertainty={"Fc": 1e-4}, diagnostics={},
                                       sources={}, directional=False, points=[], J=J, J_se=2e-4))
    return path


def test_identify_params_yaml_sets_friction_and_J_and_the_schedule_follows(tmp_path):
    path = write_identified(tmp_path / "params.yaml")
    data = yaml.safe_load(path.read_text())
    assert data["J"] == pytest.approx(0.0915) and data["uncertainty"]["J"] == pytest.approx(2e-4)
    params = load_params_file(path)
    assert params.friction == IDENTIFIED and params.J == pytest.approx(0.0915)
    cfg = apply_params(reference_config(), params)
    assert cfg.controller.friction == IDENTIFIED and cfg.controller.J == pytest.approx(0.0915)
    # the shipped schedule's heavy set is 1.15 × the believed Fc: it moves with the new set
    heavy = {s.name: s for s in anchored(cfg.controller.schedule, cfg.controller.friction).sets}["heavy"]
    assert heavy.friction.Fc == pytest.approx(1.15 * IDENTIFIED.Fc)
    # without J in the file the config's J stays
    no_j = load_params_file(write_identified(tmp_path / "p2.yaml", J=None))
    assert no_j.J is None and apply_params(reference_config(), no_j).controller.J == 0.08


def test_the_stated_uncertainty_is_applied_with_its_set_and_never_outlives_it(tmp_path):
    """identify's uncertainty: block becomes controller.friction_se (.nan: not measured);
    a file without one clears it; per direction, each key's larger standard error."""
    path = tmp_path / "params.yaml"
    _write_params(path, IdentifyResult(friction=IDENTIFIED, uncertainty={
        "Fc": 1e-4, "sigma0": 150.0, "sigma1": 0.002, "vs": float("nan"), "delta": 0.0},
        diagnostics={}, sources={}, directional=False, points=[], J=0.0915, J_se=2e-4))
    params = load_params_file(path)
    se = params.uncertainty
    assert se is not None and se.sigma1 == pytest.approx(0.002) and se.sigma0 == pytest.approx(150.0)
    assert se.vs is None and se.delta == 0.0 and se.J == pytest.approx(2e-4)
    cfg = apply_params(reference_config(), params)
    assert cfg.controller.friction_se == se
    assert cfg.controller.observer.ff_clamp_margin_nm is None  # derived when the compensator is made
    bare = tmp_path / "bare.yaml"
    bare.write_text(yaml.safe_dump({"friction": IDENTIFIED.as_dict()}))
    assert apply_params(cfg, load_params_file(bare)).controller.friction_se is None
    both = tmp_path / "both.yaml"
    both.write_text(yaml.safe_dump({"friction": IDENTIFIED.as_dict(), "uncertainty": {
        "forward": {"sigma1": 0.001, "sigma0": 200.0}, "reverse": {"sigma1": 0.003, "sigma0": 100.0},
        "J": 3e-4}}))  # as identify writes a per-direction set: J beside the two blocks
    assert load_params_file(both).uncertainty == FrictionUncertainty(sigma1=0.003, sigma0=200.0,
                                                                     J=3e-4)
    # a direction that did not measure a parameter (.nan, or 0: held) leaves it unstated; .inf
    # is read as not measured too (identify writes it where a fit did not determine one)
    half = tmp_path / "half.yaml"
    half.write_text(yaml.safe_dump({"friction": IDENTIFIED.as_dict(), "uncertainty": {
        "forward": {"sigma1": float("nan"), "sigma0": 0.0, "Fs": float("inf")},
        "reverse": {"sigma1": 0.001, "sigma0": 100.0, "Fs": 0.01}}}))
    assert load_params_file(half).uncertainty == FrictionUncertainty()


def test_a_full_config_is_a_params_file_too(tmp_path):
    data = yaml.safe_load(Path(api.resolve_config_path("turntable")).read_text())
    data["controller"]["friction"] = IDENTIFIED.as_dict()
    data["controller"]["J"] = 0.07
    path = tmp_path / "other.yaml"
    path.write_text(yaml.safe_dump(data))
    params = load_params_file(path)
    assert params.friction == IDENTIFIED and params.J == 0.07


@pytest.mark.parametrize("text, where", [
    ("friction: {Fc: 0.2, Fs: 0.1, vs: 0.01, sigma0: 10000.0, sigma1: 0.1, sigma2: 0.04}\n",
     "p.yaml: friction.Fs: must be >= Fc"),
    ("friction: {Fc: 0.2, Fs: 0.3, vs: 0.01, sigma0: 10000.0, sigma1: 0.1, sigma2: 0.04}\nJ: -1\n",
     "p.yaml: J: must be > 0"),
    ("friction: {Fc: 0.2, Fs: 0.3, vs: 0.01, sigma0: 10000.0, sigma1: 0.1, sigma2: 0.04}\nJ: heavy\n",
     "p.yaml: J: must be a number"),
    ("friction: {Fc: 0.2, Fs: 0.3, vs: 0.01, sigma0: 10000.0, sigma1: 0.1, sigma2: 0.04, mu: 1}\n",
     "p.yaml: friction.mu: unknown key"),
    ("uncertainty: {Fc: 0.1}\n", "p.yaml: no 'friction:' or 'controller.friction:' block"),
    ("friction: {Fc: 0.2, Fs: 0.3, vs: 0.01, sigma0: 10000.0, sigma1: 0.1, sigma2: 0.04}\n"
     "uncertainty: {sigma1: -0.01}\n", "p.yaml: uncertainty.sigma1: must be a standard error"),
    ("friction: {Fc: 0.2, Fs: 0.3, vs: 0.01, sigma0: 10000.0, sigma1: 0.1, sigma2: 0.04}\n"
     "uncertainty: {mu: 0.01}\n", "p.yaml: uncertainty.mu: unknown key"),
    ("friction: {Fc: 0.2, Fs: 0.3, vs: 0.01, sigma0: 10000.0, sigma1: 0.1, sigma2: 0.04}\n"
     "uncertainty: {forward: {sigma1: 0.01}}\n", "p.yaml: uncertainty: a per-direction"),
    ("friction: {Fc: 0.2, Fs: 0.3, vs: 0.01, sigma0: 10000.0, sigma1: 0.1, sigma2: 0.04}\n"
     "uncertainty: {forward: {sigma1: 0.01}, reverse: {sigma1: x}}\n",
     "p.yaml: uncertainty.reverse.sigma1: must be a number"),
    ("friction: {Fc: 0.2, Fs: 0.3, vs: 0.01, sigma0: 10000.0, sigma1: 0.1, sigma2: 0.04}\n"
     "uncertainty: {forward: {sigma1: 0.01}, reverse: {sigma1: 0.02}, sigma1: 0.01}\n",
     "p.yaml: uncertainty.forward.sigma1: given beside forward:/reverse: as well"),
])
def test_errors_name_the_file_and_the_key(tmp_path, text, where):
    path = tmp_path / "p.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError) as err:
        load_params_file(path)
    assert where in str(err.value) and "\n" not in str(err.value)


@pytest.mark.parametrize("command", [["sim", "--scenario", "creep"], ["run", "--scenario", "creep"],
                                     ["hil", "--protocol", "odrive_can"]])
def test_cli_bad_params_is_one_line_exit_2_before_anything_runs(tmp_path, capsys, command):
    bad = tmp_path / "p.yaml"
    bad.write_text("friction: {Fc: 0.2, Fs: 0.1, vs: 0.01, sigma0: 10000.0, sigma1: 0.1, sigma2: 0.04}\n")
    out = tmp_path / "out"
    assert cli.main(command + ["--params", str(bad), "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "p.yaml: friction.Fs: must be >= Fc" in err
    assert not out.exists()


def test_cli_sim_runs_with_the_identified_set(tmp_path, capsys):
    path = write_identified(tmp_path / "params.yaml")
    out = tmp_path / "out"
    assert cli.main(["sim", "--scenario", "reversal", "--duration", "0.5", "--no-plot",
                     "--compensation", "lugre_adaptive", "--params", str(path), "--out", str(out)]) == 0
    believed = config_from_log(read_log(out / "run.fctl")).controller  # what the run used
    assert believed.friction == IDENTIFIED and believed.J == pytest.approx(0.0915)


def test_api_load_config_takes_params(tmp_path):
    path = write_identified(tmp_path / "params.yaml")
    cfg = api.load_config("turntable", overrides={"controller.compensation": "lugre"}, params=path)
    assert cfg.controller.friction == IDENTIFIED and cfg.controller.compensation == "lugre"
    assert cfg.controller.J == pytest.approx(0.0915)


def test_replay_params_applies_J_as_well(tmp_path):
    from hil.replay import with_params

    cfg = with_params(reference_config(), load_params_file(write_identified(tmp_path / "p.yaml")))
    assert cfg.controller.J == pytest.approx(0.0915)
    # a bare friction set (what-if from code) leaves J alone
    assert with_params(reference_config(), dataclasses.replace(IDENTIFIED, Fc=0.25)).controller.J == 0.08
