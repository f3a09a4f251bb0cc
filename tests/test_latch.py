"""A fault latched by ``run`` outlives the process: the next ``run`` refuses to enable (exit 2,
the fault and the hint printed, nothing written) until ``frictionctl reset``; lockstep ``sim``
never latches; an unreadable latch counts as latched."""

from __future__ import annotations

import copy
import json

import pytest
import yaml

from controller import cli
from controller.config import resolve_config_path
from controller.latch import LATCH_FILE, read_latch, state_dir, write_latch


@pytest.fixture
def faulting_config(tmp_path):
    """The shipped config with a following-error limit creep cannot meet: `run` faults."""
    data = yaml.safe_load(resolve_config_path("turntable").read_text(encoding="utf-8"))
    data = copy.deepcopy(data)
    data["safety"]["velocity_limit_rad_s"] = 0.005  # creep runs at 0.01 rad/s
    path = tmp_path / "faulting.yaml"
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    return path


def test_state_dir_rules(monkeypatch, tmp_path):
    assert state_dir(tmp_path / "x") == tmp_path / "x"
    monkeypatch.setenv("FRICTIONCTL_STATE_DIR", str(tmp_path / "env"))
    assert state_dir() == tmp_path / "env"
    monkeypatch.delenv("FRICTIONCTL_STATE_DIR")
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "xdg"))
    assert state_dir() == tmp_path / "xdg" / "frictionctl"


def test_a_faulted_run_latches_and_the_next_run_refuses(faulting_config, private_state_dir,
                                                          tmp_path, capsys):
    rc = cli.main(["run", "--config", str(faulting_config), "--scenario", "creep",
                   "--duration", "0.5", "--out", str(tmp_path / "first")])
    assert rc == 1
    record = read_latch(private_state_dir)
    assert record is not None and record["fault"] == "VELOCITY_LIMIT"
    assert record["command"] == "run"
    capsys.readouterr()
    # a new process would see the same file: the next run refuses before opening anything
    rc = cli.main(["run", "--scenario", "creep", "--duration", "0.2", "--out", str(tmp_path / "second")])
    err = capsys.readouterr().err
    assert rc == 2 and err.count("\n") == 1
    assert "fault latched: VELOCITY_LIMIT" in err and "frictionctl reset" in err
    assert not (tmp_path / "second").exists()
    # reset shows and clears it; then a run goes ahead
    assert cli.main(["reset"]) == 0
    out = capsys.readouterr().out
    assert "latched: VELOCITY_LIMIT" in out and "cleared" in out
    assert read_latch(private_state_dir) is None
    assert cli.main(["run", "--scenario", "creep", "--duration", "0.2",
                     "--out", str(tmp_path / "third")]) in (0, 1)
    assert (tmp_path / "third" / "run.fctl").exists()


def test_lockstep_sim_does_not_latch(faulting_config, private_state_dir, tmp_path):
    rc = cli.main(["sim", "--config", str(faulting_config), "--scenario", "creep",
                   "--duration", "0.5", "--no-plot", "--out", str(tmp_path / "s")])
    assert rc == 1 and read_latch(private_state_dir) is None


def test_an_unreadable_latch_counts_as_latched(private_state_dir, tmp_path, capsys):
    (private_state_dir / LATCH_FILE).write_text("{not json", encoding="utf-8")
    rc = cli.main(["run", "--scenario", "creep", "--duration", "0.2", "--out", str(tmp_path / "r")])
    assert rc == 2 and "UNREADABLE" in capsys.readouterr().err
    assert not (tmp_path / "r").exists()


def test_latch_write_is_atomic_and_readable(tmp_path):
    path = write_latch(tmp_path / "st", "FOLLOWING_ERROR", "0.006 rad > 0.005 rad", command="run")
    assert json.loads(path.read_text())["fault"] == "FOLLOWING_ERROR"
    assert [p.name for p in (tmp_path / "st").iterdir()] == [LATCH_FILE]  # no temporary left
