"""The compensation benchmark is a plain map of picklable tasks through one function: runs are
deterministic per seed, and every goal line says met or NOT met."""

from __future__ import annotations

import pickle
import random

from hil.bench_compensation import (BENCH_MODES, Task, build_cases, build_tasks, goal_report,
                                    random_belief, random_plant, run_one)

from .conftest import reference_config


def _same(a: dict, b: dict) -> bool:
    """Equal, with NaN equal to NaN (a compiled build makes a new NaN object each time, so the
    identity shortcut of == does not hide it)."""
    def same(x, y) -> bool:
        return x == y or (isinstance(x, float) and isinstance(y, float) and x != x and y != y)
    return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)


def test_tasks_pickle_and_run_one_is_deterministic(tmp_path):
    cfg = reference_config()
    cases = build_cases(cfg, 0.2, 0.0, monte_carlo=1, seed=3)
    tasks = build_tasks(cases[:1], tmp_path, seed=3, duration_scale=0.05)
    assert len(tasks) == 3 * len(BENCH_MODES)
    task = pickle.loads(pickle.dumps(tasks[2]))
    assert isinstance(task, Task)
    a, b = run_one(task), run_one(tasks[2])
    assert _same(a, b) and a["rms_error_rad"] > 0
    results = list(map(run_one, tasks))
    lines = goal_report(cases[:1], results)
    assert any("reference table" in line for line in lines)
    assert all(("met" in line) or ("not measured" in line) for line in lines)


def test_monte_carlo_plants_follow_the_ranges():
    cfg = reference_config()
    rng = random.Random(7)
    for _ in range(20):
        c = random_belief(random_plant(cfg, rng), rng)
        p, b = c.plant.friction, c.controller.friction
        assert 0.6 * p.Fs <= p.Fc <= 0.9 * p.Fs + 1e-12 and 1e-4 <= p.vs <= 1e-1
        assert 1e3 <= p.sigma0 <= 1e5
        zeta = p.sigma1 / (2 * (p.sigma0 * cfg.plant.J) ** 0.5)
        assert 0.1 <= zeta <= 2.0
        for name in ("Fc", "vs", "sigma0", "sigma1", "sigma2"):
            err = abs(getattr(b, name) / getattr(p, name) - 1)
            assert 0.15 - 1e-9 <= err <= 0.3 + 1e-9, name
        assert b.Fs >= b.Fc


def test_the_table_has_a_row_for_every_run_even_without_the_oracle():
    """A subset of modes or scenarios (``--modes off,lugre_adaptive --scenarios creep,step``)
    still prints its figures; the ratios to a mode that did not run are nan."""
    from hil.bench_compensation import format_results

    def run(case: str, scenario: str, mode: str, rms: float) -> dict:
        return {"case": case, "scenario": scenario, "mode": mode, "rms_error_rad": rms,
                "breakaway_rms_rad": rms, "steady_rms_rad": rms, "second_half_rms_rad": rms,
                "reidentify": False}

    results = [run("reference", sc, m, rms) for sc, rms in (("creep", 2e-6), ("step", 3e-6))
               for m, rms in (("off", 4 * rms), ("lugre_adaptive", rms))]
    lines = format_results([("reference", "exact", None)], results).splitlines()
    assert len(lines) == 3 and lines[0].split()[2:4] == ["off", "lugre_adaptive"]
    creep, step = (line.split() for line in lines[1:])
    assert creep[:4] == ["reference", "creep", "8.000", "2.000"] and creep[4] == "nan"
    assert step[:4] == ["reference", "step", "12.000", "3.000"]
