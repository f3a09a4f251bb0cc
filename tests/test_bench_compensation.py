"""The compensation benchmark is a plain map of picklable tasks through one function: runs are
deterministic per seed, and every goal line says met or NOT met."""

from __future__ import annotations

import math
import pickle
import random

import pytest

from controller.config import load_config
from hil.bench_compensation import (BENCH_MODES, TILT_FRACTION, Task, build_cases, build_tasks,
                                    goal_report, random_belief, random_plant,
                                    resolve_config_path, run_one, tilted)

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


def test_the_tilted_case_adds_a_load_and_an_unbalance_scaled_by_the_plants_fc():
    """``tilted``: the plant's load and (rotary only) unbalance raised by TILT_FRACTION·Fc,
    friction and belief unchanged; the cases hold it exact and off like the reference."""
    cfg = reference_config()
    t = tilted(cfg)
    torque = TILT_FRACTION * cfg.plant.friction.Fc
    assert t.plant.load_torque_nm == pytest.approx(cfg.plant.load_torque_nm + torque)
    assert t.plant.unbalance_nm == pytest.approx(cfg.plant.unbalance_nm + torque)
    assert t.plant.friction == cfg.plant.friction and t.controller == cfg.controller
    stage = load_config(resolve_config_path("linear_stage"))
    ts = tilted(stage)  # an inclined stage: gravity along it, no unbalance
    assert ts.plant.load_torque_nm == pytest.approx(TILT_FRACTION * stage.plant.friction.Fc)
    assert ts.plant.unbalance_nm == 0.0
    kinds = {name: kind for name, kind, _ in build_cases(cfg, 0.2, 0.0, 0, 1)}
    assert kinds["tilted"] == "exact" and kinds["tilted±20%"] == "mismatched"


def test_loaded_monte_carlo_plants_add_a_load_and_leave_the_draws_as_they_were():
    """``--loaded``: each Monte Carlo plant again as ``<name>/loaded``, kind mc, with the same
    friction and belief and a load of at most 0.3·Fc (either sign) plus, on a rotary axis, an
    unbalance of at most 0.3·Fc; drawn from a stream of its own, so the plants without it are
    those drawn without ``--loaded``, and the loads differ from plant to plant."""
    cfg = reference_config()
    plain = build_cases(cfg, 0.2, 0.0, 8, 3)
    with_loads = build_cases(cfg, 0.2, 0.0, 8, 3, loaded=True)
    assert with_loads[:len(plain)] == plain
    extra = with_loads[len(plain):]
    assert [name for name, _, _ in extra] == [f"mc{i}/loaded" for i in range(8)]
    by_name = {name: c for name, _, c in plain}
    loads = []
    for name, kind, c in extra:
        base = by_name[name.removesuffix("/loaded")]
        assert kind == "mc" and c.controller == base.controller
        assert c.plant.friction == base.plant.friction and c.plant.J == base.plant.J
        fc = base.plant.friction.Fc
        assert abs(c.plant.load_torque_nm) <= 0.3 * fc
        assert 0.0 <= c.plant.unbalance_nm <= 0.3 * fc
        loads.append(c.plant.load_torque_nm)
    assert len(set(loads)) == 8 and min(loads) < 0.0 < max(loads)
    assert build_cases(cfg, 0.2, 0.0, 8, 3, loaded=True) == with_loads  # deterministic
    stage = load_config(resolve_config_path("linear_stage"))
    assert all(c.plant.unbalance_nm == 0.0 for name, _, c in build_cases(stage, 0.2, 0.0, 4, 1,
                                                                         loaded=True))


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


def test_monte_carlo_plants_believed_exactly_join_the_exact_set_and_never_worse_lines():
    """``--exact``: each Monte Carlo plant also runs believed exactly (``<name>/exact``, the
    plant's own friction and J); a worst ratio there is the exact-set line's worst, and a run
    worse than ``stribeck`` on it breaks the never-worse line."""
    from hil.bench_compensation import GOAL_SCENARIOS, believed_exactly

    cases = build_cases(reference_config(), 0.2, 0.0, monte_carlo=2, seed=3)
    exact = believed_exactly(cases)
    assert [(name, kind) for name, kind, _ in exact] == [("mc0/exact", "exact"),
                                                        ("mc1/exact", "exact")]
    for (_, _, mc), (_, _, ex) in zip(cases[-2:], exact):
        assert ex.controller.friction == mc.plant.friction != mc.controller.friction
        assert ex.controller.J == mc.plant.J != mc.controller.J
        assert ex.plant == mc.plant

    def run(case: str, sc: str, mode: str, rms: float) -> dict:
        return {"case": case, "scenario": sc, "mode": mode, "rms_error_rad": rms,
                "breakaway_rms_rad": rms, "steady_rms_rad": rms, "second_half_rms_rad": rms}

    rms = {"lugre_adaptive": 1.0, "oracle": 1.0, "stribeck": 3.0, "off": 5.0, "lugre": 1.0,
           "coulomb": 4.0}
    names = [name for name, _, _ in cases + exact]
    results = [run(c, sc, m, v) for c in names for sc in GOAL_SCENARIOS for m, v in rms.items()]
    bad = next(r for r in results if r["case"] == "mc1/exact" and r["scenario"] == "creep"
               and r["mode"] == "lugre_adaptive")
    bad.update(rms_error_rad=4.0, second_half_rms_rad=4.0)  # 4× oracle, worse than stribeck
    lines = goal_report(cases + exact, results)
    exact_line = next(line for line in lines if line.startswith("goal exact set"))
    assert "NOT met" in exact_line and "creep 4.00 (mc1/exact)" in exact_line
    never = next(line for line in lines if line.startswith("goal never worse"))
    assert "NOT met" in never and "mc1/exact/creep vs stribeck" in never
    # the excess in encoder counts of rms (1 µrad over stribeck's 3), and how many are tiny
    q = cases[0][2].plant.encoder.rad_per_count
    assert f"mc1/exact/creep vs stribeck (+{1.0 / q:.2f} count)" in never
    assert never.endswith("0 of 1 by less than 0.1 count rms; "
                          "the oracle worse there too in 0 of 1")
    tiny = dict(bad, case="mc0/exact", rms_error_rad=3.0 + 0.05 * q)
    tiny_line = next(line for line in goal_report(cases + exact, results + [tiny])
                     if line.startswith("goal never worse"))
    assert "mc0/exact/creep vs stribeck (+0.05 count)" in tiny_line
    assert "; 1 of 2 by less than 0.1 count rms;" in tiny_line
    # where the plant's own model loses to stribeck as well, the line says so
    oracle = next(r for r in results if (r["case"], r["scenario"], r["mode"])
                  == ("mc1/exact", "creep", "oracle"))
    lost = [dict(oracle, rms_error_rad=3.5) if r is oracle else r for r in results]
    lost_line = next(line for line in goal_report(cases + exact, lost)
                     if line.startswith("goal never worse"))
    assert lost_line.endswith("the oracle worse there too in 1 of 1")
    without = goal_report(cases, [r for r in results if not r["case"].endswith("/exact")])
    assert all(" met" in line and "NOT" not in line for line in without
               if line.startswith(("goal exact set", "goal never worse")))


def test_the_exact_flag_runs_each_monte_carlo_plant_believed_exactly(tmp_path):
    import json

    from controller.cli import main

    out = tmp_path / "b"
    assert main(["bench", "compensation", "--scenarios", "creep", "--modes", "off,lugre_adaptive",
                 "--duration-scale", "0.05", "--monte-carlo", "1", "--cases", "mc0", "--exact",
                 "--out", str(out)]) == 0
    report = json.loads((out / "results.json").read_text())
    assert report["cases"] == {"mc0": "mc", "mc0/exact": "exact"}
    runs = {(r["case"], r["mode"]): r["rms_error_rad"] for r in report["results"]}
    assert set(runs) == {(c, m) for c in ("mc0", "mc0/exact") for m in ("off", "lugre_adaptive")}
    # the same plant, another belief: the model-based mode differs
    assert runs[("mc0", "lugre_adaptive")] != runs[("mc0/exact", "lugre_adaptive")]


def test_a_case_named_by_its_exact_version_runs_only_believed_exactly(tmp_path, capsys):
    import json

    from controller.cli import main

    out = tmp_path / "b"
    assert main(["bench", "compensation", "--scenarios", "creep", "--modes", "off",
                 "--duration-scale", "0.05", "--monte-carlo", "2", "--cases", "mc1/exact",
                 "--exact", "--out", str(out)]) == 0
    report = json.loads((out / "results.json").read_text())
    assert report["cases"] == {"mc1/exact": "exact"}
    # without --exact the name cannot be built: one line naming the case and the flag
    with pytest.raises(SystemExit) as info:
        main(["bench", "compensation", "--monte-carlo", "2", "--cases", "mc1/exact",
              "--out", str(tmp_path / "c")])
    assert info.value.code == 2
    assert "--cases: mc1/exact needs --exact" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["bench", "compensation", "--monte-carlo", "2", "--cases", "mc7/exact", "--exact",
              "--out", str(tmp_path / "d")])
    assert "--cases: no such case: mc7" in capsys.readouterr().err


def test_accept_reruns_a_wrong_set_with_its_own_reidentify_proposal(tmp_path):
    """``--accept``: the operator's commissioning loop. Seed 5's mc18 (a heavily damped plant,
    the believed Fs 18 % low and Fc 16 % high) raises ``reidentify`` 1.3 s into the reversal;
    its proposal, written as the run's ``proposed_params.yaml`` and applied as ``--params``
    applies a file, lands near the plant's static curve, and the rerun with it follows the
    reference far better (2 s: 2.99 → 0.58× oracle when measured)."""
    import json

    from controller.cli import main
    from controller.params_file import load_params_file

    out = tmp_path / "b"
    assert main(["bench", "compensation", "--scenarios", "reversal",
                 "--modes", "lugre_adaptive,oracle", "--duration-scale", "0.25", "--seed", "5",
                 "--monte-carlo", "20", "--cases", "mc18", "--accept", "--out", str(out)]) == 0
    report = json.loads((out / "results.json").read_text())
    assert report["cases"] == {"mc18": "mc", "mc18/accepted": "accepted"}
    rms = {(r["case"], r["mode"]): r["rms_error_rad"] for r in report["results"]}
    assert rms[("mc18/accepted", "oracle")] == rms[("mc18", "oracle")]  # the same plant and J
    lesson = {(r["case"], r["mode"]): r["lesson_peak_nm"] for r in report["results"]}
    assert lesson[("mc18", "lugre_adaptive")] > 0.0 and math.isnan(lesson[("mc18", "oracle")])
    assert rms[("mc18/accepted", "lugre_adaptive")] < 0.5 * rms[("mc18", "lugre_adaptive")]
    proposal = load_params_file(out / "accepted" / "mc18" / "reversal" / "proposed_params.yaml")
    plant = next(c for n, _, c in build_cases(reference_config(), 0.2, 0.0, 20, 5)
                 if n == "mc18").plant.friction
    assert proposal.J is None  # the believed J stays
    for name in ("Fc", "Fs", "vs"):
        assert getattr(proposal.friction, name) == pytest.approx(getattr(plant, name), rel=0.15)


def test_the_accepted_line_keeps_runs_without_a_proposal_as_they_ran(tmp_path):
    """The commissioning line judges every believed-wrong run: a run that raised a proposal by
    its accepted rerun (that run's own proposal), one without by itself (the operator had
    nothing to accept); only wrong sets are rerun, and only the scenarios that proposed; a
    proposal the config cannot take is reported, not rerun; a run that accepting took beyond
    1.5× is named; a rerun without a figure fails the line."""
    from hil.bench_compensation import (ACCEPTED, GOAL_SCENARIOS, accepted_report,
                                        accepted_tasks, _index)

    cases = build_cases(reference_config(), 0.2, 0.0, monte_carlo=3, seed=3)

    def proposal(fc: float, fs: float = 0.3) -> str:
        return (f"friction:\n  Fc: {fc}\n  Fs: {fs}\n  vs: 0.01\n  sigma0: 3.0e+4\n"
                "  sigma1: 0.08\n  sigma2: 0.04\n")

    def run(case: str, sc: str, mode: str, rms: float, text: str | None = None) -> dict:
        r = {"case": case, "scenario": sc, "mode": mode, "rms_error_rad": rms,
             "breakaway_rms_rad": rms, "steady_rms_rad": rms, "second_half_rms_rad": rms}
        if text:
            r["proposed_params_yaml"] = text
        return r

    rms = {"oracle": 1.0, "stribeck": 3.0, "off": 5.0}
    results = [run(c, sc, m, v) for c, _, _ in cases for sc in GOAL_SCENARIOS
               for m, v in rms.items()]
    as_shipped = {("mc0", "reversal"): 2.0, ("mc1", "scan"): 1.8, ("mc2", "reversal"): 1.1}
    proposals = {("mc0", "reversal"): proposal(0.25), ("mc2", "reversal"): proposal(0.21),
                 ("mc2", "scan"): proposal(0.3, fs=0.1),  # Fs < Fc: the file is refused
                 ("reference", "creep"): proposal(0.22)}  # an exact set: never rerun
    for c, _, _ in cases:
        for sc in GOAL_SCENARIOS:
            results.append(run(c, sc, "lugre_adaptive", as_shipped.get((c, sc), 1.0),
                               proposals.get((c, sc))))
    more, tasks, problems = accepted_tasks(cases, results, tmp_path, seed=3, duration_scale=0.1)
    assert [(n, k) for n, k, _ in more] == [("mc0" + ACCEPTED, "accepted"),
                                            ("mc2" + ACCEPTED, "accepted")]
    assert {(t.case, t.scenario) for t in tasks} == {("mc0/accepted", "reversal"),
                                                    ("mc2/accepted", "reversal")}
    assert {t.mode for t in tasks} == set(BENCH_MODES)
    assert len(problems) == 1 and problems[0].startswith("mc2/scan: ") and "Fs" in problems[0]
    for t in tasks:  # each rerun believes its own run's proposal; J and the plant stay
        case = next(c for n, _, c in cases if n + ACCEPTED == t.case)
        assert t.cfg.controller.friction.Fc == {"mc0": 0.25, "mc2": 0.21}[t.case[:3]]
        assert t.cfg.controller.J == case.controller.J and t.cfg.plant == case.plant
    assert (tmp_path / "accepted" / "mc0" / "reversal" / "proposed_params.yaml").read_text() \
        == proposals[("mc0", "reversal")]

    # mc0 2.0 → 1.2; mc2 1.1 → 1.7 (made worse); behind its own stribeck run, a loss the
    # shipped config's never-worse line does not count
    for c, v in (("mc0/accepted", 1.2), ("mc2/accepted", 1.7)):
        results += [run(c, "reversal", m, x) for m, x in
                    dict(rms, lugre_adaptive=v, stribeck=1.1).items()]
    kinds = {n: k for n, k, _ in cases + more}
    line = accepted_report(_index(results), kinds)
    assert "NOT met" in line and "reversal 1.70 (mc2/accepted)" in line and "scan 1.80 (mc1)" in line
    assert "a proposal in 2 of" in line
    assert "beyond 1.5× as shipped: 2, within 1.5× once accepted: 1" in line
    assert "mc0/reversal 2.00 → 1.20" in line and "mc1/scan 1.80 → no proposal" in line
    assert "beyond 1.5× only once accepted: 1 (mc2/reversal 1.10 → 1.70)" in line
    # the three plants' reversals after accepting: 1.2, 1.0, 1.7 (median, not mean 1.30)
    assert line.endswith("Monte Carlo reversal median 1.20, 67% within 1.5× (3 plants)")
    full = goal_report(cases + more, results)
    assert full[-1] == line
    never = next(x for x in full if x.startswith("goal never worse"))
    assert " met" in never and "NOT" not in never  # the reruns are not the shipped config's runs
    # a rerun without a figure is no pass
    nan_results = [dict(r, rms_error_rad=math.nan) if (r["case"], r["scenario"], r["mode"])
                   == ("mc0/accepted", "reversal", "lugre_adaptive") else r for r in results]
    line = accepted_report(_index(nan_results), kinds)
    assert "NOT met: worst reversal nan (mc0/accepted)" in line
