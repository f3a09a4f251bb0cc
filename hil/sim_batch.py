"""Lockstep simulation runs as batch tasks: a run is described by a picklable :class:`SimRun`
(config, scenario, mode, duration, seed, output folder) and executed by the top-level
:func:`run_sim`, so benchmarks and checks map it over many runs with
:func:`controller.executor.run_map` (in process, ``--jobs N`` processes, or ``--cluster``)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from controller.config import Config
from controller.executor import ExecutorSpec, run_map

from .scenarios import sim_run

#: summary fields that measure this machine, not the run (kept apart in results files)
TIMING_FIELDS = ("wall_s", "realtime_factor")


@dataclass(frozen=True)
class SimRun:
    cfg: Config
    scenario: str
    out: Path
    compensation: str | None
    duration_s: float | None = None  # None: the scenario's
    seed: int = 1
    plot: bool = False


def run_sim(run: SimRun) -> dict[str, Any]:
    """One lockstep run: its summary (see :func:`hil.scenarios.sim_run`)."""
    return sim_run(run.cfg, run.scenario, run.out, compensation=run.compensation,
                   duration_s=run.duration_s, seed=run.seed, plot=run.plot)


def run_sims(runs: list[SimRun], spec: ExecutorSpec | None = None) -> list[dict[str, Any]]:
    """The summaries of ``runs``, in their order, on the executor of ``spec``."""
    return run_map(run_sim, runs, spec)


def split_timing(summary: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """(the summary without its timing fields, the timing fields)."""
    return ({k: v for k, v in summary.items() if k not in TIMING_FIELDS},
            {k: summary[k] for k in TIMING_FIELDS if k in summary})
