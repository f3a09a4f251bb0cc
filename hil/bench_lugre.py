"""Benchmark of the LuGre bristle update (``frictionctl bench lugre``, ``python -m hil.bench_lugre``).

(a) Cost per call of :func:`controller.friction.lugre_step` (timeit, best of several repeats), with
    the naive explicit Euler step :func:`controller.friction.lugre_euler_step` timed in the same
    process as the baseline.
(b) Accuracy: the largest bristle-state error |z − z_ref| of naive Euler and of the exact
    exponential update over a piecewise-held velocity profile, against a Radau reference
    (``solve_ivp``, rtol 1e-10), for the reference turntable's friction set and a stiff set
    (sigma0 = 2.5e7, BRIEF §2). Euler is reported as "diverged" once |z| leaves 10·z_max or stops
    being finite.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import platform
import sys
import time
import timeit
from typing import Callable, Sequence

import numpy as np

from controller.friction import DirectionalParams, LuGreParams, g, lugre_euler_step, lugre_step

DTS = (1e-4, 1e-3, 1e-2)  # step sizes compared [s]
STIFF_SIGMA0 = 2.5e7  # N·m/rad, a measured precision stage (BRIEF §2)
SEGMENT_S = 0.05  # each velocity is held this long [s] (a multiple of every dt)
# Held velocities [rad/s]: around vs, reversals, near-zero, exactly zero; the fastest keeps the
# turntable set at a·dt < 1 for dt = 1e-4 s so that Euler shows an error there, not a divergence.
PROFILE_V = (0.02, 0.005, -0.001, 1e-4, -0.05, 0.0, 0.01, -0.002, 1e-6, 0.03)
DIVERGED_FACTOR = 10.0  # Euler has diverged once |z| > this·z_max (or non-finite)


def _reference_friction() -> LuGreParams:
    """The plant friction of the shipped reference turntable config."""
    from controller.config import load_config, resolve_config_path

    friction = load_config(resolve_config_path("turntable")).plant.friction
    if isinstance(friction, DirectionalParams):
        friction = friction.forward
    return friction


# --- (a) cost per call ----------------------------------------------------------------------------


def ns_per_call(cases: Sequence[tuple[Callable, tuple]], number: int, repeat: int) -> list[float]:
    """Best-of-``repeat`` cost per call [ns] of each (fn, args); the cases are timed in
    interleaved rounds so that machine load drifts affect them alike."""
    timers = [timeit.Timer("fn(*args)", globals={"fn": fn, "args": args}) for fn, args in cases]
    best = [math.inf] * len(timers)
    for _ in range(repeat):
        for i, timer in enumerate(timers):
            best[i] = min(best[i], timer.timeit(number))
    return [b / number * 1e9 for b in best]


# --- (b) accuracy ---------------------------------------------------------------------------------


def _rate(p: LuGreParams, v: float) -> float:
    """a = sigma0·|v|/g(v) [1/s]: the bristle relaxation rate at held velocity v."""
    return p.sigma0 * abs(v) / g(p, v) if v != 0.0 else 0.0


def radau_reference(p: LuGreParams, z0: float, profile: Sequence[float], segment_s: float,
                    dt: float) -> np.ndarray:
    """z at every multiple of dt over the held-velocity profile (Radau, rtol 1e-10)."""
    from scipy.integrate import solve_ivp

    n = round(segment_s / dt)
    t_eval = np.arange(1, n + 1) * dt
    out = [np.array([z0])]
    z = z0
    for v in profile:
        if v == 0.0:
            out.append(np.full(n, z))
            continue
        a = _rate(p, v)
        sol = solve_ivp(lambda t, y: [v - a * y[0]], (0.0, n * dt), [z], method="Radau",
                        t_eval=t_eval, rtol=1e-10, atol=1e-13 * p.z_max,
                        jac=lambda t, y: [[-a]])
        if not sol.success:
            raise RuntimeError(f"Radau reference failed at v={v}: {sol.message}")
        out.append(sol.y[0])
        z = float(sol.y[0, -1])
    return np.concatenate(out)


def run_steps(step: Callable, p: LuGreParams, z0: float, profile: Sequence[float], segment_s: float,
              dt: float) -> tuple[np.ndarray, int | None]:
    """z at every step; also the step index where z left the bound (None if it never did)."""
    n = round(segment_s / dt)
    zs = np.empty(n * len(profile) + 1)
    zs[0] = z = z0
    bound = DIVERGED_FACTOR * p.z_max
    k = 0
    for v in profile:
        for _ in range(n):
            z, _f = step(p, z, v, dt)
            k += 1
            zs[k] = z
            if not (math.isfinite(z) and abs(z) <= bound):
                return zs[: k + 1], k
    return zs, None


def accuracy_rows(sets: Sequence[tuple[str, LuGreParams]], dts: Sequence[float] = DTS,
                  profile: Sequence[float] = PROFILE_V, segment_s: float = SEGMENT_S) -> list[dict]:
    """One row per (set, dt): max a·dt, Euler error (or divergence step), exact-update error."""
    fine = min(dts)
    rows = []
    for name, p in sets:
        z0 = -0.5 * p.z_max
        ref_fine = radau_reference(p, z0, profile, segment_s, fine)
        for dt in dts:
            ref = ref_fine[:: round(dt / fine)]
            exact, _ = run_steps(lugre_step, p, z0, profile, segment_s, dt)
            euler, diverged_at = run_steps(lugre_euler_step, p, z0, profile, segment_s, dt)
            rows.append({
                "set": name,
                "dt": dt,
                "max_a_dt": max(_rate(p, v) for v in profile) * dt,
                "z_max": p.z_max,
                "euler": None if diverged_at is not None else float(np.max(np.abs(euler - ref))),
                "euler_diverged_at": diverged_at,
                "exact": float(np.max(np.abs(exact - ref))),
            })
    return rows


# --- output ---------------------------------------------------------------------------------------


def _err_cell(err: float | None, z_max: float, diverged_at: int | None = None) -> str:
    if err is None:
        return f"diverged (step {diverged_at})"
    return f"{err:.2e} ({err / z_max:.1e}·z_max)"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="frictionctl bench lugre",
        description="cost and accuracy of the LuGre bristle update against naive Euler")
    parser.add_argument("--number", type=int, default=20_000, help="calls per timing repeat")
    parser.add_argument("--repeat", type=int, default=25, help="timing repeats (best is reported)")
    args = parser.parse_args(argv)
    if args.number < 1 or args.repeat < 1:
        parser.error("--number and --repeat must be >= 1")

    started = time.perf_counter()
    turntable = _reference_friction()
    stiff = dataclasses.replace(turntable, sigma0=STIFF_SIGMA0)
    directional = DirectionalParams(turntable, turntable.scaled(Fc=1.2, Fs=1.2))

    print(f"LuGre bristle update benchmark  (Python {platform.python_version()}, "
          f"numpy {np.__version__}, {platform.machine()})")
    print()
    print(f"(a) cost per call: timeit, best of {args.repeat} x {args.number} calls, "
          "v = 0.005 rad/s, dt = 2.5e-4 s, turntable set")
    call = (turntable, 1e-6, 0.005, 2.5e-4)
    t_exact, t_euler, t_dir, t_noop = ns_per_call(
        [(lugre_step, call), (lugre_euler_step, call),
         (lugre_step, (directional, 1e-6, 0.005, 2.5e-4)), (lambda p, z, v, dt: None, call)],
        args.number, args.repeat)
    width = 44
    print(f"  {'lugre_step (exact exponential update)':<{width}} {t_exact:8.0f} ns")
    print(f"  {'lugre_euler_step (naive explicit Euler)':<{width}} {t_euler:8.0f} ns")
    print(f"  {'ratio exact / Euler':<{width}} {t_exact / t_euler:8.2f}")
    print(f"  {'lugre_step with DirectionalParams':<{width}} {t_dir:8.0f} ns")
    print(f"  {'empty Python call, same arguments':<{width}} {t_noop:8.0f} ns")
    print()

    sets = [(f"turntable (sigma0={turntable.sigma0:.3g})", turntable),
            (f"stiff     (sigma0={stiff.sigma0:.3g})", stiff)]
    print("(b) max |z - z_ref| [rad] over a piecewise-held velocity profile; reference: Radau, "
          "rtol 1e-10")
    print(f"    profile: {len(PROFILE_V)} segments x {SEGMENT_S * 1e3:g} ms at v = "
          + ", ".join(f"{v:g}" for v in PROFILE_V) + " rad/s")
    print(f"    'diverged': Euler's |z| left {DIVERGED_FACTOR:g}·z_max or went non-finite; "
          "a = sigma0·|v|/g(v), Euler is unstable for a·dt > 2")
    rows = accuracy_rows(sets)
    header = f"  {'set':<26} {'dt [s]':>7} {'max a·dt':>9}   {'naive Euler':<28} {'exact update':<28}"
    print(header)
    print("  " + "-" * (len(header) - 2))
    for r in rows:
        print(f"  {r['set']:<26} {r['dt']:>7.0e} {r['max_a_dt']:>9.3g}   "
              f"{_err_cell(r['euler'], r['z_max'], r['euler_diverged_at']):<28} "
              f"{_err_cell(r['exact'], r['z_max']):<28}")
    print()
    print(f"z_max = Fs/sigma0: turntable {turntable.z_max:.3g} rad, stiff {stiff.z_max:.3g} rad.  "
          f"total {time.perf_counter() - started:.1f} s")
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
