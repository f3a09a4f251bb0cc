"""Plots of a run (report.png) and of a comparison of modes (comparison.png): what a control
engineer looks at first, drawn so that they agree with summary.json.

Rules every figure here follows:

- The error scale is set by the rows under control: the safe-stop phase (after the end of the
  run, a fault or a stop request; :func:`controller.log_data.stop_phase_mask`) is shaded and
  left off the scale, and so is the start-up breakaway (from the reference starting to move
  until the tracking error first changes sign: the axis has broken away and caught up). What is
  off the scale is named in the panel with its peak, and an inset shows log |e| over the whole
  run, so nothing is hidden.
- One colour per compensation mode (:data:`MODE_COLORS`) in every figure; the reference and the
  plant's truth are black (dashed), drawn on top so an estimate never hides them.
- Event markers: the first fault (red, named), the scenario's changes, parameter switches of
  the scheduler, reidentify and fallback episodes.
- The lateness histogram only for runs on the real clock.
- Axis units from the log header's ``units`` (rad or m, N·m or N).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

import numpy as np

from .log_data import Event, events, real_clock, stop_phase_mask, true_fc
from .runlog import RunLog, read_log

MODE_COLORS = {
    "off": "#7f7f7f",
    "coulomb": "#ff7f0e",
    "stribeck": "#8c564b",
    "lugre": "#2ca02c",
    "lugre_adaptive": "#1f77b4",
    "oracle": "#9467bd",
}
EVENT_STYLE = {  # kind → (colour, line style)
    "fault": ("#d62728", "-"),
    "change": ("k", ":"),
    "schedule": ("#bcbd22", "--"),
    "reidentify": ("#ff7f0e", "-."),
    "fallback": ("#e377c2", "-."),
}
STOP_SHADE = dict(color="0.85", alpha=0.6, lw=0)
MAX_MARKERS_PER_KIND = 12


def mode_color(mode: str | None) -> str:
    return MODE_COLORS.get(mode or "", "#17becf")


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


# --- units ----------------------------------------------------------------------------------------


def _micro(unit: str) -> tuple[float, str]:
    """Scale and label for small values of a length unit: rad → µrad, m → µm."""
    if unit in ("rad", "m"):
        return 1e6, "µ" + unit
    return 1.0, unit or "-"


def _milli(unit: str) -> tuple[float, str]:
    if unit in ("rad", "m"):
        return 1e3, "m" + unit
    return 1.0, unit or "-"


def _unit(run: RunLog, column: str, default: str) -> str:
    return run.units.get(column, default)


# --- what sets the error scale ---------------------------------------------------------------------


SETTLE_BANDWIDTH_PERIODS = 10.0  # start-up settling: 10/ω of the PID's triple pole


def _pid_omega(run: RunLog) -> float:
    """ω [rad/s] of the PID's triple pole, kd/(3J) (the tuning rule of controller.gains)."""
    ctrl = (run.header.get("config") or {}).get("controller") or {}
    pid, J = ctrl.get("pid") or {}, ctrl.get("J")
    kd = pid.get("kd")
    if isinstance(kd, (int, float)) and isinstance(J, (int, float)) and kd > 0 and J > 0:
        return kd / (3.0 * J)
    return float("nan")


def startup_mask(run: RunLog) -> np.ndarray:
    """True on the start-up breakaway rows, which do not set the error scale.

    Rule: from the first row where the reference moves, for a settling time of 10/ω
    (ω = kd/(3J), the PID's triple pole, from the header), and on while |e| is still above the largest |e| of the second half of the
    controlled run (a stuck axis breaking away takes longer than the loop settles). Never more
    than half of the controlled rows."""
    n = len(run)
    mask = np.zeros(n, dtype=bool)
    if n == 0:
        return mask
    controlled = np.flatnonzero(~stop_phase_mask(run))
    moving = np.flatnonzero(np.nan_to_num(run["vel_ref_rad_s"]) != 0)
    if not moving.size or not controlled.size:
        return mask
    end = int(controlled[-1]) + 1
    k0 = int(moving[0])
    rate = float(run.header.get("rate_hz") or 0.0)
    omega = _pid_omega(run)
    settle = int(round(SETTLE_BANDWIDTH_PERIODS / omega * rate)) if omega > 0 and rate > 0 else 0
    k1 = min(k0 + settle, end)
    e = np.abs(run["pos_ref_rad"] - run["pos_rad"])
    tail = e[(controlled[0] + end) // 2:end]
    tail = tail[np.isfinite(tail)]
    if tail.size:
        level = float(tail.max())
        above = np.flatnonzero(~(e[k1:end] > level))
        k1 = k1 + (int(above[0]) if above.size else end - k1)
    if k1 - k0 > controlled.size // 2:
        return mask
    mask[k0:k1] = True
    return mask


def _limits(values: np.ndarray) -> tuple[float, float] | None:
    v = values[np.isfinite(values)]
    if not v.size:
        return None
    lo, hi = float(v.min()), float(v.max())
    pad = 0.08 * (hi - lo) if hi > lo else max(abs(hi), 1.0) * 0.1
    return lo - pad, hi + pad


def _shade_stop(ax, t: np.ndarray, stop: np.ndarray, label: str | None = None) -> None:
    if t.size and stop.any():
        k = np.flatnonzero(stop)
        ax.axvspan(t[k[0]], t[k[-1]], label=label, **STOP_SHADE)


def error_panel(ax, t: np.ndarray, err: np.ndarray, scale: np.ndarray, stop: np.ndarray, *,
                color: str, label: str | None, unit: str, inset: bool = True,
                startup: np.ndarray | None = None) -> None:
    """Tracking error ``err`` (already in ``unit``) with the y-limits set by the rows in
    ``scale`` only; the stop phase shaded; an off-scale note and a log |e| inset."""
    ax.plot(t, err, lw=0.7, color=color, label=label)
    lim = _limits(err[scale])
    if lim is not None:
        ax.set_ylim(*lim)
        off = ~scale & np.isfinite(err) & ((err < lim[0]) | (err > lim[1]))
        if off.any():
            parts = []
            if startup is not None and (off & startup).any():
                parts.append(f"start-up ±{np.max(np.abs(err[off & startup])):.3g}")
            if (off & stop).any():
                parts.append(f"stop phase ±{np.max(np.abs(err[off & stop])):.3g}")
            if parts:
                ax.text(0.01, 0.02, "off scale: " + ", ".join(parts) + f" {unit}",
                        transform=ax.transAxes, fontsize=7, va="bottom", color="0.3")
    ax.set_ylabel(f"tracking error [{unit}]")
    if inset and t.size:
        sub = ax.inset_axes([0.70, 0.62, 0.29, 0.36])
        mag = np.abs(err)
        pos = mag[np.isfinite(mag) & (mag > 0)]
        floor = max(float(pos.min()), 1e-6 * float(pos.max())) if pos.size else 1.0
        sub.semilogy(t, np.maximum(mag, floor), lw=0.5, color=color)
        _shade_stop(sub, t, stop)
        sub.set_title("|e|, whole run (log)", fontsize=6, pad=2)
        sub.tick_params(labelsize=6)


def _mark_events(axes: Sequence, evs: list[Event], with_labels: bool = True) -> None:
    counts: dict[str, int] = {}
    labelled: set[str] = set()
    for ev in evs:
        counts[ev.kind] = counts.get(ev.kind, 0) + 1
        if counts[ev.kind] > MAX_MARKERS_PER_KIND:
            continue
        color, style = EVENT_STYLE.get(ev.kind, ("k", ":"))
        for i, ax in enumerate(axes):
            lab = None
            if i == 0 and with_labels and ev.kind not in labelled:
                lab = f"{ev.kind}: {ev.label}" if ev.kind in ("fault", "change") else ev.kind
                labelled.add(ev.kind)
            ax.axvline(ev.t_s, color=color, ls=style, lw=0.9, alpha=0.8, label=lab)


# --- report.png -----------------------------------------------------------------------------------


def plot_run(log_path: Path, out_png: Path) -> Path:
    """Write report.png of one run (:func:`run_figure`); returns ``out_png``."""
    plt = _pyplot()
    fig = run_figure(log_path)
    fig.savefig(out_png, dpi=100)
    plt.close(fig)
    return out_png


def run_figure(log_path: Path):
    """The report figure of one run. Panels: position vs reference; tracking error (stop phase and
    start-up off the scale, log |e| inset); velocity; torque split; friction estimate with the
    plant's truth on top; friction error (estimate − true); Fc estimate vs the plant's Fc;
    lateness histogram (real-clock runs only). Event markers on every time panel."""
    plt = _pyplot()
    run = read_log(log_path)
    h = run.header
    mode = h.get("compensation")
    color = mode_color(mode)
    real = real_clock(run)
    rate = h.get("rate_hz")
    title = (f"{h.get('scenario') or 'run'} · compensation {mode} · backend {h.get('backend')}"
             f" · {rate:g} Hz" if isinstance(rate, (int, float)) else f"{h.get('scenario') or 'run'}")
    title += " · real clock" if real else " · simulated clock"
    if not run.complete:
        title += "  [log incomplete" + (": torn tail]" if run.torn_tail else "]")
    n = len(run)
    if n == 0:
        fig, ax = plt.subplots(figsize=(8, 3))
        fig.suptitle(title)
        ax.text(0.5, 0.5, f"the log holds no ticks\n{run.problem or ''}", ha="center",
                va="center", transform=ax.transAxes, wrap=True)
        ax.set_axis_off()
        return fig

    rows = 5 if real else 4
    fig, axes = plt.subplots(rows, 2, figsize=(13, 2.6 * rows + 1.2))
    fig.suptitle(title)
    t = run["t_s"]
    stop = stop_phase_mask(run)
    startup = startup_mask(run)
    scale = ~stop & ~startup
    length = _unit(run, "pos_rad", "rad")
    speed = _unit(run, "vel_rad_s", "rad/s")
    force = _unit(run, "torque_cmd_nm", "N·m")
    kind = "force" if force == "N" else "torque"

    ax = axes[0, 0]
    f, u = _milli(length)
    ax.plot(t, run["pos_rad"] * f, lw=1, color=color, label="position")
    ax.plot(t, run["pos_ref_rad"] * f, "k--", lw=0.8, label="reference")
    ax.set_ylabel(f"position [{u}]")

    from .runner import summarize  # the figures of summary.json, from the same rows

    summary = summarize(Path(log_path))
    ax = axes[0, 1]
    f, u = _micro(length)
    error_panel(ax, t, (run["pos_ref_rad"] - run["pos_rad"]) * f, scale, stop, color=color,
                label=None, unit=u, startup=startup)
    ax.set_title(f"rms {summary['rms_error_rad'] * f:.3g} {u}, max {summary['max_error_rad'] * f:.3g} "
                 f"{u} (controlled rows, as summary.json)", fontsize=8)

    ax = axes[1, 0]
    ax.plot(t, run["vel_rad_s"], lw=0.6, color=color, label="estimate")
    ax.plot(t, run["vel_ref_rad_s"], "k--", lw=0.8, label="reference")
    ax.set_ylabel(f"velocity [{speed}]")
    ax.set_ylim(*(_limits(np.concatenate([run["vel_rad_s"][~stop], run["vel_ref_rad_s"][~stop]]))
                  or (-1, 1)))

    ax = axes[1, 1]
    ax.plot(t, run["torque_cmd_nm"], lw=0.8, color=color, label="command")
    ax.plot(t, run["torque_pid_nm"], lw=0.5, color="k", alpha=0.7, label="PID")
    ax.plot(t, run["torque_ff_nm"], lw=0.7, color="#17becf", label="feedforward")
    ax.set_ylabel(f"{kind} [{force}]")

    truth = run["friction_true_nm"]
    has_truth = bool(np.isfinite(truth).any())
    ax = axes[2, 0]
    ax.plot(t, run["friction_hat_nm"], lw=1.2, color=color, alpha=0.8, label="estimate")
    if has_truth:
        ax.plot(t, truth, "k--", lw=0.7, zorder=5, label="plant (true)")
    ax.set_ylabel(f"friction [{force}]")

    ax = axes[2, 1]
    if has_truth:
        ferr = run["friction_hat_nm"] - truth
        ax.plot(t, ferr, lw=0.6, color=color, label="estimate − true")
        ax.axhline(0.0, color="k", lw=0.6)
        lim = _limits(ferr[scale])
        if lim:
            ax.set_ylim(*lim)
        ax.set_ylabel(f"friction error [{force}]")
    else:
        ax.plot(t, run["residual_nm"], lw=0.6, color=color, label="observer residual")
        ax.set_ylabel(f"residual [{force}]")
        ax.set_title("no plant truth on a machine: the observer residual instead", fontsize=8)

    ax = axes[3, 0]
    ax.plot(t, run["fc_hat_nm"], lw=1.2, color=color, label="Fc estimate")
    if not np.isfinite(run["fc_hat_nm"]).any():
        ax.set_title(f"no Fc estimate in mode {mode}", fontsize=8)
    fc = true_fc(run)
    if fc is not None:
        ax.plot(t, fc, "k--", lw=0.8, zorder=5, label="plant Fc (true)")
    ax.set_ylabel(f"Fc [{force}]")

    ax = axes[3, 1]
    ax.plot(t, run["compute_us"], lw=0.4, color=color, label="compute")
    ax.set_ylabel("compute per tick [µs]")

    time_axes = [axes[0, 0], axes[0, 1], axes[1, 0], axes[1, 1], axes[2, 0], axes[2, 1],
                 axes[3, 0], axes[3, 1]]
    names = ("position", "tracking_error", "velocity", "torque", "friction", "friction_error",
             "fc", "compute")
    for a, name in zip(time_axes, names):
        a.set_label(name)  # find a panel by name: [a for a in fig.axes if a.get_label() == ...]
        _shade_stop(a, t, stop, label="stop phase" if a is axes[0, 0] else None)
        a.set_xlabel("t [s]")
        a.grid(True, alpha=0.3)
    _mark_events(time_axes, events(run))
    for a in time_axes:
        if a.get_legend_handles_labels()[0]:
            a.legend(fontsize=7, loc="upper left")

    if real:
        gs = axes[4, 0].get_gridspec()
        for a in axes[4]:
            a.remove()
        ax = fig.add_subplot(gs[4, :])
        ax.set_label("lateness")
        late = run["late_us"]
        late = late[np.isfinite(late)]  # every tick, as summary.json's lateness figures
        if late.size:
            ax.hist(late, bins=80, log=True, color=color)
            ax.set_xlabel("tick lateness [µs]")
            ax.set_ylabel("ticks")
            ax.set_title(f"lateness of all {late.size} ticks: p50 {summary['p50_late_us']:.1f} µs, "
                         f"p99 {summary['p99_late_us']:.1f} µs, max {summary['max_late_us']:.1f} µs "
                         f"(as summary.json)", fontsize=8)
        else:
            ax.text(0.5, 0.5, "no ticks ran: no lateness measured", ha="center",
                    va="center", transform=ax.transAxes)
            ax.set_axis_off()
    fig.tight_layout()
    return fig


# --- comparison.png -------------------------------------------------------------------------------


def plot_comparison(results: dict[str, dict[str, dict[str, Any]]], out_png: Path,
                    trace_scenarios: Sequence[str] = ("creep", "reversal"),
                    skip_trace_modes: Sequence[str] = ("coulomb", "lugre")) -> Path:
    """Write comparison.png (:func:`comparison_figure`); returns ``out_png``."""
    plt = _pyplot()
    fig = comparison_figure(results, trace_scenarios, skip_trace_modes)
    fig.savefig(out_png, dpi=100)
    plt.close(fig)
    return out_png


def comparison_figure(results: dict[str, dict[str, dict[str, Any]]],
                      trace_scenarios: Sequence[str] = ("creep", "reversal"),
                      skip_trace_modes: Sequence[str] = ("coulomb", "lugre")):
    """rms error per scenario and mode (log scale), and the error traces of ``trace_scenarios``.

    ``results[scenario][mode]`` is a summary dict with ``rms_error_rad`` and ``log`` (the run's
    log path). Each trace panel's scale excludes the start-up breakaway and the stop phase of
    every mode (named off-scale, shown in the log |e| inset)."""
    plt = _pyplot()
    scenarios = list(results)
    modes = list(next(iter(results.values())))
    trace_sc = [sc for sc in trace_scenarios if sc in results]
    fig, axes = plt.subplots(1 + len(trace_sc), 1, figsize=(11, 3.6 * (1 + len(trace_sc))))
    axes = np.atleast_1d(axes)
    ax = axes[0]
    width = 0.8 / len(modes)
    x = np.arange(len(scenarios))
    first = next(iter(next(iter(results.values())).values()))
    f, unit = _micro(read_log(first["log"]).units.get("pos_rad", "rad")) if first.get("log") \
        else (1e6, "µrad")
    for i, mode in enumerate(modes):
        vals = [results[sc][mode]["rms_error_rad"] * f for sc in scenarios]
        ax.bar(x + i * width, vals, width, label=mode, color=mode_color(mode))
    ax.set_xticks(x + 0.4 - width / 2, scenarios)
    ax.set_yscale("log")
    ax.set_label("rms")
    ax.set_ylabel(f"rms tracking error [{unit}]")
    ax.legend(fontsize=8, ncol=len(modes))
    ax.grid(True, axis="y", alpha=0.3)
    for ax, sc in zip(axes[1:], trace_sc):
        lims: list[tuple[float, float]] = []
        sub = ax.inset_axes([0.72, 0.60, 0.27, 0.38])
        peaks: list[tuple[str, float, float]] = []
        for mode in modes:
            if mode in skip_trace_modes:
                continue
            run = read_log(results[sc][mode]["log"])
            if not len(run):
                continue
            t = run["t_s"]
            f, unit = _micro(_unit(run, "pos_rad", "rad"))
            e = (run["pos_ref_rad"] - run["pos_rad"]) * f
            stop = stop_phase_mask(run)
            startup = startup_mask(run)
            scale = ~stop & ~startup
            c = mode_color(mode)
            ax.plot(t[~stop], e[~stop], lw=0.7, color=c, label=mode)
            lim = _limits(e[scale])
            if lim:
                lims.append(lim)
            if startup.any():
                peaks.append((mode, float(np.nanmin(e[startup])), float(np.nanmax(e[startup]))))
            mag = np.abs(e[~stop])
            nonzero = mag[np.isfinite(mag) & (mag > 0)]
            floor = max(float(nonzero.min()), 1e-6 * float(nonzero.max())) if nonzero.size else 1.0
            sub.semilogy(t[~stop], np.maximum(mag, floor), lw=0.4, color=c)
        if lims:
            lo = min(lo for lo, _ in lims)
            hi = max(hi for _, hi in lims)
            ax.set_ylim(lo, hi)
            off_notes = [f"{m} {max(abs(a), abs(b)):.3g}" for m, a, b in peaks if a < lo or b > hi]
        else:
            off_notes = []
        if off_notes:
            ax.text(0.01, 0.02, "start-up breakaway off scale (see inset), peak |e|: " + ", ".join(off_notes)
                    + f" {unit}", transform=ax.transAxes, fontsize=7, color="0.3")
        sub.set_title("|e| (log), whole run", fontsize=6, pad=2)
        sub.tick_params(labelsize=6)
        ax.set_label(f"error_{sc}")
        ax.set_title(f"{sc}: tracking error (controlled rows; stop phase not drawn)")
        ax.set_ylabel(f"error [{unit}]")
        ax.set_xlabel("t [s]")
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=8, loc="upper left")
    fig.tight_layout()
    return fig
