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
import math
import os
import uuid
from pathlib import Path
from typing import Iterator, Protocol, cast

from controller.clock import RealClock, SimClock
from controller.config import Config
from controller.config import Protocol as DriveProtocol
from drivers.backend import Backend, Clock

PROTOCOLS = ("cia402", "odrive_can", "odrive_ascii")
CIA402_RATED_CURRENT_A = 5.0  # the emulated drive's 0x6075 [A]
# periods from the measurement to the command taking effect: CiA 402 CST applies an RPDO at the
# next SYNC; the ODrive applies a torque command on arrival
COMMAND_DELAY_PERIODS = {"cia402": 2, "odrive_can": 1, "odrive_ascii": 1}


class Emulator(Protocol):
    """What the bench asks of an in-process drive emulator (besides its protocol)."""

    def sampled_friction_nm(self) -> float: ...


@dataclasses.dataclass
class HilRig:
    """An emulator and the real driver connected to it."""

    cfg: Config  # the config as the driver sees it (drive section adapted to the emulator)
    backend: Backend
    clock: Clock
    emulator: Emulator | None  # None: in another process

    def true_friction_nm(self) -> float:
        if self.emulator is None:  # in another process: the truth is not at hand
            return float("nan")
        return self.emulator.sampled_friction_nm()


# Lockstep: the shortest wall-time wait for a reply [s]. The emulator's thread has to be scheduled
# to answer; on a loaded machine that takes longer than a real drive's 2 ms now and then, and in
# lockstep only simulated time counts (a longer wait changes nothing but robustness).
LOCKSTEP_MIN_TIMEOUT_S = 0.05


def _hil_drive_config(cfg: Config, name: str, channel: str, realtime: bool = True) -> Config:
    protocol = cast(DriveProtocol, name)  # one of PROTOCOLS: hil_rig checked it
    d = cfg.drive
    if not realtime:
        d = dataclasses.replace(d, timeout_s=max(d.timeout_s, LOCKSTEP_MIN_TIMEOUT_S))
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


def retune_for_rate(cfg: Config, delay_periods: int = 1) -> tuple[Config, str]:
    """A loop rate too slow for the configured PID bandwidth: retune by the same triple-pole
    rule. The rule needs the rate >= 20× the bandwidth per period of command delay (a CiA 402
    drive applies a command at the next SYNC: two periods) for its phase margin. Returns the
    config and what was done ("" when nothing)."""
    from controller.gains import PIDGains

    ctrl = cfg.controller
    bw_hz = ctrl.pid.position_bandwidth_hz(ctrl.J)
    ratio = 20.0 * delay_periods
    if cfg.loop.rate_hz >= ratio * bw_hz:
        return cfg, ""
    new_bw = cfg.loop.rate_hz / ratio
    gains = PIDGains.triple_pole(ctrl.J, new_bw, output_limit_nm=ctrl.pid.output_limit_nm,
                                 derivative_cutoff_hz=min(ctrl.pid.derivative_cutoff_hz,
                                                          cfg.loop.rate_hz / 4.0))
    note = (f"{cfg.loop.rate_hz:g} Hz is too slow for a {bw_hz:.3g} Hz position loop with "
            f"{delay_periods} period(s) of command delay: PID retuned by the triple-pole rule at "
            f"{new_bw:.3g} Hz")
    return dataclasses.replace(cfg, controller=dataclasses.replace(ctrl, pid=gains)), note


def bench_config(cfg: Config, protocol: str, rate_hz: float | None = None) -> tuple[Config, list[str]]:
    """The config as ``hil`` runs it on the bench: ``rate_hz`` (else the rate the ASCII link
    holds when the configured one is faster), the PID retuned for the rate, and a drive
    watchdog of at least 5 periods. Returns it with one note per change."""
    notes = []
    if rate_hz is not None:
        cfg = dataclasses.replace(cfg, loop=dataclasses.replace(cfg.loop, rate_hz=rate_hz))
    elif protocol == "odrive_ascii" and cfg.loop.rate_hz > ascii_rate_limit(cfg):
        limit = ascii_rate_limit(cfg)
        notes.append(f"odrive_ascii at {cfg.drive.baudrate} baud holds at most {limit:.0f} Hz: "
                     f"running the loop at {int(limit)} Hz (set --rate or drive.baudrate)")
        cfg = dataclasses.replace(cfg, loop=dataclasses.replace(cfg.loop, rate_hz=float(int(limit))))
    cfg, note = retune_for_rate(cfg, COMMAND_DELAY_PERIODS[protocol])
    notes += [note] if note else []
    if math.isfinite(cfg.drive.watchdog_timeout_s) and cfg.drive.watchdog_timeout_s <= 3 * cfg.loop.dt_s:
        wd = 5 * cfg.loop.dt_s
        notes.append(f"drive.watchdog_timeout_s {cfg.drive.watchdog_timeout_s:g} s is within 3 loop "
                     f"periods: the emulated drive's watchdog is set to {wd:.3g} s")
        cfg = dataclasses.replace(cfg, drive=dataclasses.replace(cfg.drive, watchdog_timeout_s=wd))
    return cfg, notes


def emulated_watchdog_s(cfg: Config, realtime: bool) -> float | None:
    """The emulated ODrive's axis watchdog: what the drive would be configured with
    (``drive.watchdog_timeout_s``; CAN Simple cannot set it, a real drive is set up with its own
    tool). In both modes: in lockstep the emulator runs it on wall time through enable and the
    driver's watchdog check, and suspends it once the loop steps the plant (``realtime`` is
    kept for callers; it no longer changes the answer)."""
    wd = cfg.drive.watchdog_timeout_s
    return wd if math.isfinite(wd) else None


@contextlib.contextmanager
def _emulator_process(cfg: Config, protocol: str, seed: int) -> Iterator[Config]:
    """The CAN emulator in a process of its own (``hil.emulator_process``) on a udp_multicast
    group of this run's own; yields the config the driver uses to reach it."""
    import subprocess
    import sys
    import tempfile

    import yaml

    from controller.schema import ConfigError, to_plain

    try:
        import msgpack  # noqa: F401 - python-can's udp_multicast interface needs it
    except ImportError:
        raise ConfigError("", "--process needs the msgpack package (python-can's udp_multicast "
                              "interface): pip install msgpack") from None
    rnd = uuid.uuid4().bytes
    group = f"239.{rnd[0]}.{rnd[1]}.{max(1, rnd[2])}"
    node_id = cfg.drive.node_id if protocol == "cia402" else min(cfg.drive.node_id, 63)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "config.yaml"
        path.write_text(yaml.safe_dump(to_plain(cfg)))
        proc = subprocess.Popen(
            [sys.executable, "-m", "hil.emulator_process", "--config", str(path), "--protocol",
             protocol, "--channel", group, "--node-id", str(node_id), "--seed", str(seed),
             "--rate", str(cfg.loop.rate_hz), "--firmware", cfg.drive.emulated_firmware],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
            cwd=Path(__file__).resolve().parents[1])
        try:
            assert proc.stdout is not None  # stdout=PIPE
            line = proc.stdout.readline().strip()
            if line != "ready":
                raise ConfigError("", f"emulator process for {protocol} did not start "
                                      f"(exit {proc.poll()}): {line or 'no output'}")
            drive = dataclasses.replace(cfg.drive, interface="udp_multicast", channel=group,
                                        node_id=node_id)
            yield dataclasses.replace(cfg, drive=drive)
        finally:
            if proc.stdin:
                proc.stdin.close()  # the emulator stops when its stdin closes
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


@contextlib.contextmanager
def hil_rig(cfg: Config, protocol: str, *, realtime: bool = False, seed: int = 0,
            capture: Path | None = None, plant=None, separate_process: bool = False) -> Iterator[HilRig]:
    """Start the emulator for ``protocol`` and the real driver against it; stop both after.
    ``plant`` overrides ``cfg.plant`` for the emulated turntable. ``separate_process`` (CAN,
    real time): the emulator runs in its own interpreter, reached over udp_multicast. The
    emulated ODrive CAN speaks ``cfg.drive.emulated_firmware``."""
    if protocol not in PROTOCOLS:
        raise ValueError(f"--protocol: unknown {protocol!r} (known: {', '.join(PROTOCOLS)})")
    if separate_process:
        if protocol == "odrive_ascii" or not realtime or capture is not None or plant is not None:
            raise ValueError("--process: CAN protocols in real time only, without --capture")
        cfg = _hil_drive_config(cfg, protocol, "unused")
        with _emulator_process(cfg, protocol, seed) as proc_cfg:
            from drivers.registry import backend_class

            real_clock = RealClock(proc_cfg.loop.spin_s)
            remote = backend_class(protocol).from_config(proc_cfg, real_clock)
            try:
                yield HilRig(cfg=proc_cfg, backend=remote, clock=real_clock, emulator=None)
            finally:
                remote.close()
        return
    plant_cfg = plant or cfg.plant
    channel = f"frictionctl-hil-{os.getpid()}-{uuid.uuid4().hex[:6]}"
    cfg = _hil_drive_config(cfg, protocol, channel, realtime)
    clock: Clock = RealClock(cfg.loop.spin_s) if realtime else SimClock()
    dt = cfg.loop.dt_s
    emulator: Emulator
    backend: Backend
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
            backend = Cia402Backend.from_config(cfg, clock)
        elif protocol == "odrive_can":
            from drivers.odrive_can import ODriveCanBackend

            from .emu_odrive_can import ODriveCanEmulator, firmware_from_text
            from .odrive_axis import EmuMode

            can_emulator = ODriveCanEmulator(
                plant_cfg, channel=channel, node_id=cfg.drive.node_id, seed=seed,
                mode=EmuMode.REALTIME if realtime else EmuMode.LOCKSTEP, dt_s=dt,
                cyclic_feedback=cfg.drive.cyclic_feedback, capture=capture,
                watchdog_timeout_s=emulated_watchdog_s(cfg, realtime),
                firmware=firmware_from_text(cfg.drive.emulated_firmware))
            can_emulator.start()
            stack.callback(can_emulator.stop)
            emulator = can_emulator
            backend = ODriveCanBackend.from_config(cfg, clock)
        else:
            from drivers.odrive_ascii import ODriveAsciiBackend

            from .emu_odrive_ascii import ODriveAsciiEmulator
            from .odrive_axis import EmuMode

            serial_emulator = ODriveAsciiEmulator(
                plant_cfg, seed=seed, mode=EmuMode.REALTIME if realtime else EmuMode.LOCKSTEP,
                dt_s=dt, axis=cfg.drive.axis, byte_log=capture)
            serial_emulator.start()
            stack.callback(serial_emulator.stop)
            emulator = serial_emulator
            backend = ODriveAsciiBackend.from_config(cfg, clock, port=serial_emulator.port_name)
        stack.callback(backend.close)  # closes (and disables) before the emulator stops
        yield HilRig(cfg=cfg, backend=backend, clock=clock, emulator=emulator)


def hil_run(cfg: Config, protocol: str, scenario_name: str, out: Path, *,
            duration_s: float | None = None, compensation: str | None = None, seed: int = 1,
            realtime: bool = False, capture: Path | None = None, plot: bool = True,
            progress=None, on_loop=None, separate_process: bool = False) -> dict:
    """``frictionctl hil``: one scenario end to end through the real driver and its emulator."""
    from controller.reference import make_reference
    from controller.runner import Session, run_session
    from controller.schema import ConfigError

    from .fault_injection import arm, check_supported, record_injected

    scenario = cfg.scenario(scenario_name)
    duration = duration_s if duration_s is not None else scenario.duration_s
    check_supported(scenario_name, scenario.faults, protocol)
    if scenario.faults and separate_process:
        raise ConfigError(f"scenarios.{scenario_name}.faults", "cannot be injected into an emulator "
                                                               "in another process (--process)")
    with hil_rig(cfg, protocol, realtime=realtime, seed=seed, capture=capture,
                 separate_process=separate_process) as rig:
        reference = make_reference(scenario.reference, cfg.plant.encoder.rad_per_count, duration)
        trigger = arm(scenario_name, scenario.faults, protocol, rig.emulator, rig.clock,
                      rig.cfg.loop.dt_s)
        session = Session(backend=rig.backend, clock=trigger.loop_clock, reference=reference,
                          duration_s=duration, scenario=scenario_name, seed=seed,
                          compensation=compensation, truth=rig.true_friction_nm,
                          extra_header={"hil": {"protocol": protocol, "realtime": realtime,
                                                "separate_process": separate_process,
                                                "capture": str(capture) if capture else None}})
        summary = run_session(rig.cfg, session, out, plot=plot, progress=progress, on_loop=on_loop)
        if rig.emulator is not None:
            summary["emulator_drive_enabled_at_exit"] = emulator_enabled(rig.emulator)
    return record_injected(out, summary, trigger)


def emulator_enabled(emu, settle_s: float = 2.0) -> bool:
    """Whether an emulated drive still accepts torque (must be False after a run). The disable
    may still be in flight to the emulator's thread: it gets ``settle_s`` to arrive."""

    def enabled(e) -> bool:
        state = e.axis_state if hasattr(e, "axis_state") else e.state
        return state.name in ("CLOSED_LOOP_CONTROL", "OPERATION_ENABLED")

    wait = getattr(emu, "wait_for", None) or emu.wait_until
    wait(lambda e: not enabled(e), settle_s)
    return enabled(emu)
