"""Batch work through one executor: in process, local processes (--jobs) and a Dask cluster
(--cluster) give the same results in task order; setup errors are one line, exit 2."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from controller.cli import main
from controller.executor import ExecutorError, ExecutorSpec, run_map

from .conftest import reference_config, sim

# keys of a replay summary that measure this machine, not the replay
TIMING_KEYS = {"replay_wall_s", "replay_realtime_factor", "log", "report"}


def _square_with_pid(x: int) -> tuple[int, int]:
    import os

    return x * x, os.getpid()


def _fails_on_three(x: int) -> int:
    if x == 3:
        raise ValueError(f"task {x} failed")
    return x


@pytest.fixture(scope="module")
def two_logs(tmp_path_factory):
    """Two short logs of different modes: the observer path and a static feedforward."""
    root = tmp_path_factory.mktemp("logs")
    cfg = reference_config()
    sim(cfg, root / "adaptive", scenario="reversal", duration_s=1.5, compensation="lugre_adaptive")
    sim(cfg, root / "static", scenario="creep", duration_s=1.5, compensation="stribeck")
    return [root / "adaptive" / "run.fctl", root / "static" / "run.fctl"]


def _replayed(out: Path) -> list[tuple[dict, bytes]]:
    """(summary without timing keys, replay.csv bytes) of each folder of a batch, in order."""
    result = []
    for folder in sorted(p for p in out.iterdir() if p.is_dir()):
        summary = json.loads((folder / "summary.json").read_text())
        result.append(({k: v for k, v in summary.items() if k not in TIMING_KEYS},
                       (folder / "replay.csv").read_bytes()))
    return result


def test_process_pool_runs_in_other_processes_and_keeps_task_order():
    import os

    results = run_map(_square_with_pid, range(8), ExecutorSpec(jobs=2))
    assert [r[0] for r in results] == [x * x for x in range(8)]
    assert os.getpid() not in {r[1] for r in results}
    assert run_map(_square_with_pid, [], ExecutorSpec(jobs=2)) == []


def test_a_failing_task_fails_the_map_with_its_own_error():
    with pytest.raises(ValueError, match="task 3 failed"):
        run_map(_fails_on_three, range(6), ExecutorSpec(jobs=2))


def test_bad_executor_settings_are_refused():
    with pytest.raises(ExecutorError, match="--jobs"):
        ExecutorSpec(jobs=0)
    with pytest.raises(ExecutorError, match="--cluster"):
        ExecutorSpec(cluster=" ")


def test_replay_of_many_logs_is_identical_for_jobs_1_and_2(two_logs, tmp_path, capsys):
    assert main(["replay", *map(str, two_logs), "--no-plot", "--out", str(tmp_path / "j1")]) == 0
    assert main(["replay", *map(str, two_logs), "--no-plot", "--jobs", "2",
                 "--out", str(tmp_path / "j2")]) == 0
    one, two = _replayed(tmp_path / "j1"), _replayed(tmp_path / "j2")
    assert [p.name for p in sorted((tmp_path / "j2").iterdir())] == ["1-adaptive", "2-static"]
    assert one == two
    assert [s["compensation"] for s, _ in one] == ["lugre_adaptive", "stribeck"]
    # and each replay reproduced its log exactly, whichever executor ran it
    assert all(s["max_abs_diff_friction_hat_nm"] == 0.0 for s, _ in two)
    assert not list((tmp_path / "j2").rglob("replay.png"))  # --no-plot
    assert "2 local processes" in capsys.readouterr().out


@pytest.fixture(scope="module")
def dask_cluster():
    """A local Dask cluster started by the test: two worker processes of one thread each, so
    tasks and results cross process boundaries as on a real cluster."""
    distributed = pytest.importorskip("distributed", reason="dask[distributed] not installed")
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  dashboard_address=None) as cluster:
        yield cluster.scheduler_address


def test_replay_on_a_local_dask_cluster_equals_in_process(two_logs, tmp_path, dask_cluster):
    code = main(["replay", *map(str, two_logs), "--no-plot", "--cluster", dask_cluster,
                 "--out", str(tmp_path / "dask")])
    assert code == 0
    assert main(["replay", *map(str, two_logs), "--no-plot", "--out", str(tmp_path / "local")]) == 0
    assert _replayed(tmp_path / "dask") == _replayed(tmp_path / "local")


BENCH = ["bench", "compensation", "--scenarios", "creep,reversal", "--modes", "off,lugre_adaptive",
         "--duration-scale", "0.05", "--monte-carlo", "2", "--cases", "reference,mc0,mc1"]


def _bench_results(out: Path, *executor: str) -> tuple[dict, dict]:
    """(results.json without its timing key, the timing) of a small bench compensation run."""
    assert main([*BENCH, "--out", str(out), *executor]) == 0
    report = json.loads((out / "results.json").read_text())
    return report, report.pop("timing")


def test_bench_compensation_results_are_the_same_for_any_jobs(tmp_path):
    out = tmp_path / "bench"  # the same folder each time: the logs' paths are part of the results
    serial, t1 = _bench_results(out)
    parallel, t2 = _bench_results(out, "--jobs", "2")
    assert serial == parallel
    assert [t["executor"] for t in (t1, t2)] == ["in process", "2 local processes"]
    assert all(t["wall_s"] > 0 for t in (t1, t2))
    runs = {(r["case"], r["scenario"], r["mode"]) for r in serial["results"]}
    assert runs == {(c, sc, m) for c in ("reference", "mc0", "mc1") for sc in ("creep", "reversal")
                    for m in ("off", "lugre_adaptive")}
    assert all("wall_s" not in r for r in serial["results"])  # timing only under "timing"
    assert all(r["rms_error_rad"] > 0 for r in serial["results"])


def test_compare_jobs_times_both_executors_in_one_run_on_identical_results(tmp_path, capsys):
    report, timing = _bench_results(tmp_path / "cmp", "--compare-jobs", "2")
    serial, _ = _bench_results(tmp_path / "cmp")  # the same folder: the same log paths
    assert report == serial  # the table is the --jobs 2 run's, equal to a plain run's
    cmp = timing["compare_jobs"]
    assert cmp["jobs"] == 2 and cmp["identical"] is True
    assert cmp["speedup"] == pytest.approx(cmp["jobs1_wall_s"] / cmp["jobsN_wall_s"])
    assert "results identical: yes" in capsys.readouterr().out
    with pytest.raises(SystemExit) as err:
        main([*BENCH, "--out", str(tmp_path / "x"), "--compare-jobs", "2", "--jobs", "2"])
    assert err.value.code == 2
    assert "--compare-jobs: runs --jobs 1 and --jobs N itself" in capsys.readouterr().err


def test_bench_compensation_on_a_local_dask_cluster_equals_in_process(tmp_path, dask_cluster):
    out = tmp_path / "bench"
    serial, _ = _bench_results(out)
    dask, timing = _bench_results(out, "--cluster", dask_cluster)
    assert serial == dask
    assert timing["executor"] == f"dask cluster {dask_cluster}"


def test_identification_check_runs_map_identically(tmp_path):
    from controller.executor import ExecutorSpec
    from hil.bench_compensation import identified_vs_true

    cfg = reference_config()
    p = cfg.plant.friction
    wrong = p.scaled(Fc=1.3) if hasattr(p, "scaled") else p
    args = (cfg, wrong, tmp_path / "check", ("creep", "step"))
    serial = identified_vs_true(*args)
    parallel = identified_vs_true(*args, spec=ExecutorSpec(jobs=2))
    assert serial == parallel and set(serial) == {"creep", "step"}
    assert all(ident != true for true, ident in serial.values())  # the sets really differ


def test_cluster_without_dask_is_a_one_line_error(two_logs, tmp_path, capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "dask.distributed", None)  # import fails as if not installed
    code = main(["replay", str(two_logs[0]), "--cluster", "tcp://127.0.0.1:8786", "--out", str(tmp_path)])
    err = capsys.readouterr().err
    assert code == 2
    assert err.count("\n") == 1 and "frictionctl[cluster]" in err


def test_jobs_must_be_a_positive_integer(two_logs, tmp_path, capsys):
    with pytest.raises(SystemExit) as exc:
        main(["replay", str(two_logs[0]), "--jobs", "0", "--out", str(tmp_path)])
    assert exc.value.code == 2
    assert "--jobs" in capsys.readouterr().err
