"""The benchmarks say what they measure: both lockstep paths with their plant baseline, the paced
run at the same priority as cyclictest, and a spin window that would starve the loop refused."""

from __future__ import annotations

import math
import os

import pytest
import yaml

import configs
from controller.cli import main
from hil.bench_loop import CASES, fifo_permitted, lockstep_figures

from .conftest import reference_config


def _config_with(tmp_path, section: str, key: str, value) -> str:
    data = yaml.safe_load(configs.path("turntable").read_text(encoding="utf-8"))
    data[section][key] = value
    path = tmp_path / "cfg.yaml"
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    return str(path)


@pytest.mark.parametrize("spin_s", [0.001, 0.005])
def test_a_spin_window_of_a_whole_period_is_a_config_error(tmp_path, capsys, spin_s):
    cfg = _config_with(tmp_path, "loop", "spin_s", spin_s)  # the shipped rate is 1 kHz
    code = main(["sim", "--config", cfg, "--duration", "0.1", "--no-plot", "--out", str(tmp_path / "o")])
    err = capsys.readouterr().err
    assert code == 2
    assert err.count("\n") == 1
    assert err.startswith("frictionctl: error: loop.spin_s: must be shorter than the period")
    assert not (tmp_path / "o").exists()


def test_a_spin_window_shorter_than_the_period_is_accepted(tmp_path, capsys):
    cfg = _config_with(tmp_path, "loop", "spin_s", 0.0009)
    assert main(["sim", "--config", cfg, "--duration", "0.1", "--no-plot", "--out", str(tmp_path / "o")]) == 0


def test_lockstep_figures_cover_the_observer_path_and_pid_alone_with_their_baseline():
    fig = lockstep_figures(reference_config(), seconds=0.3, repeat=1)
    assert set(fig["cases"]) == {f"{sc}/{mode}" for sc, mode in CASES}
    assert fig["path"]  # says which implementation ran
    # the figures and their order; not how they compare between runs (timed on a shared
    # machine: the loop against the plant alone, 1.0× asserted, read 0.53× under load)
    for case in fig["cases"].values():
        assert case["faults"] == 0
        assert 0.0 < case["loop_over_plant"] < math.inf
        assert 0.0 < case["realtime_factor"] < math.inf
        assert 0.0 < case["plant_realtime_factor"] < math.inf
        assert 0 < case["compute_p50_us"] <= case["compute_p99_us"] <= case["compute_max_us"]


def test_probing_sched_fifo_leaves_the_process_on_sched_other():
    if not hasattr(os, "sched_getscheduler"):
        pytest.skip("no POSIX scheduling interface on this platform")
    assert os.sched_getscheduler(0) == os.SCHED_OTHER
    fifo_permitted(10)
    assert os.sched_getscheduler(0) == os.SCHED_OTHER  # cyclictest must not inherit FIFO


def test_bench_replay_batch_compares_jobs_on_identical_results(tmp_path):
    from hil.bench_replay import batch_figures, record_log, replay_figures

    log = record_log("turntable", 0.5, tmp_path / "log")
    fig = replay_figures(log, 1, tmp_path / "r")
    assert fig["ticks"] == 500 and fig["max_abs_diff_friction_hat_nm"] == 0.0
    batch = batch_figures(log, copies=2, jobs=2, out=tmp_path / "b")
    assert batch["identical"] is True
    assert batch["wall_jobs1_s"] > 0 and batch["wall_jobsN_s"] > 0


def test_the_real_clock_never_returns_early_and_logs_each_os_sleep():
    from controller.clock import RealClock

    wake: list[float] = []
    clock = RealClock(spin_s=0.0002, wake_log=wake)
    for _ in range(20):
        before = len(wake)
        t = clock.now() + 0.005  # 25 spin windows ahead: an OS sleep, then the spin
        clock.sleep_until(t)
        assert clock.now() >= t  # the busy spin ends at the deadline, never before it
        # at most one entry per call (none only if the process was descheduled for 4.8 ms
        # between taking t and the call: a loaded machine)
        assert len(wake) - before in (0, 1)
    assert len(wake) >= 1 and min(wake) >= 0.0  # an OS sleep is never shorter than asked
    n = len(wake)
    clock.sleep_until(clock.now() + 0.0001)  # inside the spin window: spin only, no sleep
    assert len(wake) == n


def test_the_paced_run_reports_the_wake_up_delay_the_spin_window_absorbs(tmp_path):
    from hil.bench_loop import _paced

    cfg = reference_config()
    summary = _paced(cfg, 0.3, tmp_path / "paced")
    wake = summary["wake"]
    # at most one OS sleep per tick (the safe stop's ticks included): a tick that started too
    # late to sleep before its spin window (a loaded machine) has none
    assert 0 < wake["count"] <= summary["ticks"]
    assert 0.0 <= wake["p50_us"] <= wake["p99_us"] <= wake["max_us"]
    assert 0 <= wake["beyond_spin"] <= wake["count"]
    assert os.sched_getscheduler(0) == os.SCHED_OTHER
