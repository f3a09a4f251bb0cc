"""Compensation benchmark (``frictionctl bench compensation``): every mode on the same plant and
seed for each scenario, with the controller's parameters mismatched from the plant's.

Mismatch (default ±20 %): the controller believes Fc·(1−m), Fs·(1+m), vs·(1+m), sigma0·(1−m),
sigma1·(1+m), sigma2·(1−m), J·(1+m) of the plant's values — every friction parameter and the
inertia off, in the directions that keep the set valid (Fs ≥ Fc). ``--mismatch-sign -1`` flips
every direction (Fs is then raised to Fc where needed). Schedule sets are mismatched the same
way. The torque constant has its own ``--kt-mismatch`` (default 0): Kt scales the measured
torque itself, so no torque-based estimator can see through an error in it; it comes from the
motor datasheet or a torque test to a few per cent.

Monte Carlo (``--monte-carlo N``): N plants drawn as in BRIEF §5 (Fs ~ U[0.5, 1.5]·nominal,
Fc ~ U[0.6, 0.9]·Fs, vs ~ log-U[1e-4, 1e-1]), each controller mismatched by ±m with random
signs per parameter (no schedule: its sets describe the nominal table); medians and worst
cases reported.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import random
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from controller.config import Config, load_config, resolve_config_path
from controller.executor import ExecutorSpec, add_executor_arguments, spec_from_args
from controller.friction import DirectionalParams, FrictionParams, LuGreParams
from controller.report import plot_comparison  # noqa: F401 - re-exported: the figure lives in report

from .sim_batch import SimRun, run_sims, split_timing

MODES = ("off", "coulomb", "stribeck", "lugre", "lugre_adaptive", "oracle")
SCENARIOS = ("creep", "reversal", "step", "drift", "schedule")
PATTERN = {"Fc": -1, "Fs": +1, "vs": +1, "sigma0": -1, "sigma1": +1, "sigma2": -1, "J": +1, "Kt": -1}
METRICS = ("rms_error_rad", "max_error_rad", "velocity_ripple", "reversal_peak_error_rad")


def _mismatch_set(p: LuGreParams, m: float, signs: dict[str, int]) -> LuGreParams:
    values = p.as_dict()
    for name in ("Fc", "Fs", "vs", "sigma0", "sigma1", "sigma2"):
        values[name] *= 1.0 + signs[name] * m
    values["Fs"] = max(values["Fs"], values["Fc"])
    return LuGreParams(**values)


def mismatch_friction(params: FrictionParams, m: float, signs: dict[str, int]) -> FrictionParams:
    if isinstance(params, DirectionalParams):
        return DirectionalParams(_mismatch_set(params.forward, m, signs),
                                 _mismatch_set(params.reverse, m, signs))
    return _mismatch_set(params, m, signs)


def mismatched(cfg: Config, m: float, signs: dict[str, int] | None = None,
               kt_m: float = 0.0) -> Config:
    """The config with the controller believing the plant's parameters off by ±m (Kt by kt_m)."""
    signs = signs or PATTERN
    ctrl = cfg.controller
    changes: dict[str, Any] = {
        "friction": mismatch_friction(cfg.plant.friction, m, signs),
        "J": cfg.plant.J * (1.0 + signs["J"] * m),
        "Kt": cfg.plant.Kt * (1.0 + signs["Kt"] * kt_m),
    }
    schedule = getattr(ctrl, "schedule", None)
    if schedule is not None:
        sets = tuple(dataclasses.replace(s, friction=mismatch_friction(s.friction, m, signs))
                     for s in schedule.sets)
        changes["schedule"] = dataclasses.replace(schedule, sets=sets)
    return dataclasses.replace(cfg, controller=dataclasses.replace(ctrl, **changes))


def run_matrix(cfg: Config, scenarios, modes, out: Path, seed: int = 1,
               duration_scale: float = 1.0, progress=None,
               spec: ExecutorSpec | None = None) -> dict[str, dict[str, dict]]:
    """results[scenario][mode] = summary dict (lockstep runs, no plots), on the executor of spec."""
    runs = [SimRun(cfg, sc, out / sc / mode, mode, cfg.scenario(sc).duration_s * duration_scale, seed)
            for sc in scenarios for mode in modes]
    if progress:
        progress(f"{len(runs)} runs")
    results: dict[str, dict[str, dict]] = {sc: {} for sc in scenarios}
    for run, summary in zip(runs, run_sims(runs, spec)):
        results[run.scenario][run.compensation] = summary
    return results


def _ratio(a: float, b: float) -> float:
    return a / b if (b and math.isfinite(a) and math.isfinite(b)) else math.nan


def format_table(results: dict[str, dict[str, dict]]) -> str:
    """A table per scenario: metrics per mode, rms ratios against off and oracle."""
    lines = []
    for sc, per_mode in results.items():
        off = per_mode.get("off", {}).get("rms_error_rad", math.nan)
        oracle = per_mode.get("oracle", {}).get("rms_error_rad", math.nan)
        lines.append(f"{sc}  (off/oracle rms = {_ratio(off, oracle):.3g})")
        lines.append(f"  {'mode':<15}{'rms µrad':>10}{'max µrad':>10}{'ripple':>9}{'rev.peak µrad':>15}"
                     f"{'off/mode':>10}{'mode/oracle':>12}{'Fc_hat N·m':>11}  faults")
        for mode, s in per_mode.items():
            rms = s["rms_error_rad"]
            lines.append(
                f"  {mode:<15}{rms * 1e6:10.3f}{s['max_error_rad'] * 1e6:10.2f}"
                f"{s['velocity_ripple']:9.3g}{s['reversal_peak_error_rad'] * 1e6:15.2f}"
                f"{_ratio(off, rms):10.2f}{_ratio(rms, oracle):12.2f}"
                f"{s.get('fc_hat_final_nm', math.nan):11.4g}  {len(s['faults'])}")
    return "\n".join(lines)


def drift_fc_error(cfg: Config, summary: dict) -> float:
    """Relative error of the final Fc estimate against the plant's true Fc at the end."""
    from .plant import profile_value

    sc = cfg.scenario("drift")
    p = cfg.plant.friction
    fc0 = p.forward.Fc if isinstance(p, DirectionalParams) else p.Fc
    profile = sc.fc_profile if sc.fc_profile is not None else cfg.plant.fc_profile
    true_fc = fc0 * profile_value(profile, summary["duration_s"])
    return (summary["fc_hat_final_nm"] - true_fc) / true_fc


def goal_lines(cfg: Config, results: dict[str, dict[str, dict]]) -> list[str]:
    """The issue's goals, as measured in this run."""
    lines = []
    adaptive = "lugre_adaptive"
    for sc in ("creep", "reversal"):
        r = results.get(sc, {})
        if adaptive in r and "off" in r and "oracle" in r:
            a, off, orc = (r[m]["rms_error_rad"] for m in (adaptive, "off", "oracle"))
            static = [r[m]["rms_error_rad"] for m in ("coulomb", "stribeck") if m in r]
            best = min(static) if static else math.nan
            lines.append(f"goal {sc}: {adaptive}/oracle {a / orc:.2f} (≤ 1.5), off/{adaptive} "
                         f"{off / a:.1f} (≥ 10; off/oracle {off / orc:.1f}), best static/{adaptive} "
                         f"{best / a:.2f} (≥ 3; best static/oracle {best / orc:.2f})")
    if "drift" in results and adaptive in results["drift"]:
        err = drift_fc_error(cfg, results["drift"][adaptive])
        lines.append(f"goal drift: Fc estimate at the end off the true Fc by {err:+.1%} (within ±5 %)")
    if "schedule" in results and adaptive in results["schedule"]:
        s = results["schedule"][adaptive]
        bound = cfg.controller.schedule.max_ff_step_nm if cfg.controller.schedule else math.inf
        lines.append(f"goal schedule: largest parameter-induced feedforward step "
                     f"{s['max_ff_param_step_nm']:.3g} N·m per tick (bound {bound:g})")
    worse = [f"{sc}/{m}" for sc, r in results.items() for m in ("lugre", adaptive)
             if m in r and "off" in r and r[m]["rms_error_rad"] > r["off"]["rms_error_rad"]]
    lines.append("goal never worse than off: " + ("met" if not worse else "NOT met: " + ", ".join(worse)))
    return lines


def with_believed_friction(cfg: Config, friction: FrictionParams) -> Config:
    """The controller believes ``friction`` (the first schedule set too: it is the same table)."""
    ctrl = cfg.controller
    changes: dict[str, Any] = {"friction": friction}
    if ctrl.schedule is not None:
        sets = (dataclasses.replace(ctrl.schedule.sets[0], friction=friction),) + ctrl.schedule.sets[1:]
        changes["schedule"] = dataclasses.replace(ctrl.schedule, sets=sets)
    return dataclasses.replace(cfg, controller=dataclasses.replace(ctrl, **changes))


def identified_vs_true(cfg: Config, identified: FrictionParams, out: Path,
                       scenarios=("creep", "reversal", "step"), seed: int = 1,
                       spec: ExecutorSpec | None = None) -> dict[str, tuple[float, float]]:
    """rms error of lugre_adaptive with the identified set and with the plant's true set."""
    sets = (("true", cfg.plant.friction), ("identified", identified))
    runs = [SimRun(with_believed_friction(cfg, f), sc, out / sc / name, "lugre_adaptive", None, seed)
            for sc in scenarios for name, f in sets]
    rms = [s["rms_error_rad"] for s in run_sims(runs, spec)]
    return {sc: (rms[2 * i], rms[2 * i + 1]) for i, sc in enumerate(scenarios)}


def random_plant(cfg: Config, rng: random.Random, m: float) -> Config:
    """A BRIEF §5 randomized plant, and a controller mismatched by ±m with random signs."""
    nominal = cfg.plant.friction
    base = nominal.forward if isinstance(nominal, DirectionalParams) else nominal
    fs = base.Fs * rng.uniform(0.5, 1.5)
    fc = fs * rng.uniform(0.6, 0.9)
    vs = 10 ** rng.uniform(-4, -1)
    # keep the plant passive: sigma1 limited by sigma2·Fc/(Fs − Fc)
    sigma1 = min(base.sigma1, base.sigma2 * fc / (fs - fc))
    plant_f = LuGreParams(Fc=fc, Fs=fs, vs=vs, sigma0=base.sigma0, sigma1=sigma1,
                          sigma2=base.sigma2, delta=base.delta)
    # the shipped schedule's sets describe the nominal table, not this random one: none here
    cfg = dataclasses.replace(cfg, plant=dataclasses.replace(cfg.plant, friction=plant_f),
                              controller=dataclasses.replace(cfg.controller, schedule=None))
    signs = {k: rng.choice((-1, 1)) for k in PATTERN}
    return mismatched(cfg, m, signs)


def monte_carlo(cfg: Config, n: int, m: float, out: Path, seed: int, modes, scenarios,
                duration_s: float, spec: ExecutorSpec | None = None) -> dict[str, Any]:
    rng = random.Random(seed)
    case_cfgs = [random_plant(cfg, rng, m) for _ in range(n)]  # drawn in order: same plants for any executor
    runs = [SimRun(case_cfg, sc, out / f"mc{i}" / sc / mode, mode, duration_s, seed + i)
            for i, case_cfg in enumerate(case_cfgs) for sc in scenarios for mode in modes]
    summaries = iter(run_sims(runs, spec))
    cases = []
    for i, case_cfg in enumerate(case_cfgs):
        p = case_cfg.plant.friction
        row: dict[str, Any] = {"Fc": p.Fc, "Fs": p.Fs, "vs": p.vs}
        for sc in scenarios:
            for mode in modes:
                s = next(summaries)
                row[f"{sc}/{mode}"] = s["rms_error_rad"]
                row[f"{sc}/{mode}/faults"] = len(s["faults"])
        cases.append(row)
        print(f"  case {i + 1}/{n}: Fc {p.Fc:.3f} Fs {p.Fs:.3f} vs {p.vs:.2e}  " + "  ".join(
            f"{sc}/{mode} {row[f'{sc}/{mode}'] * 1e6:.3f}" for sc in scenarios for mode in modes))
    summary: dict[str, Any] = {"cases": cases}
    for sc in scenarios:
        for mode in modes:
            ratios = np.array([c[f"{sc}/{mode}"] / c[f"{sc}/off"] for c in cases])
            summary[f"{sc}/{mode}"] = {
                "median_ratio_to_off": float(np.median(ratios)),
                "worst_ratio_to_off": float(np.max(ratios)),
                "cases_worse_than_off": int(np.sum(ratios > 1.0)),
                "faults": int(sum(c[f"{sc}/{mode}/faults"] for c in cases)),
            }
    return summary


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="frictionctl bench compensation",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--config", default="turntable")
    parser.add_argument("--scenarios", default=",".join(SCENARIOS))
    parser.add_argument("--modes", default=",".join(MODES))
    parser.add_argument("--mismatch", type=float, default=0.2, help="relative error of every parameter")
    parser.add_argument("--mismatch-sign", type=int, choices=(1, -1), default=1)
    parser.add_argument("--kt-mismatch", type=float, default=0.0,
                        help="relative error of the believed torque constant (default 0)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--duration-scale", type=float, default=1.0)
    parser.add_argument("--monte-carlo", type=int, default=0, metavar="N")
    parser.add_argument("--mc-duration", type=float, default=4.0, help="seconds per Monte Carlo run")
    parser.add_argument("--out", default="bench-out")
    add_executor_arguments(parser)
    args = parser.parse_args(argv)
    spec = spec_from_args(args)
    t_start = time.perf_counter()
    cfg = load_config(resolve_config_path(args.config))
    scenarios = [s for s in args.scenarios.split(",") if s]
    modes = [m for m in args.modes.split(",") if m]
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    signs = {k: v * args.mismatch_sign for k, v in PATTERN.items()}
    bench_cfg = mismatched(cfg, args.mismatch, signs, args.kt_mismatch)
    print(f"plant: {args.config}; controller friction parameters and J off by ±{args.mismatch:.0%} "
          f"(sign {args.mismatch_sign:+d}), Kt by {args.kt_mismatch:.0%}; seed {args.seed}")
    tty = sys.stderr.isatty()
    results = run_matrix(bench_cfg, scenarios, modes, out, args.seed, args.duration_scale,
                         progress=lambda s: tty and print(f"\r  running {s:<30}", end="",
                                                          file=sys.stderr, flush=True), spec=spec)
    if tty:
        print("\r" + " " * 45 + "\r", end="", file=sys.stderr)
    print(format_table(results))
    for line in goal_lines(cfg, results):
        print(line)
    png = plot_comparison(results, out / "compensation.png")
    report: dict[str, Any] = {"mismatch": args.mismatch, "seed": args.seed, "results": results}
    if args.monte_carlo:
        print(f"Monte Carlo: {args.monte_carlo} randomized plants (BRIEF §5), ±{args.mismatch:.0%} mismatch")
        mc = monte_carlo(cfg, args.monte_carlo, args.mismatch, out / "mc", args.seed,
                         modes, [s for s in ("creep", "reversal") if s in scenarios] or ["creep"],
                         args.mc_duration, spec)
        for key, val in mc.items():
            if key != "cases":
                print(f"  {key:<28} median {val['median_ratio_to_off']:.3f}× off   worst "
                      f"{val['worst_ratio_to_off']:.3f}× off   worse than off in "
                      f"{val['cases_worse_than_off']}/{args.monte_carlo}   faults {val['faults']}")
        report["monte_carlo"] = mc
    # what depends on the machine and the executor lives under "timing" alone: the rest of the
    # file is the same for any --jobs or --cluster
    per_run = {}
    for sc, per_mode in results.items():
        for mode, summary in per_mode.items():
            per_mode[mode], per_run[f"{sc}/{mode}"] = split_timing(summary)
    report["timing"] = {"executor": spec.description, "wall_s": time.perf_counter() - t_start,
                        "runs": per_run}
    (out / "results.json").write_text(json.dumps(report, indent=2, default=str))
    print(f"plot: {png}; results: {out / 'results.json'}")
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
