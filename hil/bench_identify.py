"""Commissioning measured end to end: identify on a plant the controller does not know, apply the
identified set as ``--params`` would, and compare ``lugre_adaptive`` with the oracle (the
compensator fed the plant's true friction state) on creep, reversal and scan.

Used by ``frictionctl identify --check`` (the plant of the config) and by
``frictionctl bench compensation --identify`` (the ``tilted``, ``damped`` and ``stiff`` tables
and Monte Carlo plants, each identified starting from the shipped believed set, as a new user
would).
Both map picklable tasks with :func:`controller.executor.run_map`.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from controller.config import Config, believing
from controller.executor import ExecutorSpec, run_map
from controller.params_file import IdentifiedParams, apply_params, load_params_file

from .bench_compensation import GOAL_SCENARIOS, build_tasks, run_one

CHECK_MODES = ("lugre_adaptive", "oracle")


@dataclass(frozen=True)
class IdentifyTask:
    """One identification on the simulated plant of ``cfg`` (prior: cfg.controller)."""

    case: str
    cfg: Config
    seed: int
    out: str


def run_identify(task: IdentifyTask) -> dict[str, Any]:
    """Identify (sim backend) → the params.yaml path and the identified values (picklable)."""
    from controller.clock import SimClock

    from .identify import identify
    from .sim_backend import SimBackend

    clock = SimClock()
    backend = SimBackend(task.cfg, clock, seed=task.seed)
    try:
        result = identify(task.cfg, backend, clock, task.out, plot=False)
    finally:
        backend.close()
    return {"case": task.case, "params": result.files["params"], "J": result.J,
            "wall_s": result.wall_s, "warnings": result.diagnostics.get("warnings", [])}


def with_identified(cfg: Config, params_path: str | Path) -> tuple[Config, IdentifiedParams]:
    """``cfg`` with the identified set applied exactly as ``--params`` applies it."""
    params = load_params_file(params_path)
    return apply_params(cfg, params), params


def check_identified(cfg: Config, params_path: str | Path, out: Path, *, seed: int = 1,
                     spec: ExecutorSpec | None = None, duration_scale: float = 1.0
                     ) -> dict[str, dict[str, float]]:
    """On the config's simulated plant: lugre_adaptive with the identified set (applied as
    ``--params``), lugre_adaptive with the plant's true set and J, and the oracle.
    Returns {scenario: {"identified": rms, "true": rms, "oracle": rms, "vs_oracle": ratio,
    "vs_true": ratio}} (scan: the second half)."""
    identified, _ = with_identified(cfg, params_path)
    true = dataclasses.replace(cfg, controller=believing(cfg.controller, cfg.plant.friction,
                                                         J=cfg.plant.J))
    tasks = (build_tasks([("identified", "", identified)], out, seed, duration_scale, CHECK_MODES)
             + build_tasks([("true", "", true)], out, seed, duration_scale, ("lugre_adaptive",)))
    results = run_map(run_one, tasks, spec)
    ix = {(r["case"], r["scenario"], r["mode"]): r for r in results}
    report = {}
    for sc in GOAL_SCENARIOS:
        key = "second_half_rms_rad" if sc == "scan" else "rms_error_rad"
        a = ix[("identified", sc, "lugre_adaptive")][key]
        t = ix[("true", sc, "lugre_adaptive")][key]
        o = ix[("identified", sc, "oracle")][key]
        report[sc] = {"identified": a, "true": t, "oracle": o, "vs_oracle": a / o, "vs_true": a / t}
    return report


def identified_cases(cases: list[tuple[str, str, Config]], shipped: Config, out: Path, seed: int,
                     spec: ExecutorSpec | None = None) -> list[tuple[str, str, Config]]:
    """For each case's plant: identify starting from the shipped believed set (friction and J),
    then the case's config believing the identified set. Names ``<case>/id``, kind
    ``identified`` (the yardstick, the Monte Carlo plants believed exactly, is
    :func:`hil.bench_compensation.believed_exactly`)."""
    starts = [(name, dataclasses.replace(c, controller=believing(
        c.controller, shipped.controller.friction, J=shipped.controller.J)))
        for name, _, c in cases]
    tasks = [IdentifyTask(name, c, seed, str(out / "identify" / name)) for name, c in starts]
    found = run_map(run_identify, tasks, spec)
    return [(f"{name}/id", "identified", with_identified(c, f["params"])[0])
            for (name, c), f in zip(starts, found)]


def exact_counterpart(name: str, kinds: dict[str, str]) -> str | None:
    """The case believing the same plant exactly, for an identified case ``<plant>/id``."""
    plant = name.removesuffix("/id")
    for candidate in (plant, f"{plant}/exact"):
        if kinds.get(candidate) == "exact":
            return candidate
    return None


__all__ = ["IdentifyTask", "check_identified", "exact_counterpart", "identified_cases", "run_identify",
           "with_identified"]
