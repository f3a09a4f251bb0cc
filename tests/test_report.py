"""report.png and comparison.png agree with the numbers: the figures' axes are checked, not files.

Short lockstep runs on the simulated plant; one real-clock run of 0.3 s for the lateness panel.
"""

from __future__ import annotations

import json
from pathlib import Path

import matplotlib
import numpy as np
import pytest

matplotlib.use("Agg")

from controller import cli  # noqa: E402
from controller.log_data import stop_phase_mask  # noqa: E402
from controller.loop import COLUMN_NAMES, LOG_COLUMNS  # noqa: E402
from controller.report import (MODE_COLORS, comparison_figure, plot_run, run_figure,  # noqa: E402
                               startup_mask)
from controller.runlog import RunLogWriter, read_log  # noqa: E402
from matplotlib.colors import to_hex  # noqa: E402

from .conftest import sim  # noqa: E402


def panel(fig, name):
    found = [a for a in fig.axes if a.get_label() == name]
    assert found, f"no panel {name!r} in {[a.get_label() for a in fig.axes]}"
    return found[0]


def lines_by_label(ax):
    return {line.get_label(): line for line in ax.get_lines()}


@pytest.fixture(scope="module")
def creep_run(tmp_path_factory):
    from .conftest import reference_config

    out = tmp_path_factory.mktemp("creep")
    summary, log, _ = sim(reference_config(), out, scenario="creep", duration_s=1.5,
                          compensation="lugre_adaptive")
    return out / "run.fctl", summary, log


def test_error_scale_excludes_the_stop_phase_and_startup(creep_run):
    path, summary, log = creep_run
    e = log["pos_ref_rad"] - log["pos_rad"]
    stop = stop_phase_mask(log)
    start = startup_mask(log)
    assert stop.any() and start.any()
    # the stop transient is far larger than the controlled error: it would own a naive scale
    # (a bumpless SS1 from the creep speed: about 17 times)
    assert np.max(np.abs(e[stop])) > 10 * np.max(np.abs(e[~stop & ~start]))
    fig = run_figure(path)
    ax = panel(fig, "tracking_error")
    lo, hi = ax.get_ylim()
    steady = e[~stop & ~start] * 1e6
    assert lo <= steady.min() and steady.max() <= hi  # every controlled row is on the scale
    assert hi - lo < 3 * (steady.max() - steady.min())  # and the scale is theirs
    assert np.max(np.abs(e[stop])) * 1e6 > 5 * max(abs(lo), abs(hi))
    # the stop phase is shaded, the title quotes summary.json's rms in µrad
    t_stop = log["t_s"][stop][0]
    starts = [p.get_x() if hasattr(p, "get_x") else p.get_xy()[:, 0].min() for p in ax.patches]
    assert any(x == pytest.approx(t_stop) for x in starts)
    assert f"rms {summary['rms_error_rad'] * 1e6:.3g} µrad" in ax.get_title()
    # what is off the scale is said, and the inset shows the whole run on a log scale
    assert any("off scale" in t.get_text() and "stop phase" in t.get_text() for t in ax.texts)
    insets = [c for c in ax.child_axes if c.get_yscale() == "log"]
    assert insets
    matplotlib.pyplot.close(fig)


def test_truth_drawn_on_top_of_the_estimate_and_friction_error(creep_run):
    path, _, log = creep_run
    fig = run_figure(path)
    lines = lines_by_label(panel(fig, "friction"))
    assert lines["plant (true)"].get_zorder() > lines["estimate"].get_zorder()
    err = lines_by_label(panel(fig, "friction_error"))["estimate − true"]
    np.testing.assert_allclose(err.get_ydata(), log["friction_hat_nm"] - log["friction_true_nm"])
    matplotlib.pyplot.close(fig)


def test_lateness_panel_only_on_the_real_clock(creep_run, tmp_path):
    path, _, _ = creep_run
    fig = run_figure(path)
    labels = [a.get_label() for a in fig.axes]
    assert "lateness" not in labels and "simulated clock" in fig._suptitle.get_text()
    matplotlib.pyplot.close(fig)

    rc = cli.main(["run", "--scenario", "creep", "--duration", "0.3", "--out", str(tmp_path)])
    assert rc in (0, 1)  # 1: an overrun fault on a loaded machine; the panel is there either way
    real = read_log(tmp_path / "run.fctl")
    assert real.header["clock"] == "real"
    fig = run_figure(tmp_path / "run.fctl")
    ax = panel(fig, "lateness")
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert f"p99 {summary['p99_late_us']:.1f} µs" in ax.get_title() and ax.patches
    matplotlib.pyplot.close(fig)


def _write_log(path: Path, rows: np.ndarray, header: dict, columns=COLUMN_NAMES, units=None):
    with RunLogWriter(path, columns, header, units=units or dict(LOG_COLUMNS)) as w:
        for row in rows:
            w.append(tuple(row))


def test_a_real_run_without_ticks_says_so(tmp_path):
    _write_log(tmp_path / "empty.fctl", np.empty((0, len(COLUMN_NAMES))),
               {"clock": "real", "backend": "cia402", "rate_hz": 1000.0})
    fig = run_figure(tmp_path / "empty.fctl")
    texts = [t.get_text() for a in fig.axes for t in a.texts]
    assert any("no ticks" in t for t in texts)
    assert not any("lateness" in t for t in texts)
    matplotlib.pyplot.close(fig)


def test_fault_marker_and_stop_phase_from_the_fault(ref_cfg, tmp_path):
    summary, log, _ = sim(ref_cfg, tmp_path, scenario="creep", duration_s=1.0,
                          compensation="lugre_adaptive", faults=((0.6, "drive_fault"),))
    assert summary["faults"]
    first = int(np.argmax(log["fault"] != 0))
    assert stop_phase_mask(log)[first:].all() and not stop_phase_mask(log)[:first].any()
    fig = run_figure(tmp_path / "run.fctl")
    ax = panel(fig, "position")
    marks = [ln for ln in ax.get_lines() if ln.get_label().startswith("fault: DRIVE_FAULT")]
    assert marks and marks[0].get_xdata()[0] == pytest.approx(log["t_s"][first])
    matplotlib.pyplot.close(fig)


def test_schedule_change_marker_and_true_fc_step(ref_cfg, tmp_path):
    sim(ref_cfg, tmp_path, scenario="schedule", duration_s=5.3, compensation="lugre_adaptive")
    fig = run_figure(tmp_path / "run.fctl")
    ax = panel(fig, "fc")
    true = lines_by_label(ax)["plant (true)"] if "plant (true)" in lines_by_label(ax) else \
        lines_by_label(ax)["plant Fc (true)"]
    t, fc = true.get_xdata(), true.get_ydata()
    fc0 = ref_cfg.plant.friction.Fc
    assert fc[t < 4.9] == pytest.approx(fc0) and fc[t > 5.1] == pytest.approx(1.15 * fc0)
    changes = [ln for ln in panel(fig, "position").get_lines() if ln.get_label().startswith("change:")]
    assert changes and changes[0].get_xdata()[0] == pytest.approx(5.0)
    matplotlib.pyplot.close(fig)


def test_stop_phase_column_and_linear_units_from_the_header(tmp_path):
    n = 400
    cols = COLUMN_NAMES if "stop_phase" in COLUMN_NAMES else COLUMN_NAMES + ("stop_phase",)
    rows = np.zeros((n, len(cols)))
    j = {c: i for i, c in enumerate(cols)}
    rows[:, j["t_s"]] = np.arange(n) * 1e-3
    rows[:, j["pos_ref_rad"]] = rows[:, j["t_s"]] * 1e-3
    rows[:, j["pos_rad"]] = rows[:, j["pos_ref_rad"]] - 1e-6 * np.sin(np.arange(n))
    rows[300:, j["pos_rad"]] -= 1e-3  # the stop transient
    rows[300:, j["stop_phase"]] = 2
    rows[:, j["friction_true_nm"]] = np.nan
    units = {c: u.replace("rad", "m").replace("N·m", "N") for c, u in LOG_COLUMNS}
    units["stop_phase"] = "StopPhase"
    _write_log(tmp_path / "lin.fctl", rows, {"clock": "simulated", "rate_hz": 1000.0,
                                             "controlled_ticks": 350}, cols, units)
    log = read_log(tmp_path / "lin.fctl")
    assert stop_phase_mask(log).sum() == 100  # the column decides, not controlled_ticks
    fig = run_figure(tmp_path / "lin.fctl")
    ax = panel(fig, "tracking_error")
    assert ax.get_ylabel() == "tracking error [µm]" and ax.get_ylim()[1] < 10
    assert panel(fig, "position").get_ylabel() == "position [mm]"
    assert panel(fig, "friction").get_ylabel() == "friction [N]"
    assert panel(fig, "torque").get_ylabel() == "force [N]"
    matplotlib.pyplot.close(fig)


def test_comparison_one_colour_per_mode_and_creep_scale(ref_cfg, tmp_path):
    results = {}
    for sc in ("creep", "reversal"):
        results[sc] = {}
        for mode in ("off", "lugre_adaptive"):
            out = tmp_path / sc / mode
            summary, _, _ = sim(ref_cfg, out, scenario=sc, duration_s=1.5, compensation=mode)
            results[sc][mode] = summary
    fig = comparison_figure(results)
    bars = panel(fig, "rms")
    for container, mode in zip(bars.containers, ("off", "lugre_adaptive")):
        assert {to_hex(p.get_facecolor()) for p in container} == {MODE_COLORS[mode]}
    creep = panel(fig, "error_creep")
    for mode, line in lines_by_label(creep).items():
        assert to_hex(line.get_color()) == MODE_COLORS[mode]
    log = read_log(results["creep"]["off"]["log"])
    e = (log["pos_ref_rad"] - log["pos_rad"]) * 1e6
    start = startup_mask(log)
    lo, hi = creep.get_ylim()
    assert np.max(np.abs(e[start])) > 3 * max(abs(lo), abs(hi))  # the breakaway is off scale
    assert any("start-up breakaway off scale" in t.get_text() for t in creep.texts)
    matplotlib.pyplot.close(fig)
    # report.png of each run draws its traces in the same mode colour
    fig = run_figure(Path(results["creep"]["off"]["log"]))
    assert to_hex(lines_by_label(panel(fig, "position"))["position"].get_color()) == MODE_COLORS["off"]
    matplotlib.pyplot.close(fig)


def test_plot_command_writes_the_png(creep_run, tmp_path):
    path, _, _ = creep_run
    out = plot_run(path, tmp_path / "r.png")
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert json.loads((path.parent / "summary.json").read_text())["ticks"] == len(read_log(path))
