"""Replay benchmark (``frictionctl bench replay``): a command that prints figures, not a test.

1. Replay speed on a ``lugre_adaptive`` log (the observer path; reversal scenario, recorded in the
   same command): the estimator-and-control loop's realtime factor, best of N with the range
   (goal ≥ 200×), and the command's whole wall time without the plot (reading the log, writing
   replay.csv and summary.json). ``--compare-pure`` repeats it in a child process with
   ``FRICTIONCTL_PURE_PYTHON=1`` and prints compiled over pure-Python (goal ≥ 3×).
2. ``--batch K``: K replays of that log through the executor, in this process (``--jobs 1``) and on
   ``--jobs`` local processes, one after the other in the same command: the speed-up (goal ≥ 1.7×
   with 2 jobs on 2 cores) and whether the results are identical.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from controller.config import load_config, resolve_config_path

# what differs between two runs of the same replay: its timing, and paths in its own out dir
TIMING_KEYS = ("replay_wall_s", "replay_realtime_factor", "log", "report", "proposed_params")


def record_log(config: str, seconds: float, out: Path) -> Path:
    from hil.scenarios import sim_run

    cfg = load_config(resolve_config_path(config))
    sim_run(cfg, "reversal", out, compensation="lugre_adaptive", duration_s=seconds, seed=1, plot=False)
    return out / "run.fctl"


def replay_figures(log: Path, repeat: int, out: Path) -> dict[str, Any]:
    from controller.compiled import active_path
    from hil.replay import replay

    factors, walls = [], []
    for i in range(repeat):
        t0 = time.perf_counter()
        summary = replay(log, out / f"r{i}", plot=False)
        walls.append(time.perf_counter() - t0)
        factors.append(summary["replay_realtime_factor"])
    return {"path": active_path(), "ticks": summary["ticks"], "duration_s": summary["duration_s"],
            "realtime_factor": max(factors), "range": [min(factors), max(factors)],
            "command_wall_s": min(walls), "max_abs_diff_friction_hat_nm": summary["max_abs_diff_friction_hat_nm"]}


def pure_python_figures(log: Path, repeat: int) -> dict[str, Any]:
    env = dict(os.environ, FRICTIONCTL_PURE_PYTHON="1")
    proc = subprocess.run([sys.executable, "-m", "hil.bench_replay", "--log", str(log), "--repeat", str(repeat),
                           "--figures-json"], capture_output=True, text=True, env=env, check=True)
    return json.loads(proc.stdout)


def batch_figures(log: Path, copies: int, jobs: int, out: Path) -> dict[str, Any]:
    from controller.executor import ExecutorSpec, run_map
    from controller.runner import _json_safe  # compared as written (NaN: null)
    from hil.replay import ReplayTask, replay_task

    walls, results = {}, {}
    for n in (1, jobs):
        tasks = [ReplayTask(log, out / f"jobs{n}" / str(k), plot=False) for k in range(copies)]
        t0 = time.perf_counter()
        summaries = run_map(replay_task, tasks, ExecutorSpec(jobs=n))
        walls[n] = time.perf_counter() - t0
        results[n] = [_json_safe({k: v for k, v in s.items() if k not in TIMING_KEYS})
                      for s in summaries]
    return {"copies": copies, "jobs": jobs, "wall_jobs1_s": walls[1], "wall_jobsN_s": walls[jobs],
            "speedup": walls[1] / walls[jobs], "identical": results[1] == results[jobs]}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="frictionctl bench replay", description=__doc__.splitlines()[0])
    parser.add_argument("--config", default="turntable")
    parser.add_argument("--seconds", type=float, default=60.0, help="length of the recorded log")
    parser.add_argument("--log", default=None, help="replay this log instead of recording one")
    parser.add_argument("--repeat", type=int, default=3, help="replays (best is reported)")
    parser.add_argument("--compare-pure", action="store_true",
                        help="also replay on the pure-Python modules (child process)")
    parser.add_argument("--batch", type=int, default=0, metavar="K", help="K replays with --jobs 1 and N")
    parser.add_argument("--jobs", type=int, default=2, help="workers of the --batch comparison")
    parser.add_argument("--figures-json", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        log = Path(args.log) if args.log else record_log(args.config, args.seconds, root / "log")
        fig = replay_figures(log, args.repeat, root / "replays")
        if args.figures_json:
            print(json.dumps(fig))
            return 0
        met = "met" if fig["realtime_factor"] >= 200 else "NOT met"
        print(f"replay of a lugre_adaptive reversal log, {fig['duration_s']:g} s ({fig['ticks']} ticks), "
              f"best of {args.repeat}; hot path: {fig['path']}")
        print(f"  realtime factor {fig['realtime_factor']:.1f}x (range {fig['range'][0]:.1f}-"
              f"{fig['range'][1]:.1f}x; goal >= 200x: {met}); whole command without the plot "
              f"{fig['command_wall_s']:.2f} s; max |logged - replayed| {fig['max_abs_diff_friction_hat_nm']:.3g} N·m")
        if args.compare_pure:
            pure = pure_python_figures(log, args.repeat)
            ratio = fig["realtime_factor"] / pure["realtime_factor"]
            print(f"  same in a child process on {pure['path']}: {pure['realtime_factor']:.1f}x; this run "
                  f"over it {ratio:.2f}x (goal >= 3x for compiled: {'met' if ratio >= 3 else 'NOT met'})")
        if args.batch:
            b = batch_figures(log, args.batch, args.jobs, root / "batch")
            print(f"batch of {b['copies']} replays: --jobs 1 {b['wall_jobs1_s']:.2f} s, --jobs {b['jobs']} "
                  f"{b['wall_jobsN_s']:.2f} s: {b['speedup']:.2f}x (goal >= 1.7x with 2 jobs: "
                  f"{'met' if b['speedup'] >= 1.7 else 'NOT met'}); results identical: {b['identical']}")
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
