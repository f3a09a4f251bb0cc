"""Scenario runs on the simulated turntable (lockstep), shared by the CLI, the demo and the
benchmarks."""

from __future__ import annotations

from pathlib import Path

from controller.clock import SimClock
from controller.config import Config
from controller.reference import make_reference
from controller.runner import Session, run_session

from .fault_injection import arm, record_injected
from .sim_backend import SimBackend


def sim_run(cfg: Config, scenario_name: str, out: Path, *, compensation: str | None, duration_s: float | None,
            seed: int, plot: bool = True, progress=None) -> dict:
    """One lockstep simulation run of a scenario (shared by sim, demo and the benchmarks)."""
    scenario = cfg.scenario(scenario_name)
    duration = duration_s if duration_s is not None else scenario.duration_s
    if duration <= 0:
        raise ValueError(f"--duration: must be > 0, got {duration}")
    clock = SimClock()
    backend = SimBackend(cfg, clock, seed=seed, scenario=scenario)
    trigger = arm(scenario_name, scenario.faults, "sim", backend, clock, cfg.loop.dt_s)
    reference = make_reference(scenario.reference, cfg.plant.encoder.rad_per_count, duration)
    session = Session(backend=backend, clock=trigger.loop_clock, reference=reference, duration_s=duration,
                      scenario=scenario_name, seed=seed, compensation=compensation)
    summary = run_session(cfg, session, out, plot=plot, progress=progress)
    return record_injected(out, summary, trigger)
