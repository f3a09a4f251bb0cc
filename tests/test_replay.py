"""Offline replay: exact reproduction of a run, what-if parameters, raw CAN captures decoded by
the drivers' codecs, and damaged logs."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from controller.runlog import LogFormatError, read_log
from hil.hil_session import hil_run
from hil.replay import replay, replay_capture, replay_log, config_from_log

from .conftest import reference_config, sim

ROOT = Path(__file__).resolve().parents[1]
DT_S = 1e-3  # the reference config's loop period


@pytest.fixture(scope="module")
def adaptive_run(tmp_path_factory):
    """A lugre_adaptive run of the schedule scenario: observer, adaptation and a set switch."""
    out = tmp_path_factory.mktemp("run")
    summary, log, _ = sim(reference_config(), out, scenario="schedule", duration_s=6.0,
                          compensation="lugre_adaptive")
    assert summary["faults"] == []
    return out / "run.fctl", log


def test_replay_reproduces_the_logged_estimates_exactly(adaptive_run, tmp_path):
    path, log = adaptive_run
    summary = replay(path, tmp_path)
    assert summary["ticks"] == 6000
    assert summary["max_abs_diff_friction_hat_nm"] <= 1e-12
    assert summary["max_abs_diff_torque_nm"] <= 1e-12
    assert summary["logged_control_law_revision"] == summary["control_law_revision"]
    assert summary["revision_warning"] is None
    # the run did exercise the estimator: a non-trivial estimate, adaptation and a set switch
    assert np.ptp(log["friction_hat_nm"]) > 0.3
    assert np.max(log["payload_kg"]) == 5.0
    saved = json.loads((tmp_path / "summary.json").read_text())
    assert saved["replay_realtime_factor"] > 1.0
    csv = np.genfromtxt(tmp_path / "replay.csv", delimiter=",", names=True)
    np.testing.assert_array_equal(csv["friction_hat_nm"], log["friction_hat_nm"][:6000])


def test_a_run_with_a_stated_uncertainty_replays_exactly_with_it(tmp_path):
    """controller.friction_se widens the feedforward model's bound (heavily damped bristles,
    where the start reaches it): the header's config carries it, so the replay computes the
    same law."""
    from controller.friction import FrictionUncertainty, LuGreParams
    from hil.bench_compensation import with_plant_friction

    soft = LuGreParams(Fc=0.1855, Fs=0.2421, vs=0.0665, sigma0=6711.0, sigma1=76.25, sigma2=0.04)
    cfg = with_plant_friction(reference_config(), soft)
    cfg = dataclasses.replace(cfg, controller=dataclasses.replace(
        cfg.controller, friction_se=FrictionUncertainty(sigma1=0.6, sigma0=67.0)))
    summary, log, _ = sim(cfg, tmp_path / "run", duration_s=0.6, compensation="lugre_adaptive")
    assert summary["faults"] == []
    assert config_from_log(read_log(tmp_path / "run" / "run.fctl")).controller.friction_se \
        == cfg.controller.friction_se
    out = replay(tmp_path / "run" / "run.fctl", tmp_path / "replay")
    assert out["max_abs_diff_torque_nm"] <= 1e-12
    assert out["max_abs_diff_friction_hat_nm"] <= 1e-12


def test_replay_is_exact_over_repeated_samples(tmp_path):
    """Rows that repeated the previous sample (lost replies) were ridden through on the held
    velocity; the replay follows the logged sequence numbers and reproduces them exactly."""
    from .test_loop import _LosesReplies

    summary, log, _ = sim(reference_config(), tmp_path / "run", duration_s=2.5,
                          compensation="lugre_adaptive", backend_cls=_LosesReplies)
    assert summary["faults"] == []
    assert np.sum(np.diff(log["sequence"][:-1]) == 0) == len(_LosesReplies.lost_at_s)
    out = replay(tmp_path / "run" / "run.fctl", tmp_path / "replay")
    assert out["max_abs_diff_friction_hat_nm"] <= 1e-12
    assert out["max_abs_diff_torque_nm"] <= 1e-12


def test_replay_is_exact_when_the_first_tick_repeats_the_enable_time_sample(tmp_path):
    """A reply lost on the first tick repeats the sample read at enable. The loop counts the
    first tick's sample as new, as the replay does (with the axis already moving, the loop
    that held it stepped its velocity over two periods and the replay over one: 0.06 N·m)."""
    from .test_loop import DT, _LosesReplies

    class FirstLost(_LosesReplies):
        lost_at_s = (DT,)

    def spinning(backend):
        backend.plant.omega_rad_s = 0.05

    summary, log, _ = sim(reference_config(), tmp_path / "run", duration_s=0.5,
                          compensation="lugre_adaptive", backend_cls=FirstLost,
                          backend_hook=spinning)
    assert summary["faults"] == []
    res = replay_log(log, config_from_log(log))
    assert np.max(np.abs(res.torque_cmd_nm - log["torque_cmd_nm"][res.rows])) <= 1e-12


def test_replay_of_a_real_clock_run_is_exact_with_its_stall_and_lost_replies(tmp_path):
    """On the real clock the velocity estimate steps over the drive's sample times (jitter,
    skipped deadlines); the log records each interval (vel_dt_s) and the replay steps with it
    (from the row count instead, a 1 s reversal replayed 0.17-0.30 N·m off)."""
    import time

    from controller.clock import RealClock
    from controller.reference import make_reference
    from controller.runner import Session, run_session
    from hil.sim_backend import SimBackend

    class StallsAndLoses(SimBackend):
        reads = 0

        def _read(self):
            self.reads += 1
            if self.reads == 200:
                time.sleep(0.0065)  # a stall: deadlines skipped
            fb = super()._read()
            previous = getattr(self, "_previous", None)
            self._previous = fb
            if self.reads in (201, 350) and previous is not None:  # lost replies
                self._previous = previous
                return previous
            return fb

    cfg = reference_config()
    clock = RealClock(cfg.loop.spin_s)
    scenario = cfg.scenario("reversal")
    backend = StallsAndLoses(cfg, clock, seed=1, scenario=scenario)
    reference = make_reference(scenario.reference, cfg.plant.encoder.rad_per_count, 0.5)
    run_session(cfg, Session(backend=backend, clock=clock, reference=reference, duration_s=0.5,
                             scenario="reversal", seed=1, compensation="lugre_adaptive"),
                tmp_path, plot=False)
    run = read_log(tmp_path / "run.fctl")
    assert np.any(np.diff(run["t_s"]) > 1.5 * DT_S)  # deadlines were skipped
    assert np.any(np.diff(run["sequence"][:-1]) == 0)  # samples repeated
    assert np.any(np.abs(run["vel_dt_s"][run["vel_dt_s"] > 0] - DT_S) > 1e-6)  # real intervals
    res = replay_log(run, config_from_log(run))
    logged = run["torque_cmd_nm"][res.rows]
    assert np.max(np.abs(res.torque_cmd_nm - logged)) <= 1e-12
    assert np.max(np.abs(res.friction_hat_nm - run["friction_hat_nm"][res.rows])) <= 1e-12


def test_a_log_of_a_loop_that_read_every_row_as_new_is_replayed_so(tmp_path):
    """Logs written before the loop rode through repeated samples carry no
    ``repeated_samples: held`` in their header: their replay reads every row as a new sample,
    as that loop did (so a log of this loop stripped of the mark no longer replays exactly)."""
    from .test_loop import _LosesReplies

    sim(reference_config(), tmp_path / "run", duration_s=2.5, compensation="lugre_adaptive",
        backend_cls=_LosesReplies)
    run = read_log(tmp_path / "run" / "run.fctl")
    assert run.header["repeated_samples"] == "held"
    exact = replay_log(run, config_from_log(run))
    del run.header["repeated_samples"]
    as_old = replay_log(run, config_from_log(run))
    logged = run["torque_cmd_nm"][exact.rows]
    assert np.max(np.abs(exact.torque_cmd_nm - logged)) <= 1e-12
    assert np.max(np.abs(as_old.torque_cmd_nm - logged)) > 1e-7  # 9e-7 N·m at creep


def test_a_log_of_another_control_law_is_replayed_with_a_warning(tmp_path):
    """The header's ``control_law_revision`` names the law that recorded the log; a log of
    another revision (or of none: recorded before the number was logged) replays with the
    current law, and the replay says so: its summary and one line on stderr."""
    from controller.clock import SimClock
    from controller.control_law import CONTROL_LAW_REVISION
    from controller.reference import make_reference
    from controller.runner import Session, run_session
    from hil.replay import replay_summary, revision_warning
    from hil.sim_backend import SimBackend

    cfg = reference_config()
    sc = cfg.scenario("creep")
    clock = SimClock()
    older = CONTROL_LAW_REVISION - 1
    session = Session(backend=SimBackend(cfg, clock, seed=1, scenario=sc), clock=clock,
                      reference=make_reference(sc.reference, cfg.plant.encoder.rad_per_count, 0.5),
                      duration_s=0.5, scenario="creep", seed=1, compensation="lugre_adaptive",
                      extra_header={"control_law_revision": older})
    run_session(cfg, session, tmp_path / "run", plot=False)
    log = tmp_path / "run" / "run.fctl"
    run = read_log(log)
    assert run.header["control_law_revision"] == older
    summary = replay_summary(replay_log(run, config_from_log(run)))
    assert summary["logged_control_law_revision"] == older
    assert f"revision {older}" in summary["revision_warning"]
    assert f"revision {CONTROL_LAW_REVISION}" in summary["revision_warning"]
    del run.header["control_law_revision"]  # a log from before the number was logged
    assert "no control_law_revision" in revision_warning(run.header)
    run.header["control_law_revision"] = CONTROL_LAW_REVISION
    assert revision_warning(run.header) is None
    cli = subprocess.run([sys.executable, "-m", "controller.cli", "replay", str(log), "--out",
                          str(tmp_path / "replay"), "--no-plot"], capture_output=True, text=True,
                         cwd=ROOT)
    assert cli.returncode == 0, cli.stderr
    warned = [line for line in cli.stderr.splitlines() if "warning" in line]
    assert len(warned) == 1 and str(log) in warned[0] and f"revision {older}" in warned[0]


def test_what_if_parameters_change_the_estimate(adaptive_run):
    path, log = adaptive_run
    run = read_log(path)
    cfg = config_from_log(run)
    p = cfg.controller.friction
    other = dataclasses.replace(cfg, controller=dataclasses.replace(
        cfg.controller, friction=p.scaled(Fc=1.3, Fs=1.3), schedule=None))
    res = replay_log(run, other)
    diff = np.abs(res.friction_hat_nm - log["friction_hat_nm"][res.rows])
    assert np.max(diff) > 0.02
    coulomb = replay_log(run, cfg, compensation="coulomb")
    assert coulomb.compensation == "coulomb"
    assert set(np.round(np.abs(coulomb.friction_hat_nm[np.abs(run["vel_ref_rad_s"][coulomb.rows]) > 0.01]), 6)) \
        <= {round(0.2 + 0.04 * abs(v), 6) for v in run["vel_ref_rad_s"][coulomb.rows]}


@pytest.mark.parametrize("protocol, suffix", [("odrive_can", ".log"), ("cia402", ".asc")])
def test_a_capture_replays_through_the_driver_decoders(protocol, suffix, tmp_path):
    cfg = reference_config()
    capture = tmp_path / f"bus{suffix}"
    summary = hil_run(cfg, protocol, "reversal", tmp_path / "hil", duration_s=2.5, seed=1,
                      capture=capture, plot=False)
    assert summary["faults"] == []
    run = read_log(tmp_path / "hil" / "run.fctl")
    res = replay_capture(capture, cfg, tmp_path / "replay", plot=False)
    assert res["protocol"] == protocol
    # every tick the loop ran appears in the capture (startup and stop ticks may add a few)
    assert abs(res["ticks"] - run.data.shape[0]) <= 60
    cap = np.genfromtxt(tmp_path / "replay" / "replay.csv", delimiter=",", names=True)
    # the decoded commands are the logged ones, in order (CiA 402: within the ‰-of-rated
    # quantization); matched as a subsequence, since a loaded machine may add or lose a frame
    tol = 2e-3 * 3.0 if protocol == "cia402" else 1e-6
    logged = run["torque_cmd_nm"][np.abs(run["torque_cmd_nm"]) > 0]
    decoded = cap["torque_cmd_nm"][np.abs(cap["torque_cmd_nm"]) > 0]
    matched, j = 0, 0
    for value in logged:
        k = j
        while k < decoded.size and k < j + 5 and abs(decoded[k] - value) > tol:
            k += 1
        if k < decoded.size and abs(decoded[k] - value) <= tol:
            matched += 1
            j = k + 1
    assert matched >= 0.97 * logged.size, (matched, logged.size)
    # the estimator sees friction in the captured motion: the reversal's ±Fc levels
    assert np.max(cap["friction_hat_nm"]) > 0.15 and np.min(cap["friction_hat_nm"]) < -0.15


def test_truncated_log_replays_what_is_intact_and_names_the_offset(adaptive_run, tmp_path):
    path, log = adaptive_run
    data = path.read_bytes()
    cut = tmp_path / "cut.fctl"
    cut.write_bytes(data[: len(data) * 2 // 3 + 17])  # inside a chunk
    with pytest.raises(LogFormatError, match="offset"):
        read_log(cut, strict=True)
    summary = replay(cut, tmp_path / "out", plot=False)
    assert "offset" in summary["log_problem"]
    assert 0 < summary["ticks"] < 6000
    assert summary["max_abs_diff_friction_hat_nm"] <= 1e-12


def test_corrupted_inputs_give_one_line_errors(adaptive_run, tmp_path):
    path, _ = adaptive_run
    bad = tmp_path / "bad.fctl"
    bad.write_bytes(b"not a log at all\n" * 10)
    garbage = tmp_path / "bus.log"
    garbage.write_text("(12.5) vcan0 12#ZZ\nnonsense line\n")
    for target in (bad, garbage):
        proc = subprocess.run([sys.executable, "-m", "controller.cli", "replay", str(target),
                               "--out", str(tmp_path / "o")], capture_output=True, text=True, cwd=ROOT)
        assert proc.returncode == 2, proc.stderr
        lines = proc.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("frictionctl: error:"), proc.stderr
        assert str(target) in lines[0]


def test_a_replay_into_the_runs_own_folder_is_refused(adaptive_run, tmp_path):
    """The replay writes summary.json (and, with an alarm, proposed_params.yaml) into --out: into
    the run's own folder that would overwrite the run's. One line, exit 2, nothing written."""
    path, _ = adaptive_run
    before = {p.name: p.read_bytes() for p in path.parent.iterdir() if p.is_file()}
    proc = subprocess.run([sys.executable, "-m", "controller.cli", "replay", str(path),
                           "--out", str(path.parent)], capture_output=True, text=True, cwd=ROOT)
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("frictionctl: error: --out"), proc.stderr
    assert "summary.json" in lines[0] and str(path) in lines[0]
    assert {p.name: p.read_bytes() for p in path.parent.iterdir() if p.is_file()} == before
