"""One run end to end: log file, loop, signals, summary.json and report.png in an out dir.

Shared by ``frictionctl sim``, ``run``, ``hil`` and the benchmarks.
"""

from __future__ import annotations

import json
import math
import platform
import signal
import sys
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import numpy as np

from drivers.backend import Backend, Clock, DriveState

from . import __version__
from .compensation import Compensator, make_compensator
from .control_law import CONTROL_LAW_REVISION
from .config import Config
from .log_data import stop_phase_mask
from .loop import COLUMN_NAMES, LOG_COLUMNS, ControlLoop, RunResult
from .metrics import lateness_metrics, tracking_metrics
from .reference import Reference
from .runlog import RunLogWriter, read_log
from .safety import FaultKind
from .stop import StopPhase
from .schema import to_plain
from .units import axis_of_log_units, display, key_units

LOG_NAME = "run.fctl"


@dataclass
class Session:
    """What a run needs besides the config: where it runs and what it follows."""

    backend: Backend
    clock: Clock
    reference: Reference
    duration_s: float
    scenario: str = ""
    seed: int | None = None
    compensation: str | None = None
    extra_header: dict[str, Any] | None = None
    truth: Callable[[], float] | None = None  # the plant's true friction (sim/HIL only)
    law: Any = None  # another control law for the loop (identification experiments)


def versions() -> dict[str, str]:
    import numpy
    import scipy  # type: ignore[import-untyped]

    from .compiled import active_path

    return {"frictionctl": __version__, "python": platform.python_version(),
            "numpy": numpy.__version__, "scipy": scipy.__version__, "platform": platform.platform(),
            "hot_path": active_path()}


def _header(cfg: Config, s: Session, compensator: Compensator) -> dict[str, Any]:
    return {
        "kind": "frictionctl run log",
        "config": to_plain(cfg),
        "parameters": {"controller_friction": to_plain(cfg.controller.friction),
                       "pid": to_plain(cfg.controller.pid)},
        "compensation": compensator.mode,
        "backend": s.backend.name,
        "scenario": s.scenario,
        "seed": s.seed,
        "duration_s": s.duration_s,
        "controlled_ticks": int(round(s.duration_s * cfg.loop.rate_hz)),
        "rate_hz": cfg.loop.rate_hz,
        "versions": versions(),
        "fault_kinds": {k.value: k.name for k in FaultKind},
        "drive_states": {d.value: d.name for d in DriveState},
        "stop_phases": {p.value: p.name for p in StopPhase},
        "clock": "simulated" if s.clock.simulated else "real",
        "constant_speed_window": s.reference.constant_speed_window,
        "reversals": s.reference.reversals(s.duration_s),
        # the version the drive reported at open (null: not reported, e.g. ODrive 0.5.6 over CAN,
        # or the link did not open: the loop's own open then records the fault)
        "drive_firmware": _drive_firmware(s.backend),
        # a repeated sample (same sequence number) is ridden through on the held velocity
        # (controller/loop.py); the replay follows the logged numbers only in logs saying so
        "repeated_samples": "held",
        # the replay reproduces a log exactly only with the law that recorded it (control_law.py)
        "control_law_revision": CONTROL_LAW_REVISION,
        **(s.extra_header or {}),
    }


def _drive_firmware(backend: Any) -> str | None:
    firmware = getattr(backend, "firmware", None) if backend.is_open else None
    return str(firmware) if firmware else None


class _SignalStop:
    """SIGINT/SIGTERM → loop.request_stop (same safe-stop path as a fault), restored after."""

    def __init__(self, loop: ControlLoop) -> None:
        self.loop = loop
        self.previous: dict[int, Any] = {}

    def __enter__(self) -> "_SignalStop":
        if threading.current_thread() is threading.main_thread():
            for signum in (signal.SIGINT, signal.SIGTERM):
                self.previous[signum] = signal.signal(signum, self._handle)
        return self

    def _handle(self, signum: int, frame: Any) -> None:
        self.loop.request_stop(signal.Signals(signum).name)

    def __exit__(self, *exc: Any) -> None:
        for signum, handler in self.previous.items():
            signal.signal(signum, handler)


def controlled_mask(run) -> np.ndarray:
    """Rows on which the loop ran the control law: not the stop phase (from the first fault or
    stop request, or from the header's ``controlled_ticks``: the safe-stop ramp is not
    controlled). One rule for summary.json and the plots: :func:`controller.log_data.stop_phase_mask`."""
    return ~stop_phase_mask(run)


def summarize(log_path: Path, result: RunResult | None = None) -> dict[str, Any]:
    """summary.json figures from a log (and the loop's result when at hand)."""
    run = read_log(log_path)
    h = run.header
    t = run["t_s"]
    active = controlled_mask(run)
    rate = float(h.get("rate_hz") or 1.0)
    duration = float(np.count_nonzero(active)) / rate  # what ran under control
    window = h.get("constant_speed_window")
    tm = tracking_metrics(t, run["pos_rad"], run["pos_ref_rad"], run["vel_rad_s"],
                          run["vel_ref_rad_s"], active=active,
                          constant_speed=tuple(window) if window else None,
                          reversals=h.get("reversals"))
    lm = lateness_metrics(run["late_us"])
    fc_hat = run["fc_hat_nm"][active] if active.any() else run["fc_hat_nm"]
    summary: dict[str, Any] = {
        "duration_s": duration,
        "duration_requested_s": h.get("duration_s"),
        "ticks": int(t.size),
        "rate_hz": h.get("rate_hz"),
        "scenario": h.get("scenario"),
        "compensation": h.get("compensation"),
        "backend": h.get("backend"),
        **tm,
        **lm,
        "overruns": int(np.nansum(run["overrun"])),
        "faults": [],
        "fc_hat_final_nm": float(fc_hat[-1]) if fc_hat.size else math.nan,
        "reidentify": bool(np.nanmax(run["reidentify"]) > 0) if t.size else False,
        "max_ff_param_step_nm": float(np.nanmax(run["ff_param_step_nm"])) if t.size else math.nan,
        "fallback_ticks": int(np.nansum(run["fallback"])),
        "log_complete": run.complete,
    }
    summary["axis"] = axis_of_log_units(run.units).kind
    if result is not None:
        summary["faults"] = result.faults
        summary["stop_reason"] = result.stop_reason
        summary["wall_s"] = result.wall_s
        summary["realtime_factor"] = (result.duration_s / result.wall_s) if result.wall_s > 0 else math.nan
        summary["overruns"] = result.overruns
        summary["missed_deadlines"] = result.missed_deadlines
        summary["drive_enabled_at_exit"] = result.drive_enabled_at_exit
    summary["log"] = str(log_path)
    return with_units(summary, axis_of_log_units(run.units))


def with_units(summary: dict[str, Any], axis) -> dict[str, Any]:
    """``summary["units"]``: the unit of every figure whose key names one (the keys keep their
    rotary names on a linear axis: ``rms_error_rad`` is in m there)."""
    summary["units"] = key_units([k for k, v in summary.items() if not isinstance(v, (dict, list))],
                                 axis)
    return summary


def run_session(cfg: Config, s: Session, out_dir: Path, *, plot: bool = True,
                progress: Callable[[float, float], None] | None = None,
                on_loop: Callable[[ControlLoop], Any] | None = None) -> dict[str, Any]:
    """Run the loop, write out_dir/{run.fctl, summary.json, report.png}; return the summary."""
    out_dir.mkdir(parents=True, exist_ok=True)
    compensator = make_compensator(cfg.controller, s.compensation, cfg.loop.rate_hz)
    log_path = out_dir / LOG_NAME
    log_path.unlink(missing_ok=True)  # an out dir holds one run: re-running replaces it
    chunk_rows = max(1, int(round(cfg.logging.chunk_s * cfg.loop.rate_hz)))
    capacity = max(2 * chunk_rows, int(round(cfg.logging.buffer_s * cfg.loop.rate_hz)))
    units = cfg.axis.column_units(dict(LOG_COLUMNS))  # pos_rad in m on a linear axis
    capacity = -(-capacity // chunk_rows) * chunk_rows  # a whole number of chunks
    try:  # the link first, so the header carries what the drive reported (its firmware)
        s.backend.open()
    except Exception:  # noqa: BLE001 - the loop opens again, trips its fault and stops safely
        pass
    # Lockstep runs outpace any disk: the loop waits for the writer (simulated time does not
    # suffer). On the real clock the loop never waits: a full ring is a fault.
    writer = RunLogWriter(log_path, COLUMN_NAMES, _header(cfg, s, compensator),
                          chunk_rows=chunk_rows, capacity_rows=capacity, units=units,
                          # a SIGKILL loses the unwritten rows: ≤ one chunk + one poll
                          poll_s=cfg.logging.chunk_s / 2.0,
                          wait_when_full_s=math.inf if s.clock.simulated else 0.0)
    loop = ControlLoop(cfg, s.backend, s.clock, s.reference, s.duration_s,
                       compensator=compensator, log_sink=writer, progress=progress,
                       truth=s.truth, law=s.law)
    helper = on_loop(loop) if on_loop else None
    try:
        with _SignalStop(loop):
            result = loop.run()
    finally:
        writer.close()
        if helper is not None and hasattr(helper, "stop"):
            helper.stop()
    summary = summarize(log_path, result)
    summary["drive"] = s.backend.identity()  # what the drive reported, what protected it
    from .lugre_compensator import reidentify_report  # the alarm's reason and proposed set

    summary.update(reidentify_report(compensator, out_dir, cfg.axis))
    summary["warnings"] = rate_warnings(cfg) + compensator.warnings(cfg.loop.rate_hz)
    with_units(summary, cfg.axis)
    write_summary(out_dir, summary)
    if plot:
        from .report import plot_run

        plot_run(log_path, out_dir / "report.png")
        summary["report"] = str(out_dir / "report.png")
    return summary


def rate_warnings(cfg: Config) -> list[str]:
    """The loop rate below 20× the position-loop bandwidth f_p the PID stands for: its phase
    margin, and every observer rule scaled by f_p, assume a loop well above it (``hil``
    retunes the PID to rate/20 for its bench; measured, the shipped 20 Hz loop at 300 Hz:
    ``lugre_adaptive`` no better than the PID alone, reversal 11.4 against 12.4 µrad, creep
    12.4 against 12.2; README, "Loop rate")."""
    ctrl = cfg.controller
    fp = ctrl.pid.position_bandwidth_hz(ctrl.J)
    rate = cfg.loop.rate_hz
    if rate >= 0.99 * 20.0 * fp:
        return []
    return [f"loop.rate_hz {rate:g} is below 20·f_p = {20.0 * fp:.4g} Hz for the configured PID "
            f"(f_p {fp:.4g} Hz): retune it, e.g. PIDGains.triple_pole(J, {rate / 20.0:.4g}), "
            f"as hil does"]


def write_summary(out_dir: Path, summary: dict[str, Any]) -> Path:
    """out_dir/summary.json; non-finite numbers become null (strict JSON)."""
    path = out_dir / "summary.json"
    path.write_text(json.dumps(_json_safe(summary), indent=2) + "\n")
    return path


def _json_safe(obj: Any) -> Any:
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    if isinstance(obj, dict):
        return {k: _json_safe(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_json_safe(v) for v in obj]
    return obj


def print_summary(summary: dict[str, Any], title: str = "summary", file=None) -> None:
    """The summary as an aligned table: key, value, unit (from ``summary["units"]``; lengths
    in µrad or µm)."""
    file = file or sys.stdout
    keys = [k for k in summary
            if not isinstance(summary[k], (dict, list)) or k in ("faults", "warnings")]
    units = summary.get("units") or {}
    width = max(len(k) for k in keys)
    print(title, file=file)
    for k in keys:
        v, unit = summary[k], units.get(k, "")
        if isinstance(v, float):
            v, unit = display(v, unit) if math.isfinite(v) else (v, "")
            v = f"{v:.4g}"
        elif isinstance(v, list):
            v = "; ".join(map(str, v)) or "none"
        print(f"  {k:<{width}}  {v}{' ' + unit if unit and unit != '-' else ''}", file=file)
    file.flush()
