"""One contract suite, run on every backend: the simulated turntable and each real driver against
its protocol-level emulator (python-can virtual bus, pseudo-terminal). The same loop must track a
slow move, turn lost feedback and drive faults into a safe stop, and never leave a drive enabled.
"""

from __future__ import annotations

import contextlib
import dataclasses
from pathlib import Path

import numpy as np
import pytest

from controller.clock import SimClock
from controller.reference import make_reference
from controller.runner import Session, run_session
from controller.runlog import read_log
from controller.safety import FaultKind
from hil.hil_session import emulator_enabled, hil_rig
from hil.sim_backend import SimBackend

from .conftest import reference_config

BACKENDS = ("sim", "cia402", "odrive_can", "odrive_ascii")
DRIVE_FAULT_CODE = {"cia402": 0x2310, "odrive_can": 0x40, "odrive_ascii": 0x40}


def contract_config(name: str):
    cfg = reference_config()
    drive = dataclasses.replace(cfg.drive, timeout_s=0.05, heartbeat_timeout_s=2.0,
                                heartbeat_period_s=0.05, watchdog_timeout_s=0.05)
    safety = dataclasses.replace(cfg.safety, stale_ticks=5)
    loop = cfg.loop
    if name == "odrive_ascii":
        # the serial link holds ~100 Hz at 115200 baud: 100 Hz and the PID rule at rate/20
        from controller.gains import PIDGains

        loop = dataclasses.replace(loop, rate_hz=100.0)
        pid = PIDGains.triple_pole(cfg.controller.J, 5.0, output_limit_nm=5.0,
                                   derivative_cutoff_hz=25.0)
        cfg = dataclasses.replace(cfg, controller=dataclasses.replace(cfg.controller, pid=pid))
    return dataclasses.replace(cfg, drive=drive, safety=safety, loop=loop)


@contextlib.contextmanager
def rig(name: str):
    """(cfg, backend, clock, injector) for a backend; the injector takes 'stale' or 'drive_fault'."""
    cfg = contract_config(name)
    if name == "sim":
        clock = SimClock()
        backend = SimBackend(cfg, clock, seed=1)

        def inject(kind: str) -> None:
            backend.inject(kind)

        try:
            yield cfg, backend, clock, inject, backend.true_friction_nm, lambda: backend.enabled
        finally:
            backend.close()
        return
    with hil_rig(cfg, name, seed=1) as r:
        emu = r.emulator

        def inject(kind: str) -> None:
            if kind == "stale":
                emu.drop_next(10_000)
            elif name == "cia402":
                emu.inject_fault(DRIVE_FAULT_CODE[name])
            else:
                emu.inject_axis_error(DRIVE_FAULT_CODE[name])

        def emulated_enabled() -> bool:
            return emulator_enabled(emu)

        yield r.cfg, r.backend, r.clock, inject, r.true_friction_nm, emulated_enabled


def run(name: str, out: Path, duration_s: float, fault: str | None = None, at_s: float = 1.0):
    with rig(name) as (cfg, backend, clock, inject, truth, drive_enabled):
        ref = make_reference(cfg.scenario("creep").reference, cfg.plant.encoder.rad_per_count,
                             duration_s)
        fired = []

        def progress(t_s: float, total: float) -> None:  # called once per simulated second
            if fault and not fired and t_s >= at_s - 1e-9:
                inject(fault)
                fired.append(t_s)

        session = Session(backend=backend, clock=clock, reference=ref, duration_s=duration_s,
                          scenario="creep", seed=1, truth=truth)
        summary = run_session(cfg, session, out, plot=False, progress=progress)
        enabled_after = drive_enabled()
    return cfg, summary, read_log(out / "run.fctl"), enabled_after


@pytest.mark.parametrize("name", BACKENDS)
def test_tracks_a_slow_move_and_ends_disabled(name, tmp_path):
    cfg, summary, log, enabled_after = run(name, tmp_path, 1.5)
    assert summary["faults"] == [], summary["faults"]
    assert summary["stop_reason"] == "completed"
    bound = 5e-4 if name == "odrive_ascii" else 2e-5  # ASCII: 100 Hz, positions to 1e-6 turn
    assert summary["rms_error_rad"] < bound
    t = log["t_s"]
    moving = (t > 0.7) & (t < 1.5)
    assert np.mean(log["vel_rad_s"][moving]) == pytest.approx(0.01, rel=0.15)
    assert summary["drive_enabled_at_exit"] is False
    assert enabled_after is False
    # what the drive reported and what protected it, in the summary (hil_rig: the built-in
    # CiA 402 dictionary with its heartbeat consumer; the ODrive watchdogs confirmed at enable)
    drive = summary["drive"]
    assert drive["protocol"] == name
    expected = {"sim": None, "cia402": "heartbeat consumer", "odrive_can": "axis watchdog, seen expired",
                "odrive_ascii": "axis watchdog, 0.05 s, read back enabled"}[name]
    assert drive.get("protection", "").startswith(expected) if expected else "protection" not in drive
    if name == "odrive_ascii":
        assert drive["firmware"] == "0.5.6"
    if name == "odrive_can":
        assert drive["firmware"] == "not reported (0.5.x)"
    if name == "cia402":
        assert float(drive["rated_torque_nm"]) > 0 and float(drive["rated_current_a"]) > 0


@pytest.mark.parametrize("name", BACKENDS)
def test_lost_feedback_faults_and_stops(name, tmp_path):
    cfg, summary, log, enabled_after = run(name, tmp_path, 3.0, fault="stale")
    fault = log["fault"]
    k = int(np.flatnonzero(fault != 0)[0])
    kinds = {FaultKind.STALE_FEEDBACK, FaultKind.COMMUNICATION}
    assert FaultKind(int(fault[k])) in kinds, summary["faults"]
    k0 = int(round(1.0 * cfg.loop.rate_hz))
    assert k0 <= k <= k0 + cfg.safety.stale_ticks + 1
    assert enabled_after is False  # the emulated drive did disable
    # CiA 402 confirms a disable through the statusword, which is lost with every TPDO here: the
    # run must then report the drive as not confirmed disabled, never as disabled. (The ODrive
    # drivers confirm through the heartbeat or a state reply; on a loaded machine that reply may
    # be lost too, and either report is then honest.)
    if name == "cia402":
        assert summary["drive_enabled_at_exit"] is True


@pytest.mark.parametrize("name", BACKENDS)
def test_drive_fault_gives_safe_stop(name, tmp_path):
    cfg, summary, log, enabled_after = run(name, tmp_path, 3.0, fault="drive_fault")
    fault = log["fault"]
    k = int(np.flatnonzero(fault != 0)[0])
    assert FaultKind(int(fault[k])) in {FaultKind.DRIVE_FAULT, FaultKind.COMMUNICATION}, summary["faults"]
    k0 = int(round(1.0 * cfg.loop.rate_hz))
    # ASCII polls the axis state every status_every_ticks; the others see it in the next sample
    within = cfg.drive.status_every_ticks + 2 if name == "odrive_ascii" else 3
    assert k0 <= k <= k0 + within
    assert summary["faults"]
    assert summary["drive_enabled_at_exit"] is False
    assert enabled_after is False
