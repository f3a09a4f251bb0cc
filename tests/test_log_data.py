"""The run log as data: numpy / pandas tables, CSV with units and named codes, the CLI export."""

from __future__ import annotations

import builtins
import csv
import json

import numpy as np
import pytest

from controller import cli
from controller.loop import COLUMN_NAMES
from controller.runlog import read_log

from .conftest import sim


@pytest.fixture(scope="module")
def faulted(tmp_path_factory):
    from .conftest import reference_config

    out = tmp_path_factory.mktemp("faulted")
    sim(reference_config(), out, scenario="creep", duration_s=0.8, compensation="lugre_adaptive",
        faults=((0.5, "drive_fault"),))
    return out / "run.fctl"


def test_to_numpy_is_a_structured_copy_of_the_columns(faulted):
    log = read_log(faulted)
    a = log.to_numpy()
    assert a.dtype.names == COLUMN_NAMES and a.shape == (len(log),)
    for j, name in enumerate(COLUMN_NAMES):
        assert a[name].tobytes() == log.data[:, j].tobytes()


def test_to_pandas_names_the_codes_and_keeps_units(faulted):
    pd = pytest.importorskip("pandas")
    log = read_log(faulted)
    df = log.to_pandas()
    assert list(df.columns) == list(COLUMN_NAMES) and len(df) == len(log)
    assert isinstance(df["fault"].dtype, pd.CategoricalDtype)
    first = int(np.argmax(log["fault"] != 0))
    assert df["fault"].iloc[first - 1] == "NONE" and df["fault"].iloc[first] == "DRIVE_FAULT"
    assert "ENABLED" in set(df["drive_state"])
    assert df.attrs["units"]["pos_rad"] == "rad" and df.attrs["header"]["scenario"] == "creep"
    np.testing.assert_array_equal(df["pos_rad"].to_numpy(), log["pos_rad"])
    raw = log.to_pandas(named_codes=False)
    assert raw["fault"].iloc[first] == 2.0


def test_to_pandas_without_pandas_is_a_clear_error(faulted, monkeypatch):
    real_import = builtins.__import__

    def no_pandas(name, *args, **kwargs):
        if name == "pandas" or name.startswith("pandas."):
            raise ImportError("No module named 'pandas'")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_pandas)
    with pytest.raises(ImportError, match=r"to_pandas\(\) needs pandas.*pip install pandas"):
        read_log(faulted).to_pandas()


def test_cli_export_names_codes_with_a_units_sidecar(faulted, tmp_path):
    out = tmp_path / "run.csv"
    assert cli.main(["export", str(faulted), "--csv", str(out)]) == 0
    with out.open() as f:
        rows = list(csv.DictReader(f))
    log = read_log(faulted)
    assert len(rows) == len(log)
    first = int(np.argmax(log["fault"] != 0))
    assert rows[first]["fault"] == "DRIVE_FAULT" and rows[0]["fault"] == "NONE"
    if "stop_phase" in log.columns:  # the stop category by name too (a drive fault: torque off)
        assert rows[0]["stop_phase"] == "RUN" and rows[-1]["stop_phase"] in ("STO", "DISABLED")
    assert float(rows[first]["pos_rad"]) == log["pos_rad"][first]  # round-trip exact
    side = json.loads((tmp_path / "run.csv.json").read_text())
    assert side["units"]["torque_cmd_nm"] == "N·m" and side["codes"]["fault"]["2"] == "DRIVE_FAULT"
    assert side["codes"]["drive_state"]["3"] == "ENABLED"


def test_cli_export_units_row_and_numbers(faulted, tmp_path):
    out = tmp_path / "run.csv"
    assert cli.main(["export", str(faulted), "--csv", str(out), "--units", "row",
                     "--codes", "numbers"]) == 0
    lines = out.read_text().splitlines()
    header, units = lines[0].split(","), lines[1].split(",")
    assert units[header.index("pos_rad")] == "rad" and units[header.index("fault")] == "FaultKind"
    table = np.genfromtxt(out, delimiter=",", names=True, skip_header=0)[1:]  # the units row: NaN
    assert np.isfinite(table["t_s"]).all() and set(np.unique(table["fault"])) <= {0.0, 2.0}
    assert not (tmp_path / "run.csv.json").exists()


def test_cli_export_bad_units_option_is_exit_2(faulted, tmp_path, capsys):
    with pytest.raises(SystemExit) as err:
        cli.main(["export", str(faulted), "--csv", str(tmp_path / "x.csv"), "--units", "rows"])
    assert err.value.code == 2
    assert "--units" in capsys.readouterr().err
