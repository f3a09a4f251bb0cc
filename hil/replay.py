"""Offline replay: a logged run's measured feedback fed back through the estimator and control
law on the simulated clock, as fast as possible.

The replay rebuilds the controller from the config stored in the log's header (or a what-if
parameter set), then, for every tick the loop controlled, fills the same :class:`TickSignals`
the loop filled (position, the velocity estimate recomputed from the logged position by the same
estimator, reference, measured current, previous command, temperature, payload) and calls the
same :class:`ControlLaw`. With the code and parameters that produced the log, the re-estimated
friction and commands equal the logged ones (to 1e-12; in practice bit for bit).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import numpy as np

from controller.compensation import Compensator
from controller.config import Config, believing, config_from_mapping
from controller.control_law import CONTROL_LAW_REVISION
from controller.friction import FrictionParams
from controller.params_file import IdentifiedParams, apply_params
from controller.runlog import RunLog, read_log
from controller.runner import controlled_mask, with_units, write_summary
from controller.schema import ConfigError
from controller.units import axis_of_log_units

from .replay_loop import replay_ticks

REPLAY_COLUMNS = ("t_s", "friction_hat_nm", "z_hat", "fc_hat_nm", "residual_nm", "torque_cmd_nm",
                  "reidentify", "learned_nm")


@dataclass
class ReplayResult:
    t_s: np.ndarray
    friction_hat_nm: np.ndarray
    z_hat: np.ndarray
    fc_hat_nm: np.ndarray
    residual_nm: np.ndarray
    torque_cmd_nm: np.ndarray  # what the controller would have commanded (after the clamp)
    reidentify: np.ndarray
    learned_nm: np.ndarray  # the learned feedforward term (DOB), compared with the log's
    logged: RunLog
    rows: np.ndarray  # indices of the replayed rows in the log
    wall_s: float
    compensation: str
    compensator: Compensator | None = None  # as the last tick left it (the alarm's reason, set)


def config_from_log(run: RunLog, source: str = "log") -> Config:
    cfg_data = run.header.get("config")
    if cfg_data is None:
        raise ConfigError("", f"{source}: header holds no config: not a frictionctl run log")
    return config_from_mapping(cfg_data)


def controlled_rows(run: RunLog) -> np.ndarray:
    """Indices of the ticks on which the loop ran the control law (before any stop)."""
    return np.flatnonzero(controlled_mask(run))


def _replay_ticks(cfg: Config, mode: str, dt: float, cols: dict[str, list], n: int,
                  progress: Callable[[float, float], None] | None = None,
                  reference_from_measurement: bool = False
                  ) -> tuple[np.ndarray, float, Compensator]:
    """:func:`hil.replay_loop.replay_ticks` as an array: rows × REPLAY_COLUMNS[1:]."""
    rec, wall, comp = replay_ticks(cfg, mode, dt, cols, n, progress, reference_from_measurement)
    out = np.array(rec, dtype=float).T if rec else np.empty((len(REPLAY_COLUMNS) - 1, 0))
    return out, wall, comp


def replay_log(run: RunLog, cfg: Config, compensation: str | None = None,
               progress: Callable[[float, float], None] | None = None) -> ReplayResult:
    """Re-run the estimator and control law over a log's controlled ticks."""
    mode = compensation or run.header.get("compensation") or cfg.controller.compensation
    dt = 1.0 / float(run.header.get("rate_hz") or cfg.loop.rate_hz)
    rows = controlled_rows(run)
    n = rows.size
    cols = {name: run[name][rows].tolist() for name in (
        "t_s", "pos_rad", "pos_ref_rad", "vel_ref_rad_s", "acc_ref_rad_s2", "current_a",
        "torque_cmd_nm", "temperature_c", "friction_true_nm", "drive_vel_rad_s", "sequence")}
    if run.header.get("repeated_samples") != "held":  # an older loop read every row as new
        del cols["sequence"]
    if "vel_dt_s" in run.columns:  # the velocity estimate's intervals (real clock: sample times)
        cols["vel_dt_s"] = run["vel_dt_s"][rows].tolist()
    cols["payload_kg"] = (run["payload_kg"][rows] if "payload_kg" in run.columns
                          else np.zeros(n)).tolist()
    out, wall, comp = _replay_ticks(cfg, mode, dt, cols, n, progress)
    f_hat, z_hat, fc_hat, residual, torque, reidentify, learned = out  # REPLAY_COLUMNS[1:]
    return ReplayResult(run["t_s"][rows], f_hat, z_hat, fc_hat, residual, torque, reidentify,
                        learned, logged=run, rows=rows, wall_s=wall, compensation=mode,
                        compensator=comp)


def replay_capture(path: Path, cfg: Config, out_dir: Path, *, protocol: str | None = None,
                   compensation: str | None = None, plot: bool = True,
                   progress: Callable[[float, float], None] | None = None) -> dict[str, Any]:
    """Replay a raw CAN capture: decode it with the drivers' codecs, then estimate friction
    from the measured motion and current (no reference was recorded: the estimator's reference
    is the measured motion). Compares the estimate with the torque the master commanded."""
    from .capture import read_capture

    cap = read_capture(path, cfg, protocol)
    mode = compensation or "lugre"
    n = cap.t_s.size
    nan_list = [math.nan] * n
    cols = {"t_s": cap.t_s.tolist(), "pos_rad": cap.pos_rad.tolist(), "drive_vel_rad_s": nan_list,
            "pos_ref_rad": nan_list, "vel_ref_rad_s": nan_list, "acc_ref_rad_s2": nan_list,
            "current_a": cap.current_a.tolist(), "temperature_c": nan_list,
            "payload_kg": [0.0] * n, "friction_true_nm": nan_list,
            "torque_cmd_nm": np.nan_to_num(cap.torque_cmd_nm).tolist()}
    out, wall, _ = _replay_ticks(cfg, mode, cfg.loop.dt_s, cols, n, progress,
                                 reference_from_measurement=True)
    f_hat, torque = out[0], cap.torque_cmd_nm
    duration = n * cfg.loop.dt_s
    summary = {
        "source": str(path), "protocol": cap.protocol, "frames": cap.frames,
        "frames_other": cap.skipped, "ticks": n, "duration_s": duration,
        "compensation": mode, "replay_wall_s": wall,
        "replay_realtime_factor": duration / wall if wall > 0 else math.nan,
        "max_abs_diff_friction_hat_nm": None,  # a capture holds no logged estimate
        "rms_torque_cmd_minus_friction_hat_nm": float(np.sqrt(np.nanmean((torque - f_hat) ** 2))),
        "fc_hat_final_nm": float(out[2][-1]),
    }
    out_dir.mkdir(parents=True, exist_ok=True)
    np.savetxt(out_dir / "replay.csv", np.column_stack([cap.t_s, cap.pos_rad, cap.current_a,
                                                        torque, f_hat, out[1]]),
               delimiter=",", header="t_s,pos_rad,current_a,torque_cmd_nm,friction_hat_nm,z_hat",
               comments="", fmt="%.17g")
    if plot:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        fig, ax = plt.subplots(figsize=(11, 4))
        ax.plot(cap.t_s, torque, lw=0.8, label="commanded torque (capture)")
        ax.plot(cap.t_s, f_hat, lw=0.8, label=f"friction estimate ({mode})")
        ax.set_xlabel("tick time [s]")
        ax.set_ylabel("torque [N·m]")
        ax.set_title(f"replay of {path.name} ({cap.protocol}, {n} ticks)")
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=8)
        fig.tight_layout()
        fig.savefig(out_dir / "replay.png", dpi=100)
        plt.close(fig)
        summary["report"] = str(out_dir / "replay.png")
    write_summary(out_dir, summary)
    return summary


def with_params(cfg: Config, params: FrictionParams | IdentifiedParams) -> Config:
    """What-if: the controller believes ``params`` (a friction set, or an identified params.yaml
    read by :func:`controller.params_file.load_params_file`: its friction, its uncertainty, and J
    if it has one; a bare set drops the log's stated uncertainty with the set it replaces)."""
    if isinstance(params, IdentifiedParams):
        return apply_params(cfg, params)
    return dataclasses.replace(cfg, controller=believing(cfg.controller, params))


def revision_warning(header: dict[str, Any]) -> str | None:
    """One line when the log was recorded by another control law than this code's (its
    ``control_law_revision``; none in logs recorded before it was logged): the replay then
    differs from the log where the law changed, and its differences are not a finding."""
    logged = header.get("control_law_revision")
    if logged == CONTROL_LAW_REVISION:
        return None
    recorded = (f"control-law revision {logged}" if logged is not None
                else "a control law older than revision 1 (no control_law_revision in its header)")
    return (f"the log was recorded with {recorded}; this code is revision "
            f"{CONTROL_LAW_REVISION}: the replay differs where the law changed")


def replay_summary(res: ReplayResult) -> dict[str, Any]:
    run, rows = res.logged, res.rows
    logged_f = run["friction_hat_nm"][rows]
    logged_u = run["torque_cmd_nm"][rows]
    diff_f = np.abs(res.friction_hat_nm - logged_f)
    diff_u = np.abs(res.torque_cmd_nm - logged_u)
    duration = float(res.t_s[-1] - res.t_s[0]) + 1.0 / float(run.header.get("rate_hz", 1000.0)) \
        if res.t_s.size else 0.0
    true_f = run["friction_true_nm"][rows]
    summary = {
        "ticks": int(rows.size),
        "duration_s": duration,
        "compensation": res.compensation,
        "logged_compensation": run.header.get("compensation"),
        "replay_wall_s": res.wall_s,
        "replay_realtime_factor": duration / res.wall_s if res.wall_s > 0 else math.nan,
        "max_abs_diff_friction_hat_nm": float(np.nanmax(diff_f)) if rows.size else math.nan,
        "max_abs_diff_torque_nm": float(np.nanmax(diff_u)) if rows.size else math.nan,
        "max_abs_diff_learned_nm": (float(np.nanmax(np.abs(res.learned_nm - run["learned_nm"][rows])))
                                    if rows.size and "learned_nm" in run.columns else math.nan),
        "rms_diff_friction_hat_nm": float(np.sqrt(np.nanmean(diff_f**2))) if rows.size else math.nan,
        "fc_hat_final_nm": float(res.fc_hat_nm[-1]) if rows.size else math.nan,
        "reidentify": bool(res.reidentify.any()),
        "logged_reidentify": (bool(np.nanmax(run["reidentify"][rows]) > 0)
                              if rows.size and "reidentify" in run.columns else None),
        "log_complete": run.complete,
        "log_problem": run.problem,
        "logged_control_law_revision": run.header.get("control_law_revision"),
        "control_law_revision": CONTROL_LAW_REVISION,
        "revision_warning": revision_warning(run.header),
    }
    if np.isfinite(true_f).any():
        summary["rms_error_friction_hat_vs_true_nm"] = float(np.sqrt(np.nanmean(
            (res.friction_hat_nm - true_f) ** 2)))
    return with_units(summary, axis_of_log_units(run.units))


def plot_replay(res: ReplayResult, out_png: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    run, rows, t = res.logged, res.rows, res.t_s
    axis = axis_of_log_units(run.units)
    fig, axes = plt.subplots(3, 1, figsize=(11, 8.5), sharex=True)
    ax = axes[0]
    true_f = run["friction_true_nm"][rows]
    if np.isfinite(true_f).any():
        ax.plot(t, true_f, "k", lw=1, label="plant (true)")
    ax.plot(t, run["friction_hat_nm"][rows], lw=1, label=f"logged ({run.header.get('compensation')})")
    ax.plot(t, res.friction_hat_nm, "--", lw=1, label=f"replayed ({res.compensation})")
    ax.set_ylabel(f"friction [{axis.force}]")
    ax.legend(fontsize=8)
    ax = axes[1]
    ax.plot(t, run["torque_cmd_nm"][rows], lw=1, label="logged command")
    ax.plot(t, res.torque_cmd_nm, "--", lw=1, label="replayed command (would have)")
    ax.set_ylabel(f"{axis.force_name} [{axis.force}]")
    ax.legend(fontsize=8)
    ax = axes[2]
    ax.plot(t, res.fc_hat_nm, lw=1, label="Fc estimate (replayed)")
    ax.plot(t, run["fc_hat_nm"][rows], "--", lw=1, label="Fc estimate (logged)")
    ax.set_ylabel(f"Fc [{axis.force}]")
    ax.set_xlabel("t [s]")
    ax.legend(fontsize=8)
    for a in axes:
        a.grid(True, alpha=0.3)
    fig.suptitle("replay")
    fig.tight_layout()
    fig.savefig(out_png, dpi=100)
    plt.close(fig)
    return out_png


@dataclass(frozen=True)
class ReplayTask:
    """One replay of a batch (``frictionctl replay LOG...``): picklable, run by :func:`replay_task`.
    ``capture_cfg``: the source is a raw capture, decoded and replayed with this config."""

    source: Path
    out_dir: Path
    params: FrictionParams | IdentifiedParams | None = None
    compensation: str | None = None
    plot: bool = True
    capture_cfg: Config | None = None
    protocol: str | None = None


def replay_task(task: ReplayTask,
                progress: Callable[[float, float], None] | None = None) -> dict[str, Any]:
    """Run one :class:`ReplayTask` (top level, so a process pool or a Dask worker can run it)."""
    if task.capture_cfg is not None:
        cfg = task.capture_cfg if task.params is None else with_params(task.capture_cfg, task.params)
        return replay_capture(task.source, cfg, task.out_dir, protocol=task.protocol,
                              compensation=task.compensation, plot=task.plot, progress=progress)
    return replay(task.source, task.out_dir, params=task.params, compensation=task.compensation,
                  plot=task.plot, progress=progress)


def batch_out_dirs(sources: list[Path], out: Path) -> list[Path]:
    """Output folders of a batch: ``out`` itself for one source; ``out/<k>-<name>`` for many,
    <name> the log's folder for a ``run.fctl`` (the usual name), else the file's stem."""
    if len(sources) == 1:
        return [out]
    width = len(str(len(sources)))
    return [out / f"{k:0{width}d}-{src.parent.name if src.stem == 'run' else src.stem}"
            for k, src in enumerate(sources, start=1)]


def format_batch(summaries: list[dict[str, Any]]) -> str:
    """One line per replayed source: ticks, speed, the largest difference from the log, and
    the replayed law's alarm (its reason and time; ``-`` for none)."""
    force = ((summaries[0].get("units") or {}).get("max_abs_diff_friction_hat_nm", "N·m")
             if summaries else "N·m")
    lines = [f"{'source':<48}{'mode':>16}{'ticks':>9}{'x realtime':>12}{'max |df| ' + force:>14}"
             "  reidentify"]
    for s in summaries:
        diff = s.get("max_abs_diff_friction_hat_nm")
        at = s.get("reidentify_at_s", math.nan)
        alarm = f"{s.get('reidentify_reason', 'raised')} at {at:.2f} s" if s.get("reidentify") else "-"
        lines.append(f"{str(s.get('log') or s.get('source')):<48}{s['compensation']:>16}"
                     f"{s['ticks']:>9}{s['replay_realtime_factor']:>12.1f}"
                     f"{'-' if diff is None else format(diff, '.3g'):>14}  {alarm}")
    return "\n".join(lines)


def replay(log_path: Path, out_dir: Path, *, params: FrictionParams | IdentifiedParams | None = None,
           compensation: str | None = None, plot: bool = True,
           progress: Callable[[float, float], None] | None = None) -> dict[str, Any]:
    """``frictionctl replay`` on a run log: summary.json, replay.png in out_dir."""
    run = read_log(log_path)
    cfg = config_from_log(run, str(log_path))
    if params is not None:
        cfg = with_params(cfg, params)
    res = replay_log(run, cfg, compensation, progress)
    summary = replay_summary(res)
    summary["log"] = str(log_path)
    out_dir.mkdir(parents=True, exist_ok=True)
    if res.compensator is not None:  # the alarm's reason and time, its proposed set (as sim's)
        from controller.lugre_compensator import reidentify_report

        summary.update(reidentify_report(res.compensator, out_dir, cfg.axis))
        with_units(summary, axis_of_log_units(res.logged.units))  # its figures' units too
    if plot:
        summary["report"] = str(plot_replay(res, out_dir / "replay.png"))
    np.savetxt(out_dir / "replay.csv", np.column_stack([res.t_s, res.friction_hat_nm, res.z_hat,
                                                        res.fc_hat_nm, res.residual_nm,
                                                        res.torque_cmd_nm, res.reidentify,
                                                        res.learned_nm]),
               delimiter=",", header=",".join(REPLAY_COLUMNS), comments="", fmt="%.17g")
    write_summary(out_dir, summary)
    return summary
