"""Plots of a run: what a control engineer looks at first."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from .runlog import read_log


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def plot_run(log_path: Path, out_png: Path) -> Path:
    """Six panels: position vs reference, tracking error, velocity, torque split, friction
    estimate vs the plant's true friction (when known), lateness histogram."""
    plt = _pyplot()
    run = read_log(log_path)
    h = run.header
    t = run["t_s"]
    fig, axes = plt.subplots(3, 2, figsize=(13, 9.5))
    title = (f"{h.get('scenario') or 'run'} · compensation {h.get('compensation')} · "
             f"backend {h.get('backend')} · {h.get('rate_hz'):g} Hz")
    fig.suptitle(title + ("" if run.complete else "  [log incomplete: torn tail]"))

    ax = axes[0, 0]
    ax.plot(t, run["pos_ref_rad"] * 1e3, "k--", lw=1, label="reference")
    ax.plot(t, run["pos_rad"] * 1e3, lw=1, label="position")
    ax.set_ylabel("position [mrad]")
    ax.legend(fontsize=8)

    ax = axes[0, 1]
    ax.plot(t, (run["pos_ref_rad"] - run["pos_rad"]) * 1e6, lw=0.8)
    ax.set_ylabel("tracking error [µrad]")

    ax = axes[1, 0]
    ax.plot(t, run["vel_rad_s"], lw=0.6, label="estimate")
    ax.plot(t, run["vel_ref_rad_s"], "k--", lw=1, label="reference")
    ax.set_ylabel("velocity [rad/s]")
    ax.legend(fontsize=8)

    ax = axes[1, 1]
    ax.plot(t, run["torque_cmd_nm"], lw=0.8, label="command")
    ax.plot(t, run["torque_pid_nm"], lw=0.8, label="PID")
    ax.plot(t, run["torque_ff_nm"], lw=0.8, label="feedforward")
    ax.set_ylabel("torque [N·m]")
    ax.legend(fontsize=8)

    ax = axes[2, 0]
    true = run["friction_true_nm"]
    if np.isfinite(true).any():
        ax.plot(t, true, "k", lw=1, label="plant (true)")
    ax.plot(t, run["friction_hat_nm"], lw=0.8, label="estimate / feedforward")
    ax.set_ylabel("friction [N·m]")
    ax.set_xlabel("t [s]")
    ax.legend(fontsize=8)

    ax = axes[2, 1]
    late = run["late_us"]
    late = late[np.isfinite(late)]
    if late.size and np.ptp(late) > 0:
        ax.hist(late, bins=60, log=True)
        ax.set_xlabel("tick lateness [µs]")
        ax.set_ylabel("ticks")
    else:
        ax.text(0.5, 0.5, "lockstep (simulated clock): no lateness", ha="center", va="center",
                transform=ax.transAxes)
        ax.set_axis_off()
    for a in axes.flat[:5]:
        a.grid(True, alpha=0.3)
    for a in (axes[0, 0], axes[0, 1], axes[1, 0], axes[1, 1]):
        a.set_xlabel("t [s]")
    fig.tight_layout()
    fig.savefig(out_png, dpi=100)
    plt.close(fig)
    return out_png
