"""CLI and packaging conventions, and config hardening: --version, -v/-q, config list/show/write,
shipped configs found whatever a user's own packages are called, one-line errors for duplicate
keys, deep nesting, implausible units and unbounded safety values."""

from __future__ import annotations

import copy
import logging
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from controller import cli
from controller.config import load_config, resolve_config_path, shipped_config_names
from controller.schema import ConfigError

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def base() -> dict:
    return yaml.safe_load(resolve_config_path("turntable").read_text(encoding="utf-8"))


def _write(tmp_path: Path, data: dict, name: str = "c.yaml") -> Path:
    path = tmp_path / name
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    return path


def test_version(capsys):
    with pytest.raises(SystemExit) as exc:
        cli.main(["--version"])
    assert exc.value.code == 0
    out = capsys.readouterr().out.strip()
    assert out.startswith("frictionctl ") and out.split()[1][0].isdigit()


def test_verbosity_sets_the_root_level_before_or_after_the_command(tmp_path):
    cli.main(["-q", "config", "list"])
    assert logging.getLogger().level == logging.ERROR
    cli.main(["config", "list", "-vv"])
    assert logging.getLogger().level == logging.DEBUG
    cli.main(["config", "list"])
    assert logging.getLogger().level == logging.WARNING


def test_library_log_lines_carry_the_prefix(capsys):
    cli.main(["config", "list"])
    logging.getLogger("drivers.cia402").warning("watchdog not confirmed")
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert err == "frictionctl: WARNING: drivers.cia402: watchdog not confirmed"


def test_usage_error_has_one_prefix(capsys):
    with pytest.raises(SystemExit) as exc:
        cli.main(["sim", "--duration", "-1"])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert err.count("frictionctl") == 1 and err.startswith("frictionctl: error: sim: ")


def test_run_requires_a_scenario(capsys):
    with pytest.raises(SystemExit) as exc:
        cli.main(["run"])
    assert exc.value.code == 2
    assert "--scenario" in capsys.readouterr().err


def test_every_option_has_help():
    parser = cli.build_parser()
    sub = next(a for a in parser._actions if a.__class__.__name__ == "_SubParsersAction")
    missing = []
    for name, p in sub.choices.items():
        for action in p._actions:
            if action.help is None and action.dest not in ("help",):
                missing.append(f"{name} {'/'.join(action.option_strings) or action.dest}")
    assert not missing, missing


def test_config_list_show_write(tmp_path, capsys):
    assert cli.main(["config", "list"]) == 0
    assert "turntable" in capsys.readouterr().out.split()
    assert cli.main(["config", "show", "turntable"]) == 0
    shown = capsys.readouterr().out
    assert shown == resolve_config_path("turntable").read_text(encoding="utf-8")
    target = tmp_path / "mine.yaml"
    assert cli.main(["config", "write", "--out", str(target)]) == 0
    assert load_config(target) == load_config(resolve_config_path("turntable"))
    assert cli.main(["config", "write", "--out", str(target)]) == 2  # no silent overwrite
    assert "exists" in capsys.readouterr().err
    assert cli.main(["config", "write", "--out", str(target), "--force"]) == 0


def test_shipped_configs_found_beside_a_users_configs_package(tmp_path):
    (tmp_path / "configs").mkdir()
    (tmp_path / "configs" / "__init__.py").write_text("raise ImportError('user package')\n")
    env = {"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"}
    proc = subprocess.run([sys.executable, "-m", "controller.cli", "config", "list"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=60, env=env)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == shipped_config_names()


def test_packaging_files_exist():
    assert (ROOT / "LICENSE").read_text(encoding="utf-8").startswith("MIT License")
    for package in ("controller", "drivers", "hil"):
        assert (ROOT / package / "py.typed").is_file()


def test_duplicate_key_is_an_error_with_its_path(tmp_path, base):
    text = resolve_config_path("turntable").read_text(encoding="utf-8")
    text = text.replace("safety:\n", "safety:\n  torque_limit_nm: 1.0\n", 1)
    path = tmp_path / "dup.yaml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(ConfigError) as exc:
        load_config(path)
    message = str(exc.value)
    assert message.startswith("safety.torque_limit_nm: ") and "duplicate key" in message
    assert "\n" not in message


def test_deep_nesting_is_one_line(tmp_path):
    path = tmp_path / "deep.yaml"
    path.write_text("plant: " + "[" * 20000 + "]" * 20000, encoding="utf-8")
    with pytest.raises(ConfigError) as exc:
        load_config(path)
    assert "nested deeper" in str(exc.value) and "\n" not in str(exc.value)


@pytest.mark.parametrize("section,key,value,expected", [
    ("safety", "torque_limit_nm", float("inf"), "safety.torque_limit_nm: must be finite"),
    ("safety", "velocity_limit_rad_s", float("nan"), "safety.velocity_limit_rad_s: must not be NaN"),
    ("safety", "stop_ramp_s", 1e6, "safety.stop_ramp_s: must be finite and in [0, 10]"),
    ("safety", "stale_ticks", 10**9, "safety.stale_ticks: must be 1..1000"),
    ("plant", "Kt", 600.0, "plant.Kt: must be > 0 and <= 100 N·m/A, got 600.0 (mN·m/A?"),
    ("controller", "Kt", 600.0, "controller.Kt: must be > 0 and <= 100"),
])
def test_implausible_values_are_one_line_errors(tmp_path, base, section, key, value, expected):
    data = copy.deepcopy(base)
    data[section][key] = value
    with pytest.raises(ConfigError) as exc:
        load_config(_write(tmp_path, data))
    assert str(exc.value).startswith(expected), str(exc.value)


def test_stale_window_bounded_against_the_period(tmp_path, base):
    data = copy.deepcopy(base)
    data["safety"]["stale_ticks"] = 500
    data["loop"]["rate_hz"] = 100.0
    with pytest.raises(ConfigError) as exc:
        load_config(_write(tmp_path, data))
    assert str(exc.value).startswith("safety.stale_ticks: 500 ticks at 100 Hz is 5 s")


def test_real_clock_refuses_a_receive_timeout_past_the_stale_window(tmp_path, base):
    data = copy.deepcopy(base)
    data["drive"].update(protocol="odrive_can", timeout_s=0.05)
    cfg = load_config(_write(tmp_path, data))  # fine in lockstep
    with pytest.raises(ConfigError) as exc:
        cfg.check_real_clock()
    assert str(exc.value).startswith("drive.timeout_s: must be shorter than safety.stale_ticks")
    out = tmp_path / "out"
    rc = cli.main(["run", "--config", str(_write(tmp_path, data)), "--scenario", "creep",
                   "--out", str(out)])
    assert rc == 2 and not out.exists()  # refused before the link opens or a log is written


@pytest.mark.parametrize("drive, names", [
    ({"protocol": "odrive_can", "interface": "socketcan", "channel": "vcan9"}, "drive.channel 'vcan9'"),
    ({"protocol": "cia402", "interface": "socketcann", "channel": "can0"}, "drive.interface 'socketcann'"),
])
def test_first_contact_failure_is_one_line_and_writes_nothing(tmp_path, base, capsys, drive, names):
    data = copy.deepcopy(base)
    data["drive"].update(drive)
    out = tmp_path / "out"
    rc = cli.main(["run", "--config", str(_write(tmp_path, data)), "--scenario", "creep",
                   "--out", str(out)])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and len(err) == 1, err
    assert err[0].startswith("frictionctl: error: drive.interface") and names in err[0]
    assert "cannot open the link" in err[0] and "Traceback" not in err[0]
    assert not out.exists()  # no log, no report, no table of nan


def test_real_clock_refuses_a_receive_timeout_that_starves_the_drive_watchdog(tmp_path, base):
    data = copy.deepcopy(base)
    # inside the stale window (5 ticks at 1 kHz), but not shorter than the 4 ms drive watchdog
    data["safety"]["stale_ticks"] = 5
    data["drive"].update(protocol="odrive_ascii", port="/dev/null", timeout_s=0.004,
                         watchdog_timeout_s=0.004)
    cfg = load_config(_write(tmp_path, data))  # fine in lockstep
    with pytest.raises(ConfigError) as exc:
        cfg.check_real_clock()
    assert str(exc.value).startswith("drive.timeout_s: must be shorter than drive.watchdog_timeout_s")
    out = tmp_path / "out"
    rc = cli.main(["run", "--config", str(_write(tmp_path, data)), "--scenario", "creep",
                   "--out", str(out)])
    assert rc == 2 and not out.exists()
    data["drive"]["watchdog_timeout_s"] = float("inf")  # no watchdog set: nothing to starve
    load_config(_write(tmp_path, data)).check_real_clock()
