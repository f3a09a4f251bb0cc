"""The code type-checks: mypy on controller, drivers and hil (the [tool.mypy] settings of
pyproject.toml) reports no error. mypy is in the test extra (it also builds the compiled path)."""

from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def test_mypy_reports_no_error_in_the_packages(tmp_path):
    api = pytest.importorskip("mypy.api", reason="mypy is not installed (pip install '.[test]')")
    stdout, stderr, status = api.run([
        "--config-file", str(ROOT / "pyproject.toml"), "--cache-dir", str(tmp_path / "cache"),
        str(ROOT / "controller"), str(ROOT / "drivers"), str(ROOT / "hil")])
    assert status == 0, f"mypy (exit {status}):\n{stdout}{stderr}"
