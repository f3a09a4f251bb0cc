"""Open-loop friction experiments on the simulated plant: friction against velocity under a
torque profile (Stribeck curve and LuGre hysteresis) and the pre-sliding loop."""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from controller.config import PlantConfig
from controller.friction import LuGreParams, stribeck
from controller.units import ROTARY, AxisUnits, display, key_units

from .plant import Turntable


@dataclass(frozen=True)
class CurveRun:
    t_s: np.ndarray
    torque_nm: np.ndarray  # motor torque Kt·i
    velocity_rad_s: np.ndarray  # true velocity
    position_rad: np.ndarray  # true position
    friction_nm: np.ndarray  # true friction torque


def run_torque_profile(cfg: PlantConfig, amplitude_nm: float, frequency_hz: float,
                       duration_s: float, dt_s: float = 1e-3, seed: int = 0) -> CurveRun:
    """Drive the plant open loop with τ(t) = amplitude·sin(2π·f·t) and record the truth."""
    plant = Turntable(cfg, seed=seed)
    n = int(round(duration_s / dt_s))
    out = np.empty((5, n))
    w = 2.0 * math.pi * frequency_hz
    for k in range(n):
        t = k * dt_s
        plant.advance(amplitude_nm * math.sin(w * t) / cfg.Kt, dt_s)
        out[:, k] = (plant.t_s, cfg.Kt * plant.current_a, plant.omega_rad_s, plant.theta_rad,
                     plant.friction_nm)
    return CurveRun(*out)


def hysteresis_area(x: np.ndarray, y: np.ndarray) -> float:
    """Signed area enclosed by the closed curve (x, y) (shoelace formula)."""
    return 0.5 * float(np.sum(x * np.roll(y, -1) - np.roll(x, -1) * y))


def friction_curves(cfg: PlantConfig, out_png: Path, seed: int = 0,
                    axis: AxisUnits = ROTARY) -> dict[str, Any]:
    """Plot friction vs velocity (with the Stribeck curve) and the pre-sliding loop; return facts
    (with ``units``: the keys keep their rotary names, the units are ``axis``')."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    p = cfg.friction
    one = p if isinstance(p, LuGreParams) else p.forward  # a directional set: its forward half
    fs, fc = one.Fs, one.Fc
    sweep = run_torque_profile(cfg, 1.05 * fs, 0.5, 4.0, seed=seed)
    pre = run_torque_profile(cfg, 0.5 * fc, 2.0, 2.0, seed=seed)
    half = len(pre.t_s) // 2  # drop the first cycle (unknown history)
    x, f = pre.position_rad[half:], pre.friction_nm[half:]
    slope = float(np.polyfit(x - x.mean(), f, 1)[0])
    area = abs(hysteresis_area(x, f))

    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4.2))
    vmax = float(np.max(np.abs(sweep.velocity_rad_s)))
    v = np.linspace(-vmax, vmax, 801)
    vs = one.vs
    force, speed, kind = axis.force, axis.speed, axis.force_name
    scale, micro = display(1.0, axis.length)
    ax1.plot(sweep.velocity_rad_s, sweep.friction_nm, lw=1, label="LuGre (plant, dynamic)")
    ax1.plot(v, stribeck(p, v), "k--", lw=1, label="Stribeck curve (steady state)")
    ax1.set_xscale("symlog", linthresh=vs)  # linear within the Stribeck velocity
    ax1.set_xlabel(f"velocity [{speed}] (symlog)")
    ax1.set_ylabel(f"friction {kind} [{force}]")
    ax1.set_title(f"Friction vs velocity, {kind} {1.05 * fs:.3g}·sin(2π·0.5t) {force}")
    ax1.grid(True, alpha=0.3)
    ax1.legend(fontsize=8)
    ax2.plot(x * scale, f, lw=1)
    ax2.set_xlabel(f"position [{micro}]")
    ax2.set_ylabel(f"friction {kind} [{force}]")
    ax2.set_title(f"Pre-sliding loop: slope {slope:.3g} {axis.of('N·m/rad')}, area {area:.3g} J")
    ax2.grid(True, alpha=0.3)
    fig.tight_layout()
    fig.savefig(out_png, dpi=110)
    plt.close(fig)
    facts: dict = {
        "presliding_slope_nm_per_rad": slope,
        "presliding_loop_area_j": area,
        "peak_velocity_rad_s": vmax,
        "peak_friction_nm": float(np.max(np.abs(sweep.friction_nm))),
    }
    facts["units"] = key_units(facts, axis)
    return facts
