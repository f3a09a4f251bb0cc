"""Figures of merit computed from a run's log (the summary.json numbers)."""

from __future__ import annotations

import math

import numpy as np

REVERSAL_WINDOW_S = 0.25  # the reversal peak is the largest |error| within this after a reversal


def _finite(x: np.ndarray) -> np.ndarray:
    return x[np.isfinite(x)]


def tracking_metrics(t: np.ndarray, pos: np.ndarray, pos_ref: np.ndarray, vel: np.ndarray,
                     vel_ref: np.ndarray, *, active: np.ndarray | None = None,
                     constant_speed: tuple[float, float] | None = None,
                     reversals: list[float] | None = None) -> dict[str, float]:
    """rms/max tracking error, velocity ripple and reversal peak over the active ticks.

    velocity_ripple = std(v − v_ref) / mean|v_ref| over the constant-speed window (NaN without
    one); reversal_peak_error_rad = max |e| within REVERSAL_WINDOW_S after each reversal."""
    if active is None:
        active = np.ones_like(t, dtype=bool)
    err = (pos_ref - pos)[active]
    err = _finite(err)
    out = {
        "rms_error_rad": float(np.sqrt(np.mean(err**2))) if err.size else math.nan,
        "max_error_rad": float(np.max(np.abs(err))) if err.size else math.nan,
        "velocity_ripple": math.nan,
        "reversal_peak_error_rad": math.nan,
    }
    if constant_speed is not None:
        lo, hi = constant_speed
        sel = active & (t >= lo) & (t <= hi)
        if np.count_nonzero(sel) > 10:
            dv = _finite((vel - vel_ref)[sel])
            denom = float(np.mean(np.abs(vel_ref[sel])))
            if denom > 0 and dv.size:
                out["velocity_ripple"] = float(np.std(dv) / denom)
    if reversals:
        peaks = []
        e_all = np.abs(pos_ref - pos)
        for tr in reversals:
            sel = active & (t >= tr) & (t <= tr + REVERSAL_WINDOW_S)
            if np.any(sel):
                peaks.append(float(np.nanmax(e_all[sel])))
        if peaks:
            out["reversal_peak_error_rad"] = max(peaks)
    return out


def lateness_metrics(late_us: np.ndarray) -> dict[str, float]:
    late = _finite(late_us)
    if not late.size:
        return {"p50_late_us": math.nan, "p99_late_us": math.nan, "p999_late_us": math.nan,
                "max_late_us": math.nan}
    p50, p99, p999 = np.percentile(late, [50, 99, 99.9])
    return {"p50_late_us": float(p50), "p99_late_us": float(p99), "p999_late_us": float(p999),
            "max_late_us": float(np.max(late))}
