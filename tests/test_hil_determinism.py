"""Lockstep HIL is deterministic: the same scenario through a real driver and its emulator, run
twice, logs the same numbers (only the wall-clock columns differ). The emulated drive may answer
several requests within one plant period; the plant's current sensor gives one sample per plant
instant, so how often it is read does not change the noise sequence; the driver waits at least
``hil_session.LOCKSTEP_MIN_TIMEOUT_S`` of wall time for each answer, so a loaded machine does not
turn a late emulator thread into a stale sample."""

from __future__ import annotations

import numpy as np
import pytest

from controller.runlog import read_log
from hil.hil_session import hil_run

from .conftest import reference_config

WALL_CLOCK_COLUMNS = {"late_us", "compute_us"}


@pytest.mark.parametrize("protocol", ["odrive_can", "cia402"])
def test_two_lockstep_hil_runs_log_the_same_numbers(protocol, tmp_path):
    cfg = reference_config()
    logs = []
    for k in range(2):
        out = tmp_path / f"run{k}"
        summary = hil_run(cfg, protocol, "creep", out, duration_s=0.4, seed=3, plot=False)
        assert summary["faults"] == [], summary["faults"]
        logs.append(read_log(out / "run.fctl"))
    a, b = logs
    assert len(a) == len(b) > 300
    differ = [c for c in a.columns if c not in WALL_CLOCK_COLUMNS
              and not np.array_equal(a[c], b[c], equal_nan=True)]
    assert differ == []
    # the run really measured something noisy: the current is not a constant
    assert np.unique(a["current_a"][np.isfinite(a["current_a"])]).size > 3
