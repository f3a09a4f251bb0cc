"""The fault campaign (``frictionctl faults``): every injectable fault, on the simulated turntable
and through each real driver against its emulator (lockstep), each run checked against the row
it is expected to give.

One case = one short run of the campaign scenario (a constant 0.1 rad/s from 0.1 s; the fault
at 0.5 s) with one fault from ``hil.fault_injection``. Its row, from the run's log and
summary.json and from the (emulated) drive afterwards:

- detected: ticks from the injection to the first fault in the log (``—``: none);
- category: the stop as logged (``stop_phase``): ``STO``, ``SS1``, ``hold`` (``safety.hold_s``
  > 0), or ``SS1→STO`` / ``hold→STO`` when the stop escalated;
- peak speed and peak error (``pos_ref − pos``) from the injection to the end of the log, so
  the growth up to the detection is in (the stop's own reference follows the axis from there);
- rise after STO: how much the plant's own speed rises over ``COAST_S`` left to itself after
  the stop (the drive applies what it still applies: nothing once disabled; the plant's true
  speed, as the logged one may be the very feedback that failed);
- drive: what the run reported (``drive_enabled_at_exit``) and what the drive really is after
  it (the emulated drive's own state);
- log: complete, with the disable row last.

A case passes when: the fault is detected within its stated ticks (or, for the faults a drive
link must ride through, nothing is detected and the run ends normally); the category is the
stated one; the speed does not rise after an STO by more than 8 encoder counts per period (the
stop's own rise margin; where the link is lost, plus what the last command beyond the Coulomb
level gains until the drive's watchdog ends it) unless the case says the load overhauls an
unbraked axis; the drive ends
disabled — or, where the case makes the drive refuse the disable, the run reports it NOT
confirmed — and is never reported disabled while it is enabled; the log is complete.
"""

from __future__ import annotations

import dataclasses
import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence

import numpy as np

from controller.clock import SimClock
from controller.config import Config, ReferenceConfig, ScenarioConfig, ScenarioFault
from controller.friction import LuGreParams
from controller.reference import make_reference
from controller.runlog import read_log
from controller.runner import Session, run_session
from controller.safety import FaultKind
from controller.stop import StopPhase
from drivers.backend import DriveState

from .fault_injection import arm, record_injected
from .hil_session import bench_config, emulator_enabled, hil_rig
from .sim_backend import SimBackend

SCENARIO = "fault_campaign"
VELOCITY_RAD_S = 0.1  # the campaign scenario's speed [rad/s]
INJECT_AT_S = 0.5  # [s]
DURATION_S = 1.5  # [s] of a case (the heartbeat cases run longer: HEARTBEAT_DURATION_S)
HEARTBEAT_DURATION_S = 4.0  # [s]
COAST_S = 0.2  # the plant left to itself after the run [s]
SETTLE_S = 0.5  # longest wait for the emulated drive to act on the disable [s]
# Drive link settings of the campaign (lockstep on a shared machine): a generous per-exchange
# timeout (shorter than the drive watchdog: a lost reply must not starve it), and a heartbeat supervised at 0.3 s (wall time) with heartbeats every 0.05 s
LINK_TIMEOUT_S = 0.02
HEARTBEAT_TIMEOUT_S = 0.3
HEARTBEAT_PERIOD_S = 0.05  # CiA 402 producer; the emulated ODrive sends every 0.1 s
ODRIVE_HEARTBEAT_PERIOD_S = 0.1


@dataclass(frozen=True)
class Expect:
    """A case's expected row. ``max_ticks`` None: nothing may be detected (the run rides the
    fault out and ends normally, by ``category``)."""

    category: str
    max_ticks: int | None
    rule: str  # how max_ticks follows from the config
    drive_refuses: bool = False  # the drive does not obey the disable: must be reported so
    overhauling: bool = False  # an unbraked load: the speed may rise after the STO
    # the host's STO cannot reach the drive: it applies its last command until its own watchdog
    # ends it, so the rise after the STO may include that window (:func:`rise_limit`)
    link_lost: bool = False


@dataclass(frozen=True)
class Case:
    name: str
    backend: str
    fault: ScenarioFault
    expect: Callable[[Config], Expect]
    hold_s: float = 0.0  # safety.hold_s of the case
    duration_s: float = DURATION_S


@dataclass
class Row:
    case: str
    backend: str
    injected_tick: int | None
    detected_ticks: int | None
    fault: str
    category: str
    peak_speed_rad_s: float
    peak_error_rad: float
    rise_after_sto_rad_s: float
    rise_limit_rad_s: float  # the rise after an STO the case allows (:func:`rise_limit`)
    reported_enabled: bool | None
    drive_enabled: bool
    log_complete: bool
    expect: Expect
    problems: list[str]

    @property
    def passed(self) -> bool:
        return not self.problems


# --- the cases ------------------------------------------------------------------------------------
def _stale(cfg: Config) -> Expect:
    return Expect("STO", cfg.safety.stale_ticks + 1, "stale_ticks + 1")


def _at_once(cfg: Config) -> Expect:
    return Expect("STO", 1, "the next sample")


def _link_lost(cfg: Config) -> Expect:
    return Expect("STO", 1, "the next sample; the drive's watchdog ends its torque",
                  link_lost=True)


def _ascii_status(cfg: Config) -> Expect:
    return Expect("STO", cfg.drive.status_every_ticks + 2, "status_every_ticks + 2 (state polled)")


def _following(cfg: Config) -> Expect:
    s = cfg.safety
    limit = s.following_error_floor_rad + s.following_error_per_speed_s * VELOCITY_RAD_S
    return Expect("SS1", math.ceil(limit / VELOCITY_RAD_S * cfg.loop.rate_hz) + 2,
                  "following-error limit / v_ref + 2")


def _runaway(cfg: Config) -> Expect:
    s = cfg.safety
    ticks = 2.0 * (s.velocity_limit_rad_s + VELOCITY_RAD_S) * cfg.plant.J / s.torque_limit_nm
    return Expect("STO", math.ceil(ticks * cfg.loop.rate_hz),
                  "2·(v_limit + v_ref)·J / torque_limit")


def _overhauling(torque_nm: float) -> Callable[[Config], Expect]:
    """A load beyond the torque authority: the error reaches the following-error limit under
    the net acceleration (load − torque limit)/J, the stop sees the runaway: STO."""

    def expect(cfg: Config) -> Expect:
        s = cfg.safety
        limit = s.following_error_floor_rad + s.following_error_per_speed_s * VELOCITY_RAD_S
        t = math.sqrt(2.0 * limit * cfg.plant.J / (torque_nm - s.torque_limit_nm))
        return Expect("STO", math.ceil(t * cfg.loop.rate_hz),
                      "√(2·e_limit·J / (load − torque_limit))", overhauling=True)

    return expect


def _heartbeat(cfg: Config, speedup: float = 1.0) -> Expect:
    """The heartbeat is supervised in wall time: in lockstep, ticks run ``speedup`` times
    faster than the wall clock (measured from the injection to the detection by the tick's wall
    times, :func:`_speedup`), so the bound is twice (timeout + period) of wall time in ticks."""
    period = max(HEARTBEAT_PERIOD_S, ODRIVE_HEARTBEAT_PERIOD_S)
    ticks = (cfg.drive.heartbeat_timeout_s + period) * cfg.loop.rate_hz * 2.0 * max(speedup, 1.0)
    return Expect("STO", math.ceil(ticks),
                  "2·(heartbeat timeout + period) of wall time, in ticks")


def _ride_through(cfg: Config) -> Expect:
    return Expect("hold" if cfg.safety.hold_s > 0 else "SS1", None, "none: ridden through")


def _refused(cfg: Config) -> Expect:
    return dataclasses.replace(_ride_through(cfg), drive_refuses=True,
                               rule="the refused disable, at the end")


def _f(kind: str, **kw) -> ScenarioFault:
    return ScenarioFault(at_s=INJECT_AT_S, kind=kind, **kw)  # type: ignore[arg-type]


CASES: tuple[Case, ...] = (
    Case("sim/stale", "sim", _f("stale"), _stale),
    Case("sim/nan_current", "sim", _f("nan_current"), _at_once),
    Case("sim/drive_fault", "sim", _f("drive_fault"), _at_once),
    Case("sim/blocked_rotor", "sim", _f("blocked_rotor"), _following),
    Case("sim/inverted_sign", "sim", _f("inverted_sign"), _runaway),
    Case("sim/load_step 3 N·m, hold", "sim", _f("load_step", torque_nm=3.0), _ride_through,
         hold_s=0.2),
    Case("sim/load_step 5.5 N·m, hold", "sim", _f("load_step", torque_nm=5.5), _overhauling(5.5),
         hold_s=0.2),
    Case("cia402/frame_loss", "cia402", _f("frame_loss", frames=20), _stale),
    Case("cia402/bus_off", "cia402", _f("bus_off"), _at_once),
    Case("cia402/error_frames", "cia402", _f("error_frames", frames=5), _ride_through),
    Case("cia402/rtr", "cia402", _f("rtr"), _ride_through),
    Case("cia402/idle_ignored", "cia402", _f("idle_ignored"), _refused),
    Case("cia402/heartbeat_stop", "cia402", _f("heartbeat_stop"), _heartbeat,
         duration_s=HEARTBEAT_DURATION_S),
    Case("odrive_can/frame_loss", "odrive_can", _f("frame_loss", frames=20), _stale),
    Case("odrive_can/bus_off", "odrive_can", _f("bus_off"), _at_once),
    Case("odrive_can/error_frames", "odrive_can", _f("error_frames", frames=5), _ride_through),
    Case("odrive_can/idle_ignored", "odrive_can", _f("idle_ignored"), _refused),
    Case("odrive_can/heartbeat_stop", "odrive_can", _f("heartbeat_stop"), _heartbeat,
         duration_s=HEARTBEAT_DURATION_S),
    Case("odrive_can/drive_fault", "odrive_can", _f("drive_fault"), _at_once),
    Case("odrive_ascii/frame_loss", "odrive_ascii", _f("frame_loss", frames=30), _stale),
    Case("odrive_ascii/serial_unplug", "odrive_ascii", _f("serial_unplug"), _link_lost),
    Case("odrive_ascii/idle_ignored", "odrive_ascii", _f("idle_ignored"), _refused),
    Case("odrive_ascii/line_noise", "odrive_ascii", _f("line_noise"), _ride_through),
    Case("odrive_ascii/drive_fault", "odrive_ascii", _f("drive_fault"), _ascii_status),
)


# --- one case -------------------------------------------------------------------------------------
def case_config(base: Config, case: Case) -> Config:
    """The base config as the case runs it: the campaign scenario with the case's fault,
    ``hold_s``, the bench settings of its protocol and the campaign's link timing."""
    scenario = ScenarioConfig(
        reference=ReferenceConfig(kind="constant_velocity", velocity_rad_s=VELOCITY_RAD_S,
                                  start_s=0.1),
        duration_s=case.duration_s, faults=(case.fault,),
        description=f"fault campaign: {case.name}")
    cfg = dataclasses.replace(
        base, scenarios={**base.scenarios, SCENARIO: scenario},
        safety=dataclasses.replace(base.safety, hold_s=case.hold_s),
        drive=dataclasses.replace(base.drive, timeout_s=LINK_TIMEOUT_S,
                                  heartbeat_timeout_s=HEARTBEAT_TIMEOUT_S,
                                  heartbeat_period_s=HEARTBEAT_PERIOD_S))
    if case.backend != "sim":
        cfg, _ = bench_config(cfg, case.backend)
    return cfg


def run_case(base: Config, case: Case, out: Path, seed: int = 1) -> Row:
    """Run one case into ``out`` (run.fctl, summary.json) and return its row."""
    cfg = case_config(base, case)
    scenario = cfg.scenario(SCENARIO)
    coast_periods = max(1, round(COAST_S * cfg.loop.rate_hz))
    if case.backend == "sim":
        clock = SimClock()
        backend = SimBackend(cfg, clock, seed=seed, scenario=scenario)
        trigger = arm(SCENARIO, scenario.faults, "sim", backend, clock, cfg.loop.dt_s)
        summary = run_session(cfg, _session(cfg, scenario, backend, trigger, seed,
                                            backend.true_friction_nm), out, plot=False)
        drive_enabled = backend.drive_state is DriveState.ENABLED
        coast = backend.coast(coast_periods)
        backend.close()
    else:
        with hil_rig(cfg, case.backend, seed=seed) as rig:
            trigger = arm(SCENARIO, scenario.faults, case.backend, rig.emulator, rig.clock,
                          rig.cfg.loop.dt_s)
            summary = run_session(rig.cfg, _session(rig.cfg, scenario, rig.backend, trigger, seed,
                                                    rig.true_friction_nm), out, plot=False)
            drive_enabled = emulator_enabled(rig.emulator, SETTLE_S)
            emulator: Any = rig.emulator
            coast = emulator.coast(coast_periods)
            # the drive left to itself: its own protection may end it (an ODrive watchdog no
            # host feeds any more counts the coast, which is the only time that passes here)
            drive_enabled = drive_enabled and emulator_enabled(rig.emulator, 0.0)
            cfg = rig.cfg
    record_injected(out, summary, trigger)
    injected = trigger.fired[0][0] if trigger.fired else None
    return evaluate(cfg, case, out / "run.fctl", summary, injected, drive_enabled, coast,
                    trigger.wall_s)


def _session(cfg: Config, scenario: ScenarioConfig, backend, clock, seed: int, truth) -> Session:
    reference = make_reference(scenario.reference, cfg.plant.encoder.rad_per_count,
                               scenario.duration_s)
    return Session(backend=backend, clock=clock, reference=reference,
                   duration_s=scenario.duration_s, scenario=SCENARIO, seed=seed, truth=truth)


def stop_category(phases: np.ndarray, hold_s: float) -> str:
    """The stop as the ``stop_phase`` column logs it."""
    stop = phases[(phases != StopPhase.RUN) & (phases != StopPhase.DISABLED)]
    if stop.size == 0:
        return "none"
    if stop[0] == StopPhase.STO:
        return "STO"
    base = "hold" if hold_s > 0 else "SS1"
    return f"{base}→STO" if np.any(stop == StopPhase.STO) else base


def _speedup(summary: dict, rate_hz: float, injected: int | None, detected: int | None,
             wall_s: dict[int, float]) -> float:
    """How many times faster than the wall clock the ticks ran from the injection to the
    detection (the whole run's realtime factor where either is unknown): a bound in wall time
    times this is the bound in ticks."""
    if injected is not None and detected and injected in wall_s and injected + detected in wall_s:
        elapsed = wall_s[injected + detected] - wall_s[injected]
        if elapsed > 0:
            return detected / rate_hz / elapsed
    return float(summary.get("realtime_factor") or 1.0)


def evaluate(cfg: Config, case: Case, log_path: Path, summary: dict, injected: int | None,
             drive_enabled: bool, coast: tuple[float, float],
             wall_s: dict[int, float] | None = None) -> Row:
    """A case's row from its log, summary and the drive's state after the run. ``wall_s``:
    the wall time of each tick (the trigger's), for faults supervised in wall time."""
    log = read_log(log_path)
    rate = cfg.loop.rate_hz
    ticks = np.rint(log["t_s"] * rate).astype(np.int64)
    fault = log["fault"]
    detected_rows = np.flatnonzero((fault != FaultKind.NONE) & (fault != FaultKind.STOP_REQUESTED))
    first = int(detected_rows[0]) if detected_rows.size else None
    detected = None if first is None or injected is None else int(ticks[first]) - injected
    fault_name = FaultKind(int(fault[first])).name if first is not None else "—"
    if case.expect is _heartbeat:
        expect = _heartbeat(cfg, _speedup(summary, rate, injected, detected, wall_s or {}))
    else:
        expect = case.expect(cfg)
    phases = log["stop_phase"]
    category = stop_category(phases, cfg.safety.hold_s)
    start = int(np.searchsorted(ticks, injected if injected is not None else ticks[-1]))
    vel, err = log["vel_rad_s"][start:], (log["pos_ref_rad"] - log["pos_rad"])[start:]
    peak_speed, peak_error = _peak(vel), _peak(err)
    coast_start, coast_peak = coast
    rise = coast_peak - coast_start if np.any(phases == StopPhase.STO) else math.nan
    # the commands of the two ticks before the injection: the last the drive may have received
    before = log["torque_cmd_nm"][max(0, start - 2):start]
    limit = rise_limit(cfg, expect, _peak(before) if before.size else 0.0)
    reported = summary.get("drive_enabled_at_exit")
    complete = bool(summary.get("log_complete")) and phases.size > 0 \
        and bool(phases[-1] == StopPhase.DISABLED)
    row = Row(case.name, case.backend, injected, detected, fault_name, category, peak_speed,
              peak_error, rise, limit, reported, bool(drive_enabled), complete, expect, [])
    row.problems = check(row, cfg)
    return row


def _peak(x: np.ndarray) -> float:
    """max |x| over the finite values (NaN when none: the feedback was lost)."""
    finite = np.abs(x[np.isfinite(x)])
    return float(finite.max()) if finite.size else math.nan


def rise_limit(cfg: Config, expect: Expect, last_torque_nm: float) -> float:
    """How much the plant's speed may rise after an STO [rad/s]: 8 counts per period (the
    stop's own margin). Where the link is lost the drive applies the last command it received
    until its watchdog expires (``drive.watchdog_timeout_s``, counted in whole periods of the
    coast, one more for the period it expires in): that command beyond the Coulomb level
    accelerates the axis over the window, (|u_last| − Fc)·(T_wd + dt)/J more."""
    limit = 8.0 * cfg.plant.encoder.rad_per_count * cfg.loop.rate_hz
    wd = cfg.drive.watchdog_timeout_s
    if expect.link_lost and math.isfinite(wd) and math.isfinite(last_torque_nm):
        plant = cfg.plant.friction
        fc = plant.Fc if isinstance(plant, LuGreParams) else min(plant.forward.Fc, plant.reverse.Fc)
        excess = max(0.0, last_torque_nm - fc)
        limit += excess * (wd + cfg.loop.dt_s) / cfg.plant.J
    return limit


def check(row: Row, cfg: Config) -> list[str]:
    """What in the row departs from its expectation (empty: the case passes)."""
    e = row.expect
    problems = []
    if row.injected_tick is None:
        problems.append("the fault was never injected")
    if e.drive_refuses:
        pass  # the refusal itself is what the run must detect: checked with the drive below
    elif e.max_ticks is None:
        if row.detected_ticks is not None:
            problems.append(f"{row.fault} detected, expected none")
    elif row.detected_ticks is None:
        problems.append("not detected")
    elif not 0 <= row.detected_ticks <= e.max_ticks:
        problems.append(f"detected after {row.detected_ticks} ticks, expected 0..{e.max_ticks}")
    if row.category != e.category:
        problems.append(f"stop {row.category}, expected {e.category}")
    if "STO" in row.category and not e.overhauling \
            and row.rise_after_sto_rad_s > row.rise_limit_rad_s:
        problems.append(f"speed rose {row.rise_after_sto_rad_s:.3g} rad/s after the STO")
    if e.drive_refuses:
        if row.reported_enabled is not True:
            problems.append("the drive refused the disable but the run reported it disabled")
    else:
        if row.drive_enabled:
            problems.append("drive left enabled")
        if row.drive_enabled and row.reported_enabled is False:
            problems.append("reported disabled while the drive is enabled")
    if not row.log_complete:
        problems.append("log incomplete")
    return problems


# --- the campaign ---------------------------------------------------------------------------------
def select(backend: str | None = None, cases: Sequence[Case] | None = None) -> list[Case]:
    """The cases of ``backend`` (all when None) from ``cases`` (default: :data:`CASES`)."""
    return [c for c in (CASES if cases is None else cases) if backend is None or c.backend == backend]


def run_campaign(base: Config, out: Path, cases: Iterable[Case], seed: int = 1,
                 on_row: Callable[[Row], None] | None = None) -> list[Row]:
    """Each case into ``out/<n>-<name>/``; ``on_row`` gets each row as it is done."""
    rows = []
    for n, case in enumerate(cases, 1):
        folder = out / f"{n:02d}-{case.name.replace('/', '-').replace(' ', '_').replace(',', '')}"
        row = run_case(base, case, folder, seed=seed)
        rows.append(row)
        if on_row is not None:
            on_row(row)
    return rows


HEADER = ("case", "detected (ticks)", "fault", "stop", "peak |v| rad/s", "peak |e| rad",
          "rise after STO", "drive after", "log", "expected", "result")


def row_cells(row: Row) -> tuple[str, ...]:
    e = row.expect
    detected = "—" if row.detected_ticks is None else f"+{row.detected_ticks}"
    rise = "—" if math.isnan(row.rise_after_sto_rad_s) else f"{row.rise_after_sto_rad_s:+.2g}"
    state = "enabled" if row.drive_enabled else "disabled"
    confirmed = "?" if row.reported_enabled is None else (
        "not confirmed" if row.reported_enabled else "confirmed")
    if e.drive_refuses:
        expected = f"{e.category}; disable refused, reported not confirmed"
    elif e.max_ticks is None:
        expected = f"{e.category}, none detected"
    else:
        expected = f"{e.category} ≤ {e.max_ticks}" + (", unbraked" if e.overhauling else "")
        if e.link_lost:
            expected += f", rise ≤ {row.rise_limit_rad_s:.2g} (watchdog)"
    result = "pass" if row.passed else "FAIL: " + "; ".join(row.problems)
    return (row.case, detected, row.fault, row.category, f"{row.peak_speed_rad_s:.3g}",
            f"{row.peak_error_rad:.2g}", rise, f"{state}, {confirmed}",
            "complete" if row.log_complete else "INCOMPLETE", expected, result)


def markdown_row(cells: Sequence[str]) -> str:
    return "| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |"


def markdown_table(rows: Sequence[Row]) -> str:
    lines = [markdown_row(HEADER), "|" + "---|" * len(HEADER)]
    lines += [markdown_row(row_cells(r)) for r in rows]
    return "\n".join(lines)



def write_rows(out: Path, rows: Sequence[Row]) -> Path:
    """out/campaign.json (one record per case: the row, its expectation, pass or the problems)
    and out/campaign.md (the table as printed)."""
    from controller.runner import _json_safe

    out.mkdir(parents=True, exist_ok=True)
    records = [{**{k: v for k, v in dataclasses.asdict(r).items() if k != "expect"},
                "expect": dataclasses.asdict(r.expect), "passed": r.passed} for r in rows]
    (out / "campaign.md").write_text(markdown_table(rows) + "\n")
    path = out / "campaign.json"
    path.write_text(json.dumps(_json_safe(records), indent=2) + "\n")
    return path
