"""The optional compiled hot path: setup.py builds it with mypyc when it can and falls back to pure
Python when it cannot; the compiled and the pure-Python modules give bit-identical logs; the
environment variable forces the pure-Python sources.

The build tests copy the package into a temporary folder and build there (``build_ext
--inplace``): skipped, saying why, when mypyc or a C compiler is missing."""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import numpy as np
import pytest

from controller.hot_modules import (HOT_MODULES, SourceFirstFinder, left_interpreted, pure_python_requested,
                                    type_errors)

ROOT = Path(__file__).resolve().parents[1]
# columns that measure this machine, not the run
TIMING_COLUMNS = ("compute_us", "late_us")

SIM_SCRIPT = """
import json, sys
from pathlib import Path
from controller.compiled import active_path, compiled_modules
from controller.config import load_config, resolve_config_path
from hil.replay import replay
from hil.scenarios import sim_run
cfg = load_config(resolve_config_path("turntable"))
out = Path(sys.argv[1])
sim_run(cfg, "reversal", out, compensation="lugre_adaptive", duration_s=1.5, seed=3, plot=False)
replay(out / "run.fctl", out / "replay", plot=False)
# the other paths the loop can take: PID alone, and the scheduler switching sets mid-run
sim_run(cfg, "creep", out / "creep", compensation="off", duration_s=1.5, seed=3, plot=False)
sim_run(cfg, "schedule", out / "schedule", compensation="lugre_adaptive", duration_s=6.0, seed=3,
        plot=False)
print(json.dumps({"path": active_path(), "compiled": compiled_modules()}))
"""


def _compiler_missing() -> str | None:
    if importlib.util.find_spec("mypyc") is None:
        return "mypyc is not installed (pip install mypy)"
    cc = (sysconfig.get_config_var("CC") or "cc").split()[0]
    if shutil.which(cc) is None:
        return f"no C compiler ({cc}) on PATH"
    return None


def _copy_tree(dest: Path) -> Path:
    for name in ("setup.py", "pyproject.toml", "README.md"):
        shutil.copy2(ROOT / name, dest / name)
    for pkg in ("controller", "drivers", "hil", "configs"):
        shutil.copytree(ROOT / pkg, dest / pkg, ignore=shutil.ignore_patterns("__pycache__", "*.so"))
    return dest


def _build(tree: Path, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "setup.py", "-q", "build_ext", "--inplace"], cwd=tree,
                          capture_output=True, text=True, env=dict(os.environ, **env), timeout=600)


def _run_sim(tree: Path, out: Path, pure: bool) -> dict:
    env = dict(os.environ, PYTHONPATH=str(tree), MPLBACKEND="Agg")
    env.pop("FRICTIONCTL_PURE_PYTHON", None)
    if pure:
        env["FRICTIONCTL_PURE_PYTHON"] = "1"
    proc = subprocess.run([sys.executable, "-c", SIM_SCRIPT, str(out)], cwd=tree, env=env,
                          capture_output=True, text=True, timeout=300, check=True)
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def compiled_tree(tmp_path_factory):
    why = _compiler_missing()
    if why:
        pytest.skip(why)
    tree = _copy_tree(tmp_path_factory.mktemp("compiled"))
    proc = _build(tree)
    assert proc.returncode == 0, proc.stderr
    assert "building pure Python" not in proc.stderr, proc.stderr
    return tree


def test_compiled_and_pure_python_logs_and_replays_are_bit_identical(compiled_tree, tmp_path):
    from controller.runlog import read_log

    compiled = _run_sim(compiled_tree, tmp_path / "compiled", pure=False)
    pure = _run_sim(compiled_tree, tmp_path / "pure", pure=True)
    left = left_interpreted(list(type_errors(str(compiled_tree))))
    expected = [n for n in HOT_MODULES if n not in left]
    assert expected and sorted(compiled["compiled"]) == sorted(expected)
    assert compiled["path"].startswith("mypyc")
    assert pure["compiled"] == [] and "FRICTIONCTL_PURE_PYTHON" in pure["path"]
    for sub in ("", "creep", "schedule"):  # reversal/lugre_adaptive, creep/off, schedule switches
        a = read_log(tmp_path / "compiled" / sub / "run.fctl")
        b = read_log(tmp_path / "pure" / sub / "run.fctl")
        assert a.columns == b.columns and a.data.shape == b.data.shape and a.data.shape[0] > 1000
        keep = [i for i, c in enumerate(a.columns) if c not in TIMING_COLUMNS]
        # bit for bit: compare the IEEE-754 patterns, so NaN == NaN and -0.0 != 0.0
        assert np.array_equal(a.data[:, keep].view(np.uint64), b.data[:, keep].view(np.uint64)), sub
    a, b = read_log(tmp_path / "compiled" / "run.fctl"), read_log(tmp_path / "pure" / "run.fctl")
    header_a = {k: v for k, v in a.header.items() if k != "versions"}
    header_b = {k: v for k, v in b.header.items() if k != "versions"}
    assert header_a == header_b
    assert a.header["versions"]["hot_path"] != b.header["versions"]["hot_path"]
    # the replay of each log, on its own path, gives the same estimates to the last digit
    replayed = [(tmp_path / p / "replay" / "replay.csv").read_bytes() for p in ("compiled", "pure")]
    assert replayed[0] == replayed[1] and replayed[0].count(b"\n") > 1000


def test_field_named_validation_errors_survive_the_compiled_build(compiled_tree):
    script = ("from controller.friction import LuGreParams\n"
              "try:\n    LuGreParams(Fc='x', Fs=1, vs=1, sigma0=1, sigma1=0, sigma2=0)\n"
              "except ValueError as e:\n    print(e)\n")
    env = dict(os.environ, PYTHONPATH=str(compiled_tree))
    env.pop("FRICTIONCTL_PURE_PYTHON", None)
    out = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True,
                         check=True).stdout
    assert out.startswith("Fc: must be a number")


def test_a_failing_compiler_leaves_a_working_pure_python_build(tmp_path):
    if importlib.util.find_spec("mypyc") is None:
        pytest.skip("mypyc is not installed (pip install mypy)")
    tree = _copy_tree(tmp_path)
    proc = _build(tree, CC="/bin/false")
    assert proc.returncode == 0, proc.stderr
    notices = [line for line in proc.stderr.splitlines() if line.startswith("frictionctl:")]
    assert len(notices) == 1 and "building pure Python" in notices[0] and "/bin/false" in notices[0]
    assert not list(tree.rglob("*.so"))  # nothing half-built left to shadow a .py
    result = _run_sim(tree, tmp_path / "out", pure=False)
    assert result["compiled"] == [] and result["path"].startswith("pure Python")
    # a wheel build insists instead of shipping a pure build under a platform tag
    strict = _build(tree, FRICTIONCTL_PURE_PYTHON="1", FRICTIONCTL_REQUIRE_COMPILED="1")
    assert strict.returncode != 0 and "FRICTIONCTL_REQUIRE_COMPILED" in strict.stderr


def test_the_environment_variable_selects_the_source_finder():
    assert pure_python_requested({"FRICTIONCTL_PURE_PYTHON": "1"})
    assert not pure_python_requested({"FRICTIONCTL_PURE_PYTHON": "0"})
    assert not pure_python_requested({})
    finder = SourceFirstFinder(["controller.pid"])
    spec = finder.find_spec("controller.pid", [str(ROOT / "controller")])
    assert spec is not None and spec.origin == str(ROOT / "controller" / "pid.py")
    assert finder.find_spec("controller.config", [str(ROOT / "controller")]) is None


def test_every_hot_module_is_free_of_mypy_errors():
    """mypyc compiles a hot module only when mypy finds no error in it (the build leaves it
    interpreted otherwise, and says so): keep them clean."""
    if importlib.util.find_spec("mypy") is None:
        pytest.skip("mypy is not installed (pip install mypy)")
    errors = type_errors(str(ROOT))
    assert not errors, "\n".join(line for lines in errors.values() for line in lines)


def test_modules_compiled_together_stay_interpreted_together():
    names = ["controller.compensation", "controller.lugre_compensator", "controller.pid"]
    assert left_interpreted(["controller.lugre_compensator"], names) == set(names[:2])
    assert left_interpreted(["controller.pid"], names) == {"controller.pid"}
    assert left_interpreted([], names) == set()


def test_every_hot_module_exists_as_source():
    for name in HOT_MODULES:
        assert (ROOT / Path(*name.split("."))).with_suffix(".py").is_file(), name


def test_a_fallen_back_install_says_so_where_the_quick_start_looks(monkeypatch):
    """pip shows the build's notice only with -v; `frictionctl demo` ends with the path that ran,
    and on an install that fell back, with where to read why."""
    import controller.compiled as compiled

    monkeypatch.setattr(compiled, "compiled_modules", lambda: [])
    monkeypatch.setattr(compiled, "pure_python_requested", lambda: False)
    line = compiled.hot_path_line()
    assert line.startswith("hot path: pure Python (not compiled in this install)")
    assert "pip install -v ." in line
    monkeypatch.setattr(compiled, "pure_python_requested", lambda: True)
    assert compiled.hot_path_line() == "hot path: pure Python (FRICTIONCTL_PURE_PYTHON=1)"
    monkeypatch.setattr(compiled, "compiled_modules", lambda: list(HOT_MODULES))
    assert compiled.hot_path_line() == f"hot path: mypyc ({len(HOT_MODULES)}/{len(HOT_MODULES)} hot modules)"
