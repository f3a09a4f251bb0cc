"""Injected faults: the scenario schema (``faults:``), the protocol-level injection in each
emulator (frames really on the bus, the pty really closed), the trigger's tick, representative
campaign cases per backend against their expected rows, and ``frictionctl faults`` exiting 1 when
a case fails its row."""

from __future__ import annotations

import copy
import dataclasses
import json

import can
import pytest
import yaml

from controller import cli
from controller.clock import SimClock
from controller.config import ScenarioFault, config_from_mapping, resolve_config_path
from controller.runlog import read_log
from controller.schema import ConfigError
from drivers.cia402_protocol import CAN_ERR_BUSOFF, CAN_ERR_PROT
from drivers.odrive_codec import FirmwareVersion
from hil import fault_campaign
from hil.emu_cia402 import Cia402Emulator
from hil.emu_odrive_ascii import ODriveAsciiEmulator
from hil.emu_odrive_can import ODriveCanEmulator
from hil.fault_campaign import CASES, Case, Expect, case_config, check, rise_limit, run_case
from hil.fault_injection import SUPPORTED, FaultTrigger, injector

from .conftest import reference_config


def shipped_data() -> dict:
    return copy.deepcopy(yaml.safe_load(resolve_config_path("turntable").read_text(encoding="utf-8")))


def with_faults(faults) -> dict:
    data = shipped_data()
    data["scenarios"]["creep"]["faults"] = faults
    return data


# --- the schema -----------------------------------------------------------------------------------
def test_faults_parse_with_their_parameters():
    cfg = config_from_mapping(with_faults([
        {"at_s": 1.0, "kind": "inverted_sign"},
        {"at_s": 2.0, "kind": "load_step", "torque_nm": 5.5},
        {"at_s": 0.5, "kind": "frame_loss", "frames": 20},
    ]))
    faults = cfg.scenario("creep").faults
    assert [f.kind for f in faults] == ["inverted_sign", "load_step", "frame_loss"]
    assert faults[1].torque_nm == 5.5 and faults[2].frames == 20


def test_shipped_scenarios_inject_nothing():
    cfg = reference_config()
    assert all(sc.faults == () for sc in cfg.scenarios.values())


@pytest.mark.parametrize("fault, path, words", [
    ({"at_s": 1.0, "kind": "gremlin"}, "scenarios.creep.faults[0].kind", "must be one of"),
    ({"at_s": -0.1, "kind": "stale"}, "scenarios.creep.faults[0].at_s", ">= 0"),
    ({"at_s": ".inf", "kind": "stale"}, "scenarios.creep.faults[0].at_s", "finite"),
    ({"at_s": 12.0, "kind": "stale"}, "scenarios.creep.faults[0].at_s", "before the end"),
    ({"kind": "stale"}, "scenarios.creep.faults[0].at_s", "required key missing"),
    ({"at_s": 1.0, "kind": "load_step"}, "scenarios.creep.faults[0].torque_nm", "required"),
    ({"at_s": 1.0, "kind": "stale", "torque_nm": 1.0}, "scenarios.creep.faults[0].torque_nm",
     "only for kind load_step"),
    ({"at_s": 1.0, "kind": "stale", "frames": 3}, "scenarios.creep.faults[0].frames", "only for"),
    ({"at_s": 1.0, "kind": "error_frames"}, "scenarios.creep.faults[0].frames", ">= 1"),
    ({"at_s": 1.0, "kind": "stale", "when": 2}, "scenarios.creep.faults[0].when", "unknown key"),
])
def test_bad_faults_are_one_line_errors_at_the_key_path(fault, path, words):
    with pytest.raises(ConfigError) as err:
        config_from_mapping(with_faults([fault]))
    text = str(err.value)
    assert text.startswith(path + ":") and words in text and "\n" not in text


def test_a_fault_the_backend_cannot_take_is_exit_2(tmp_path, capsys):
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(with_faults([{"at_s": 0.1, "kind": "bus_off"}])))
    rc = cli.main(["sim", "--config", str(path), "--scenario", "creep", "--duration", "0.3",
                   "--no-plot", "--out", str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert rc == 2 and err.count("\n") == 1
    assert "scenarios.creep.faults[0].kind: bus_off cannot be injected on sim" in err


def test_sim_runs_a_scenario_fault_and_records_its_tick(tmp_path, capsys):
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(with_faults([{"at_s": 0.3, "kind": "nan_current"}])))
    rc = cli.main(["sim", "--config", str(path), "--scenario", "creep", "--duration", "0.6",
                   "--no-plot", "--out", str(tmp_path / "out")])
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert rc == 1
    assert summary["injected"] == [{"kind": "nan_current", "at_s": 0.3, "tick": 300}]
    assert summary["faults"][0].startswith("NON_FINITE")


# --- the trigger and the injection at the protocol level ------------------------------------------
def test_the_trigger_fires_on_the_first_tick_at_or_after_at_s():
    clock = SimClock()
    seen = []
    faults = [ScenarioFault(at_s=0.0105, kind="stale"), ScenarioFault(at_s=0.002, kind="stale")]
    trigger = FaultTrigger(clock, 0.001, faults, lambda f: seen.append((f.at_s, clock.now())))
    t0 = 0.001  # the loop's tick 0 deadline
    for k in range(20):
        trigger.sleep_until(t0 + k * 0.001)
    assert [k for k, _ in trigger.fired] == [2, 11]
    assert seen == [(0.002, pytest.approx(0.003)), (0.0105, pytest.approx(0.012))]


def _listener(channel: str) -> can.BusABC:
    return can.Bus(interface="virtual", channel=channel)


def _frames(bus: can.BusABC, n_max: int = 50) -> list[can.Message]:
    out = []
    while len(out) < n_max:
        msg = bus.recv(0.2)
        if msg is None:
            break
        out.append(msg)
    return out


def test_can_faults_are_real_frames_on_the_bus():
    plant = reference_config().plant
    with ODriveCanEmulator(plant, channel="fc-odrive", heartbeat_period_s=None) as emu, \
            _listener("fc-odrive") as bus:
        inject = injector("odrive_can", emu)
        inject(ScenarioFault(at_s=0.0, kind="bus_off"))
        inject(ScenarioFault(at_s=0.0, kind="error_frames", frames=3))
        errors = [m for m in _frames(bus) if m.is_error_frame]
    assert [m.arbitration_id for m in errors] == [CAN_ERR_BUSOFF] + [CAN_ERR_PROT] * 3
    with Cia402Emulator(plant, channel="fc-cia402", node_id=1) as emu, \
            _listener("fc-cia402") as bus:
        injector("cia402", emu)(ScenarioFault(at_s=0.0, kind="rtr"))
        remote = [m for m in _frames(bus) if m.is_remote_frame]
    assert [m.arbitration_id for m in remote] == [0x701]


def test_ascii_unplug_closes_the_pty():
    with ODriveAsciiEmulator(reference_config().plant) as emu:
        injector("odrive_ascii", emu)(ScenarioFault(at_s=0.0, kind="serial_unplug"))
        assert emu.port_closed


def test_every_case_is_injectable_on_its_backend():
    assert len(CASES) == 24
    assert {c.backend for c in CASES} == set(SUPPORTED)
    for case in CASES:
        assert case.fault.kind in SUPPORTED[case.backend], case.name


# --- campaign cases against their rows ------------------------------------------------------------
def _case(name: str) -> Case:
    return next(c for c in CASES if c.name == name)


SIM_CASES = [c.name for c in CASES if c.backend == "sim"]


@pytest.mark.parametrize("name", SIM_CASES)
def test_sim_cases_pass_their_rows(name, tmp_path):
    row = run_case(reference_config(), _case(name), tmp_path)
    assert row.passed, row.problems
    assert row.injected_tick == 500 and row.log_complete and not row.drive_enabled


def test_sim_rows_say_what_happened(tmp_path):
    cfg = reference_config()
    inverted = run_case(cfg, _case("sim/inverted_sign"), tmp_path / "a")
    assert inverted.category == "STO" and inverted.fault in ("VELOCITY_LIMIT", "FOLLOWING_ERROR")
    assert inverted.rise_after_sto_rad_s <= 1e-6  # the speed falls once the torque is off
    held = run_case(cfg, _case("sim/load_step 3 N·m, hold"), tmp_path / "b")
    assert held.category == "hold" and held.detected_ticks is None
    overhauling = run_case(cfg, _case("sim/load_step 5.5 N·m, hold"), tmp_path / "c")
    # beyond the torque authority nothing holds it: torque off, and it runs away unbraked
    assert overhauling.category == "STO" and overhauling.rise_after_sto_rad_s > 1.0


@pytest.mark.parametrize("name", ["cia402/frame_loss", "cia402/rtr", "cia402/idle_ignored",
                                  "odrive_can/bus_off", "odrive_can/drive_fault",
                                  "odrive_ascii/serial_unplug", "odrive_ascii/frame_loss",
                                  "odrive_ascii/idle_ignored"])
def test_emulator_cases_pass_their_rows(name, tmp_path):
    row = run_case(reference_config(), _case(name), tmp_path)
    assert row.passed, row.problems
    if name == "cia402/idle_ignored":  # the drive refused: the run says so, never "disabled"
        assert row.reported_enabled is True
        # and the drive's heartbeat consumer ended it once the master heartbeat stopped
        assert not row.drive_enabled
    if name in ("odrive_ascii/serial_unplug", "odrive_ascii/idle_ignored"):
        # the drive watchdog the driver set ended it: a disable the drive did not confirm
        # leaves the watchdog on (it is switched off only once IDLE is confirmed)
        assert not row.drive_enabled and row.reported_enabled is True
    if name == "odrive_can/bus_off":
        assert row.detected_ticks is not None and row.category == "STO"


def test_a_lost_link_allows_the_rise_until_the_drive_watchdog_ends_the_torque(tmp_path):
    """The host's STO cannot reach a drive whose link is lost: it applies the last command it
    received until its watchdog expires. The rise bound counts that window, from the last
    command beyond the Coulomb level; a case whose drive takes the STO keeps 8 counts/period."""
    row = run_case(reference_config(), _case("odrive_ascii/serial_unplug"), tmp_path)
    cfg = case_config(reference_config(), _case("odrive_ascii/serial_unplug"))
    margin = 8.0 * cfg.plant.encoder.rad_per_count * cfg.loop.rate_hz
    fc, wd, dt, J = cfg.plant.friction.Fc, cfg.drive.watchdog_timeout_s, cfg.loop.dt_s, cfg.plant.J
    assert rise_limit(cfg, row.expect, fc + 0.01) == pytest.approx(margin + 0.01 * (wd + dt) / J)
    assert rise_limit(cfg, row.expect, 0.5 * fc) == pytest.approx(margin)  # below Coulomb: no gain
    taken = _case("odrive_ascii/frame_loss").expect(cfg)
    assert rise_limit(cfg, taken, fc + 0.01) == pytest.approx(margin)
    assert rise_limit(cfg, row.expect, fc + 0.01) > margin
    # the check holds the row to its limit: just above it is a problem, just below is not
    assert row.passed, row.problems
    above = dataclasses.replace(row, rise_after_sto_rad_s=row.rise_limit_rad_s * 1.01 + 1e-9)
    assert any("speed rose" in p for p in check(above, cfg))
    within = dataclasses.replace(row, rise_after_sto_rad_s=row.rise_limit_rad_s * 0.99)
    assert not check(within, cfg)


# --- the command ----------------------------------------------------------------------------------
def test_faults_command_exits_1_when_a_case_fails_its_row(monkeypatch, tmp_path, capsys):
    good = _case("sim/nan_current")
    # the same fault, expected to be ridden through: impossible, so the case must fail
    impossible = dataclasses.replace(
        good, name="sim/nan_current expected harmless",
        expect=lambda cfg: Expect("SS1", None, "deliberately wrong"))
    monkeypatch.setattr(fault_campaign, "CASES", (good, impossible))
    rc = cli.main(["faults", "--protocol", "sim", "--out", str(tmp_path / "out")])
    out = capsys.readouterr().out
    assert rc == 1
    assert "| sim/nan_current | +0 | NON_FINITE | STO |" in out
    assert "FAIL: NON_FINITE detected, expected none; stop STO, expected SS1" in out
    assert "1/2 cases pass; failed: sim/nan_current expected harmless" in out
    rows = json.loads((tmp_path / "out" / "campaign.json").read_text())
    assert [r["passed"] for r in rows] == [True, False]
    monkeypatch.setattr(fault_campaign, "CASES", (good,))
    assert cli.main(["faults", "--protocol", "sim", "--out", str(tmp_path / "again")]) == 0


def test_hil_runs_a_scenario_fault_through_the_emulator(tmp_path, capsys):
    path = tmp_path / "c.yaml"
    data = with_faults([{"at_s": 0.3, "kind": "bus_off"}])
    data["drive"]["timeout_s"] = 0.05  # lockstep on a loaded machine: no spurious stale samples
    path.write_text(yaml.safe_dump(data))
    rc = cli.main(["hil", "--protocol", "odrive_can", "--config", str(path), "--scenario", "creep",
                   "--duration", "0.6", "--out", str(tmp_path / "out")])
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert rc == 1
    assert summary["injected"] == [{"kind": "bus_off", "at_s": 0.3, "tick": 300}]
    assert summary["faults"] and "bus off" in summary["faults"][0]
    assert summary["emulator_drive_enabled_at_exit"] is False
    capsys.readouterr()
    data["scenarios"]["creep"]["faults"] = [{"at_s": 0.3, "kind": "rtr"}]
    path.write_text(yaml.safe_dump(data))
    rc = cli.main(["hil", "--protocol", "odrive_ascii", "--config", str(path), "--scenario", "creep",
                   "--duration", "0.6", "--out", str(tmp_path / "refused")])
    err = capsys.readouterr().err
    assert rc == 2 and "scenarios.creep.faults[0].kind: rtr cannot be injected on odrive_ascii" in err


def test_the_loop_clock_is_the_trigger_only_while_a_fault_is_pending():
    """A scenario without faults runs on the plain clock (no per-tick cost for the trigger); with
    one, the loop's clock is the trigger until the fault has fired."""
    clock = SimClock()
    assert FaultTrigger(clock, 1e-3, [], lambda f: None).loop_clock is clock
    fired = []
    trigger = FaultTrigger(clock, 1e-3, [ScenarioFault(kind="stale", at_s=0.002)], fired.append)
    assert trigger.loop_clock is trigger
    for k in range(4):
        trigger.sleep_until(k * 1e-3)
    assert len(fired) == 1 and trigger.fired[0][0] == 2
    assert trigger.loop_clock is clock


# --- the emulated ODrive CAN firmware (drive.emulated_firmware) ------------------------------------
def test_drive_fault_is_the_drive_side_bit_of_the_emulated_firmware():
    """0x40 is MOTOR_FAILED on 0.5.6 but MISSING_INPUT on 0.6: a 0.6 axis gets DRV_FAULT (0x20)."""
    plant = reference_config().plant
    latched = {}
    for name, fw in (("0.5.6", None), ("0.6.10", FirmwareVersion(0, 6, 10))):
        with ODriveCanEmulator(plant, channel=f"fc-fw-{name}", heartbeat_period_s=None,
                               firmware=fw) as emu:
            injector("odrive_can", emu)(ScenarioFault(at_s=0.0, kind="drive_fault"))
            latched[name] = emu.axis_error
    assert latched == {"0.5.6": 0x40, "0.6.10": 0x20}


def test_hil_on_an_emulated_0_6_drive_reports_its_firmware_and_its_drive_fault(tmp_path, capsys):
    path = tmp_path / "c.yaml"
    data = with_faults([{"at_s": 0.3, "kind": "drive_fault"}])
    data["drive"]["timeout_s"] = 0.05  # lockstep on a loaded machine: no spurious stale samples
    data["drive"]["emulated_firmware"] = "0.6.10"
    path.write_text(yaml.safe_dump(data))
    rc = cli.main(["hil", "--protocol", "odrive_can", "--config", str(path), "--scenario", "creep",
                   "--duration", "0.6", "--out", str(tmp_path / "out")])
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert rc == 1
    assert summary["drive"]["firmware"].startswith("0.6.10")  # read by Get_Version at open
    assert summary["injected"] == [{"kind": "drive_fault", "at_s": 0.3, "tick": 300}]
    assert summary["faults"][0].startswith("DRIVE_FAULT: drive fault 0x20: DRV_FAULT")
    assert "MISSING_INPUT" not in summary["faults"][0]
    assert summary["emulator_drive_enabled_at_exit"] is False


def test_the_campaign_runs_on_the_emulated_firmware_of_its_config(tmp_path):
    data = shipped_data()
    data["drive"]["emulated_firmware"] = "0.6.4"
    row = run_case(config_from_mapping(data), _case("odrive_can/drive_fault"), tmp_path)
    assert row.passed, row.problems
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["drive"]["firmware"].startswith("0.6.4")
    assert "DRV_FAULT" in summary["faults"][0]


def test_a_hil_run_log_header_names_the_emulated_firmware(tmp_path):
    """The link opens before the run log's header is written, so the header carries the version
    the drive reported at open, as summary.json does (lockstep, in-process emulator)."""
    from hil.hil_session import hil_run

    data = shipped_data()
    data["drive"]["emulated_firmware"] = "0.6.10"
    summary = hil_run(config_from_mapping(data), "odrive_can", "creep", tmp_path, duration_s=0.1,
                      plot=False)
    assert summary["drive"]["firmware"].startswith("0.6.10")
    assert read_log(tmp_path / "run.fctl").header["drive_firmware"] == summary["drive"]["firmware"]


def test_the_emulator_process_speaks_the_configured_firmware(tmp_path):
    """``hil --realtime --process``: the firmware crosses to the emulator in its own process (a
    0.5.6 emulator would stay silent on Get_Version: firmware not reported)."""
    pytest.importorskip("msgpack")
    from hil.hil_session import bench_config, hil_run

    data = shipped_data()
    data["drive"]["emulated_firmware"] = "0.6.3"
    cfg, _ = bench_config(config_from_mapping(data), "odrive_can", rate_hz=200.0)  # as `hil --rate`
    summary = hil_run(cfg, "odrive_can", "creep", tmp_path, duration_s=0.2, realtime=True,
                      separate_process=True, plot=False)
    assert summary["drive"]["firmware"].startswith("0.6.3")
    # the link opens before the log's header is written: the header names the firmware too
    assert read_log(tmp_path / "run.fctl").header["drive_firmware"] == summary["drive"]["firmware"]


def test_the_emulator_process_refuses_a_firmware_it_cannot_speak(capsys):
    from hil import emulator_process

    with pytest.raises(SystemExit) as info:
        emulator_process.main(["--config", "x.yaml", "--protocol", "odrive_can", "--channel",
                               "239.1.1.1", "--node-id", "1", "--firmware", "0.7.1"])
    assert info.value.code == 2
    assert "--firmware: must be \"0.5.6\" or \"0.6.<n>\", got '0.7.1'" in capsys.readouterr().err
