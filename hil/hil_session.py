"""Hardware-in-the-loop: the real driver code against an emulated drive that speaks the real
protocol (a python-can ``virtual`` bus for CAN, a pseudo-terminal for serial), with the simulated
turntable behind the emulator.

Lockstep (default): the loop runs on the simulated clock and the emulator advances its plant one
period per SYNC (CiA 402) or per torque command (ODrive) — deterministic, faster than real time.
Real time (``realtime=True``): the loop runs on the monotonic clock and the emulator's plant
follows wall time.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import uuid
from pathlib import Path
from typing import Iterator

from controller.clock import RealClock, SimClock
from controller.config import Config
from drivers.backend import Backend, Clock

PROTOCOLS = ("cia402", "odrive_can", "odrive_ascii")
CIA402_RATED_CURRENT_A = 5.0  # the emulated drive's 0x6075 [A]


@dataclasses.dataclass
class HilRig:
    """An emulator and the real driver connected to it."""

    cfg: Config  # the config as the driver sees it (drive section adapted to the emulator)
    backend: Backend
    clock: Clock
    emulator: object

    def true_friction_nm(self) -> float:
        return self.emulator.plant.friction_nm


def _hil_drive_config(cfg: Config, protocol: str, channel: str) -> Config:
    d = cfg.drive
    if protocol == "cia402":
        d = dataclasses.replace(d, protocol=protocol, interface="virtual", channel=channel,
                                node_id=d.node_id if 1 <= d.node_id <= 127 else 1,
                                counts_per_rev=cfg.plant.encoder.counts_per_rev)
    elif protocol == "odrive_can":
        d = dataclasses.replace(d, protocol=protocol, interface="virtual", channel=channel,
                                node_id=d.node_id if d.node_id <= 63 else 0)
    else:
        d = dataclasses.replace(d, protocol=protocol)
    return dataclasses.replace(cfg, drive=d)


def ascii_rate_limit(cfg: Config) -> float:
    """The highest loop rate the configured ODrive ASCII link holds [Hz]."""
    from drivers.odrive_ascii import max_rate_for_baud

    d = cfg.drive
    return max_rate_for_baud(d.baudrate, d.axis, d.checksum, d.status_every_ticks > 0)


@contextlib.contextmanager
def hil_rig(cfg: Config, protocol: str, *, realtime: bool = False, seed: int = 0,
            capture: Path | None = None, plant=None) -> Iterator[HilRig]:
    """Start the emulator for ``protocol`` and the real driver against it; stop both after.
    ``plant`` overrides ``cfg.plant`` for the emulated turntable."""
    if protocol not in PROTOCOLS:
        raise ValueError(f"--protocol: unknown {protocol!r} (known: {', '.join(PROTOCOLS)})")
    plant_cfg = plant or cfg.plant
    channel = f"frictionctl-hil-{os.getpid()}-{uuid.uuid4().hex[:6]}"
    cfg = _hil_drive_config(cfg, protocol, channel)
    clock: Clock = RealClock(cfg.loop.spin_s) if realtime else SimClock()
    dt = cfg.loop.dt_s
    with contextlib.ExitStack() as stack:
        if protocol == "cia402":
            from drivers.cia402 import Cia402Backend

            from .emu_cia402 import Cia402Emulator, EmulatorMode

            emulator = Cia402Emulator(
                plant_cfg, channel=channel, node_id=cfg.drive.node_id,
                mode=EmulatorMode.REALTIME if realtime else EmulatorMode.LOCKSTEP, period_s=dt,
                rated_current_a=CIA402_RATED_CURRENT_A,
                rated_torque_nm=CIA402_RATED_CURRENT_A * plant_cfg.Kt,
                capture_path=capture, seed=seed)
            stack.enter_context(emulator)
            backend: Backend = Cia402Backend.from_config(cfg, clock)
        elif protocol == "odrive_can":
            from drivers.odrive_can import ODriveCanBackend

            from .emu_odrive_can import ODriveCanEmulator
            from .odrive_axis import EmuMode

            emulator = ODriveCanEmulator(
                plant_cfg, channel=channel, node_id=cfg.drive.node_id, seed=seed,
                mode=EmuMode.REALTIME if realtime else EmuMode.LOCKSTEP, dt_s=dt,
                cyclic_feedback=cfg.drive.cyclic_feedback, capture=capture)
            emulator.start()
            stack.callback(emulator.stop)
            backend = ODriveCanBackend.from_config(cfg, clock)
        else:
            from drivers.odrive_ascii import ODriveAsciiBackend

            from .emu_odrive_ascii import ODriveAsciiEmulator
            from .odrive_axis import EmuMode

            emulator = ODriveAsciiEmulator(
                plant_cfg, seed=seed, mode=EmuMode.REALTIME if realtime else EmuMode.LOCKSTEP,
                dt_s=dt, axis=cfg.drive.axis, byte_log=capture)
            emulator.start()
            stack.callback(emulator.stop)
            backend = ODriveAsciiBackend.from_config(cfg, clock, port=emulator.port_name)
        stack.callback(backend.close)  # closes (and disables) before the emulator stops
        yield HilRig(cfg=cfg, backend=backend, clock=clock, emulator=emulator)


def hil_run(cfg: Config, protocol: str, scenario_name: str, out: Path, *,
            duration_s: float | None = None, compensation: str | None = None, seed: int = 1,
            realtime: bool = False, capture: Path | None = None, plot: bool = True,
            progress=None, on_loop=None) -> dict:
    """``frictionctl hil``: one scenario end to end through the real driver and its emulator."""
    from controller.reference import make_reference
    from controller.runner import Session, run_session

    scenario = cfg.scenario(scenario_name)
    duration = duration_s if duration_s is not None else scenario.duration_s
    with hil_rig(cfg, protocol, realtime=realtime, seed=seed, capture=capture) as rig:
        reference = make_reference(scenario.reference, cfg.plant.encoder.rad_per_count, duration)
        session = Session(backend=rig.backend, clock=rig.clock, reference=reference,
                          duration_s=duration, scenario=scenario_name, seed=seed,
                          compensation=compensation, truth=rig.true_friction_nm,
                          extra_header={"hil": {"protocol": protocol, "realtime": realtime,
                                                "capture": str(capture) if capture else None}})
        summary = run_session(rig.cfg, session, out, plot=plot, progress=progress, on_loop=on_loop)
        summary["emulator_drive_enabled_at_exit"] = _emulator_enabled(rig)
    return summary


def _emulator_enabled(rig: HilRig) -> bool:
    """Whether the emulated drive still accepts torque (must be False after a run)."""
    emu = rig.emulator
    state = emu.axis_state if hasattr(emu, "axis_state") else emu.state
    return state.name in ("CLOSED_LOOP_CONTROL", "OPERATION_ENABLED")
