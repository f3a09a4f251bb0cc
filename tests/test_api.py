"""The README's Python API example runs as it stands; overrides are validated like file values."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from controller import api
from controller.schema import ConfigError

README = Path(__file__).resolve().parent.parent / "README.md"


def test_readme_example_runs(tmp_path, monkeypatch, capsys):
    text = README.read_text(encoding="utf-8")
    section = text.split("## Python API", 1)[1]
    code = re.search(r"```python\n(.*?)```", section, re.S).group(1)
    monkeypatch.chdir(tmp_path)
    exec(compile(code, "README.md: Python API", "exec"), {})  # noqa: S102 - our own README
    out = capsys.readouterr().out
    assert "µrad" in out and "rows;" in out
    assert (tmp_path / "api-out" / "reversal" / "summary.json").exists()


def test_overrides_are_validated_with_their_key_path():
    cfg = api.load_config("turntable", overrides={"safety.torque_limit_nm": 2.0})
    assert cfg.safety.torque_limit_nm == 2.0
    with pytest.raises(ConfigError, match=r"^safety.torque_limit_nm: must be finite"):
        api.load_config("turntable", overrides={"safety.torque_limit_nm": float("inf")})
    with pytest.raises(ConfigError, match=r"^safety.torque_limit_nm: is not a section"):
        api.load_config("turntable", overrides={"safety.torque_limit_nm.x": 1})
