"""Loop benchmark (``frictionctl bench loop``): a command that prints figures, not a test.

1. Lockstep realtime factor at 1 kHz of two paths, each best of N with the range:
   ``creep / off`` (PID alone: the loop's own cost; goal ≥ 100×) and ``reversal /
   lugre_adaptive`` (the observer, Fc adapter, scheduler and drift monitor; goal ≥ 50×). Beside
   each, the same-process cost of the plant alone for the same ticks (the floor under any sim run)
   and the loop's cost over it. ``--compare-pure`` repeats the lockstep part in a child process
   with ``FRICTIONCTL_PURE_PYTHON=1`` and prints compiled over pure-Python (goal ≥ 3×).
2. Per-tick controller compute time p50/p99 (estimate + control + safety; no I/O) — goal
   p99 ≤ 50 µs.
3. A paced real-clock run at 1 kHz (sim backend on the monotonic clock): lateness p50/p99/p99.9/
   max and overruns, beside ``cyclictest`` (Debian rt-tests) run in the same command at the same
   scheduling priority: both SCHED_FIFO at ``--priority`` where permitted, both SCHED_OTHER
   (said so) where not. The loop busy-waits the last ``loop.spin_s`` of each period, which hides
   wake-up delays shorter than that: the comparison means something only at equal priority.
   Beside it, the wake-up delay of the loop's own OS sleep before that spin (what cyclictest
   measures for its thread, and what the spin window must absorb).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from controller.config import Config, load_config, resolve_config_path

#: (scenario, compensation) → realtime-factor goal
CASES: dict[tuple[str, str], float] = {("creep", "off"): 100.0, ("reversal", "lugre_adaptive"): 50.0}


def _lockstep(cfg: Config, scenario: str, mode: str, seconds: float, out: Path) -> dict:
    from controller.runlog import read_log
    from hil.scenarios import sim_run

    summary = sim_run(cfg, scenario, out, compensation=mode, duration_s=seconds, seed=1, plot=False)
    compute = read_log(out / "run.fctl")["compute_us"]
    return {"wall_s": summary["wall_s"], "realtime_factor": summary["realtime_factor"],
            "faults": len(summary["faults"]), "compute_us": compute[np.isfinite(compute)]}


def _plant_only(cfg: Config, ticks: int) -> float:
    """Wall seconds of the plant alone for ``ticks`` periods (the floor under any sim run)."""
    from hil.plant import Turntable

    plant = Turntable(cfg.plant, seed=1)
    dt = cfg.loop.dt_s
    t0 = time.perf_counter()
    for _ in range(ticks):
        plant.advance(0.3, dt)
        plant.measure()
    return time.perf_counter() - t0


def lockstep_figures(cfg: Config, seconds: float, repeat: int) -> dict[str, Any]:
    """Best of ``repeat`` lockstep runs per case (interleaved with the plant-alone baseline, so
    both see the same machine load); JSON-ready."""
    from controller.compiled import active_path

    ticks = int(round(seconds * cfg.loop.rate_hz))
    result: dict[str, Any] = {"path": active_path(), "seconds": seconds, "repeat": repeat, "cases": {}}
    with tempfile.TemporaryDirectory() as tmp:
        for (scenario, mode), goal in CASES.items():
            runs, plants = [], []
            for i in range(repeat):
                runs.append(_lockstep(cfg, scenario, mode, seconds, Path(tmp) / f"{scenario}-{mode}-{i}"))
                plants.append(_plant_only(cfg, ticks))
            best = min(runs, key=lambda r: r["wall_s"])
            plant_s = min(plants)
            c = best["compute_us"]
            result["cases"][f"{scenario}/{mode}"] = {
                "goal": goal,
                "wall_s": best["wall_s"],
                "realtime_factor": best["realtime_factor"],
                "range": [min(r["realtime_factor"] for r in runs), max(r["realtime_factor"] for r in runs)],
                "plant_alone_s": plant_s,
                "plant_realtime_factor": seconds / plant_s,
                "loop_over_plant": best["wall_s"] / plant_s,
                "compute_p50_us": float(np.percentile(c, 50)),
                "compute_p99_us": float(np.percentile(c, 99)),
                "compute_max_us": float(np.max(c)),
                "faults": best["faults"],
            }
    return result


def print_lockstep(fig: dict[str, Any], rate_hz: float) -> None:
    print(f"lockstep {fig['seconds']:g} s at {rate_hz:g} Hz, best of {fig['repeat']}; hot path: {fig['path']}")
    for name, c in fig["cases"].items():
        met = "met" if c["realtime_factor"] >= c["goal"] else "NOT met"
        print(f"  {name:<24} realtime factor {c['realtime_factor']:6.1f}x "
              f"(range {c['range'][0]:.1f}-{c['range'][1]:.1f}x; goal >= {c['goal']:g}x: {met})")
        print(f"  {'':<24} plant alone {c['plant_realtime_factor']:.1f}x realtime; the loop costs "
              f"{c['loop_over_plant']:.2f}x the plant alone")
        print(f"  {'':<24} controller compute per tick p50 {c['compute_p50_us']:.1f} us   p99 "
              f"{c['compute_p99_us']:.1f} us   max {c['compute_max_us']:.1f} us (goal p99 <= 50 us)"
              + (f"   FAULTS {c['faults']}" if c["faults"] else ""))


def pure_python_figures(config: str, seconds: float, repeat: int) -> dict[str, Any]:
    """The lockstep figures of a child interpreter forced onto the pure-Python modules."""
    env = dict(os.environ, FRICTIONCTL_PURE_PYTHON="1")
    proc = subprocess.run([sys.executable, "-m", "hil.bench_loop", "--config", config,
                           "--lockstep-seconds", str(seconds), "--repeat", str(repeat),
                           "--lockstep-json"], capture_output=True, text=True, env=env, check=True)
    return json.loads(proc.stdout)


def _paced(cfg: Config, seconds: float, out: Path) -> dict:
    from controller.clock import RealClock
    from controller.reference import make_reference
    from controller.rt import realtime_setup
    from controller.runner import Session, run_session
    from hil.sim_backend import SimBackend

    messages = realtime_setup(cfg.loop)
    wake_log: list[float] = []
    clock = RealClock(cfg.loop.spin_s, wake_log=wake_log)
    scenario = cfg.scenario("creep")
    backend = SimBackend(cfg, clock, seed=1, scenario=scenario)
    ref = make_reference(scenario.reference, cfg.plant.encoder.rad_per_count, seconds)
    try:
        summary = run_session(cfg, Session(backend, clock, ref, seconds, "creep", 1), out, plot=False)
    finally:
        _back_to_sched_other()
    summary["rt_messages"] = messages
    wake_us = np.asarray(wake_log or [math.nan]) * 1e6  # none: every tick too late to sleep
    summary["wake"] = {"p50_us": float(np.percentile(wake_us, 50)),
                       "p99_us": float(np.percentile(wake_us, 99)), "max_us": float(wake_us.max()),
                       "beyond_spin": int(np.sum(wake_us > cfg.loop.spin_s * 1e6)),
                       "count": len(wake_log)}
    return summary


def _back_to_sched_other() -> None:
    """After the paced run: children (cyclictest) would inherit SCHED_FIFO otherwise."""
    try:
        os.sched_setscheduler(0, os.SCHED_OTHER, os.sched_param(0))
    except (OSError, AttributeError):
        pass


def fifo_permitted(priority: int) -> bool:
    """Whether this process may switch to SCHED_FIFO at ``priority`` (tried, then undone)."""
    try:
        os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(priority))
    except (OSError, AttributeError):
        return False
    _back_to_sched_other()
    return True


def cyclictest_latency(seconds: float, interval_us: int = 1000, priority: int | None = None) -> dict | None:
    """cyclictest's wake-up latency percentiles [µs] from its histogram, or None if absent.
    ``priority``: SCHED_FIFO at that priority (``-p``); None: SCHED_OTHER."""
    exe = shutil.which("cyclictest")
    if exe is None:
        return None
    loops = int(seconds * 1e6 / interval_us)
    cmd = [exe, "-q", "-m", "-i", str(interval_us), "-l", str(loops), "-h", "5000"]
    if priority is not None:
        cmd += ["-p", str(priority)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=seconds * 3 + 30)
    hist: list[tuple[int, int]] = []
    overflows = 0
    max_us = 0
    for line in proc.stdout.splitlines():
        if line.startswith("# Histogram Overflows:"):
            overflows = int(line.split(":")[1].split()[0])
        elif line.startswith("# Max Latencies:"):
            max_us = int(line.split(":")[1].split()[0])
        elif line and line[0].isdigit():
            bucket_us, count = line.split()[:2]
            if int(count):
                hist.append((int(bucket_us), int(count)))
    if not hist:
        return {"error": (proc.stderr or proc.stdout).strip().splitlines()[-1:] or ["no output"]}
    lat = np.array([h[0] for h in hist], dtype=float)
    cnt = np.array([h[1] for h in hist], dtype=float)
    if overflows:
        lat = np.append(lat, max_us)
        cnt = np.append(cnt, overflows)
    cum = np.cumsum(cnt) / cnt.sum()

    def pct(q: float) -> float:
        return float(lat[np.searchsorted(cum, q)])

    return {"p50_us": pct(0.5), "p99_us": pct(0.99), "p999_us": pct(0.999), "max_us": float(max_us)}


def paced_comparison(cfg: Config, seconds: float, priority: int, out: Path) -> None:
    rate = cfg.loop.rate_hz
    fifo = fifo_permitted(priority)
    if fifo:
        cfg = dataclasses.replace(cfg, loop=dataclasses.replace(cfg.loop, rt_priority=priority))
        policy = f"SCHED_FIFO priority {priority} (loop and cyclictest)"
    else:
        cfg = dataclasses.replace(cfg, loop=dataclasses.replace(cfg.loop, rt_priority=None))
        policy = "SCHED_OTHER for both: SCHED_FIFO is not permitted here (README 'Deployment')"
    paced = _paced(cfg, seconds, out)
    print(f"paced real clock {seconds:g} s at {rate:g} Hz (sim backend, creep), {policy}")
    for m in paced["rt_messages"]:
        print(f"  note: {m}")
    print(f"  lateness p50 {paced['p50_late_us']:.1f} us   p99 {paced['p99_late_us']:.1f} us   "
          f"p99.9 {paced['p999_late_us']:.1f} us   max {paced['max_late_us']:.1f} us   "
          f"overruns {paced['overruns']}   faults {len(paced['faults'])}"
          f"   (spin window {cfg.loop.spin_s * 1e6:.0f} us hides shorter wake-up delays)")
    w = paced["wake"]
    print(f"  the OS sleep before the spin woke late by p50 {w['p50_us']:.1f} us   p99 {w['p99_us']:.1f} us   "
          f"max {w['max_us']:.0f} us; {w['beyond_spin']} of {w['count']} wake-ups beyond the spin window "
          "(raise loop.spin_s if they are many)")
    cyc = cyclictest_latency(seconds, int(round(1e6 / rate)), priority if fifo else None)
    if cyc is None:
        print("  cyclictest: not installed (Debian package rt-tests); no comparison")
    elif "error" in cyc:
        print(f"  cyclictest failed: {cyc['error']}")
    else:
        print(f"  cyclictest (same machine, same command, same policy): p50 {cyc['p50_us']:.0f} us   "
              f"p99 {cyc['p99_us']:.0f} us   p99.9 {cyc['p999_us']:.0f} us   max {cyc['max_us']:.0f} us")
        ratio = paced["p99_late_us"] / max(cyc["p99_us"], 1.0)
        print(f"  p99 lateness ratio ours/cyclictest: {ratio:.2f} (goal <= 1: "
              f"{'met' if ratio <= 1 else 'NOT met'}); overrun fault: "
              f"{'none' if not paced['faults'] else paced['faults']}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="frictionctl bench loop", description=__doc__.splitlines()[0])
    parser.add_argument("--config", default="turntable")
    parser.add_argument("--lockstep-seconds", type=float, default=60.0)
    parser.add_argument("--repeat", type=int, default=3, help="lockstep runs per case (best is reported)")
    parser.add_argument("--compare-pure", action="store_true",
                        help="also run the lockstep part on the pure-Python modules (child process)")
    parser.add_argument("--paced-seconds", type=float, default=30.0, help="0: no paced run")
    parser.add_argument("--priority", type=int, default=80, help="SCHED_FIFO priority of the paced run")
    parser.add_argument("--lockstep-json", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    cfg = load_config(resolve_config_path(args.config))
    fig = lockstep_figures(cfg, args.lockstep_seconds, args.repeat)
    if args.lockstep_json:
        print(json.dumps(fig))
        return 0
    print_lockstep(fig, cfg.loop.rate_hz)
    if args.compare_pure:
        pure = pure_python_figures(args.config, args.lockstep_seconds, args.repeat)
        print(f"same in a child process on {pure['path']}:")
        for name, c in pure["cases"].items():
            ratio = fig["cases"][name]["wall_s"] and c["wall_s"] / fig["cases"][name]["wall_s"]
            print(f"  {name:<24} realtime factor {c['realtime_factor']:6.1f}x; this run over it "
                  f"{ratio:.2f}x (goal >= 3x for compiled: {'met' if ratio >= 3 else 'NOT met'})")
    if args.paced_seconds > 0:
        with tempfile.TemporaryDirectory() as tmp:
            paced_comparison(cfg, args.paced_seconds, args.priority, Path(tmp) / "paced")
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
