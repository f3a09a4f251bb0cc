"""Loop benchmark (``frictionctl bench loop``): a command that prints figures, not a test.

1. Lockstep realtime factor of a 60 s creep run at 1 kHz, beside the same-process cost of the
   plant alone (the baseline a loop cannot beat) — goal ≥ 50×.
2. Per-tick controller compute time p50/p99 (estimate + control + safety; no I/O) — goal
   p99 ≤ 50 µs.
3. A paced real-clock run at 1 kHz (sim backend on the monotonic clock): lateness p50/p99/p99.9/
   max and overruns, printed beside ``cyclictest`` (Debian rt-tests) run in the same command
   when it is installed — goal: our p99 no worse than cyclictest's.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import numpy as np

from controller.config import Config, load_config, resolve_config_path


def _lockstep(cfg: Config, seconds: float, out: Path) -> dict:
    from hil.scenarios import sim_run
    from controller.runlog import read_log

    summary = sim_run(cfg, "creep", out, compensation=None, duration_s=seconds, seed=1,
                      plot=False)
    compute = read_log(out / "run.fctl")["compute_us"]
    return {"summary": summary, "compute_us": compute[np.isfinite(compute)]}


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


def _paced(cfg: Config, seconds: float, out: Path) -> dict:
    from controller.clock import RealClock
    from controller.reference import make_reference
    from controller.rt import realtime_setup
    from controller.runner import Session, run_session
    from hil.sim_backend import SimBackend

    messages = realtime_setup(cfg.loop)
    clock = RealClock(cfg.loop.spin_s)
    scenario = cfg.scenario("creep")
    backend = SimBackend(cfg, clock, seed=1, scenario=scenario)
    ref = make_reference(scenario.reference, cfg.plant.encoder.rad_per_count, seconds)
    summary = run_session(cfg, Session(backend, clock, ref, seconds, "creep", 1), out, plot=False)
    summary["rt_messages"] = messages
    return summary


def cyclictest_latency(seconds: float, interval_us: int = 1000) -> dict | None:
    """cyclictest's wake-up latency percentiles [µs] from its histogram, or None if absent."""
    exe = shutil.which("cyclictest")
    if exe is None:
        return None
    loops = int(seconds * 1e6 / interval_us)
    proc = subprocess.run([exe, "-q", "-m", "-i", str(interval_us), "-l", str(loops), "-h", "5000"],
                          capture_output=True, text=True, timeout=seconds * 3 + 30)
    hist: list[tuple[int, int]] = []
    overflows = 0
    max_us = 0
    for line in proc.stdout.splitlines():
        if line.startswith("# Histogram Overflows:"):
            overflows = int(line.split(":")[1].split()[0])
        elif line.startswith("# Max Latencies:"):
            max_us = int(line.split(":")[1].split()[0])
        elif line and line[0].isdigit():
            lat, count = line.split()[:2]
            if int(count):
                hist.append((int(lat), int(count)))
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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="frictionctl bench loop", description=__doc__.splitlines()[0])
    parser.add_argument("--config", default="turntable")
    parser.add_argument("--lockstep-seconds", type=float, default=60.0)
    parser.add_argument("--paced-seconds", type=float, default=30.0)
    parser.add_argument("--repeat", type=int, default=3, help="lockstep runs (best is reported)")
    args = parser.parse_args(argv)
    cfg = load_config(resolve_config_path(args.config))
    rate = cfg.loop.rate_hz
    with tempfile.TemporaryDirectory() as tmp:
        ticks = int(args.lockstep_seconds * rate)
        runs, plants = [], []
        for i in range(args.repeat):  # a shared machine is noisy: best of N, range shown
            runs.append(_lockstep(cfg, args.lockstep_seconds, Path(tmp) / f"lockstep{i}"))
            plants.append(_plant_only(cfg, ticks))
        lock = min(runs, key=lambda r: r["summary"]["wall_s"])
        plant_s = min(plants)
        s = lock["summary"]
        c = lock["compute_us"]
        factors = sorted(r["summary"]["realtime_factor"] for r in runs)
        print(f"lockstep creep {args.lockstep_seconds:g} s at {rate:g} Hz, best of {args.repeat}")
        print(f"  wall {s['wall_s']:.3f} s   realtime factor {s['realtime_factor']:.1f}x "
              f"(range {factors[0]:.1f}-{factors[-1]:.1f}x)   (goal >= 50x)")
        print(f"  baseline: plant alone {plant_s:.3f} s = {ticks * (1 / rate) / plant_s:.1f}x realtime;"
              f" the loop costs {s['wall_s'] / plant_s:.2f}x the plant alone")
        print(f"  controller compute per tick: p50 {np.percentile(c, 50):.1f} us   "
              f"p99 {np.percentile(c, 99):.1f} us   max {np.max(c):.1f} us   (goal p99 <= 50 us)")
        if args.paced_seconds > 0:
            paced = _paced(cfg, args.paced_seconds, Path(tmp) / "paced")
            print(f"paced real clock {args.paced_seconds:g} s at {rate:g} Hz (sim backend)")
            for m in paced["rt_messages"]:
                print(f"  note: {m}")
            print(f"  lateness p50 {paced['p50_late_us']:.1f} us   p99 {paced['p99_late_us']:.1f} us   "
                  f"p99.9 {paced['p999_late_us']:.1f} us   max {paced['max_late_us']:.1f} us   "
                  f"overruns {paced['overruns']}   faults {len(paced['faults'])}")
            cyc = cyclictest_latency(args.paced_seconds, int(round(1e6 / rate)))
            if cyc is None:
                print("  cyclictest: not installed (Debian package rt-tests); no comparison")
            elif "error" in cyc:
                print(f"  cyclictest failed: {cyc['error']}")
            else:
                print(f"  cyclictest (same machine, same command): p50 {cyc['p50_us']:.0f} us   "
                      f"p99 {cyc['p99_us']:.0f} us   p99.9 {cyc['p999_us']:.0f} us   max {cyc['max_us']:.0f} us")
                ratio = paced["p99_late_us"] / max(cyc["p99_us"], 1.0)
                print(f"  p99 lateness ratio ours/cyclictest: {ratio:.2f} (goal <= 1)")
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
