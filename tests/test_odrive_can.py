"""ODrive CAN Simple: golden bytes of the codec, the official DBC, and the driver against the
emulated drive on a python-can virtual bus (lockstep unless stated)."""

from __future__ import annotations

import dataclasses
import math
import re
import time
import uuid
from pathlib import Path

import can
import can.interfaces.virtual as can_virtual
import pytest

from controller.clock import RealClock, SimClock
from controller.config import Config
from controller.schema import ConfigError
from drivers.backend import DriveState
from drivers.errors import EnableError, ProtocolError
from drivers.odrive_can import ODriveCanBackend, can_frame_bits, max_rate_for_bitrate, tick_bits
from drivers.odrive_codec import (AxisError, AxisState, Cmd, ControlMode, Frame, Heartbeat,
                                  InputMode, arbitration_id, axis_error_text, decode_bus_voltage_current,
                                  decode_encoder_estimates, decode_heartbeat, decode_iq,
                                  decode_motor_error, decode_set_axis_state,
                                  decode_set_controller_mode, decode_set_input_torque,
                                  decode_set_limits, encode_bus_voltage_current, encode_clear_errors,
                                  encode_encoder_estimates, encode_estop, encode_heartbeat, encode_iq,
                                  encode_motor_error, encode_request, encode_set_axis_state,
                                  encode_set_controller_mode, encode_set_input_torque,
                                  encode_set_limits)
from hil.emu_odrive_can import ODriveCanEmulator
from hil.odrive_axis import EmuMode

from .odrive_helpers import (DT, check_idle_after_close_and_after_exception, check_realtime_pd,
                             made_by, pd_ticks, read_through_dropped_reply, run_then_go_silent)

DATA = Path(__file__).resolve().parents[2] / "shared" / "data"
DBC = DATA / "odrive-cansimple-0.5.6.dbc"
NODE = 3
WATCHDOG_S = 0.05  # the emulated drive's watchdog and the config's, unless a test says otherwise


# --- fixtures: nothing may outlive a test --------------------------------------------------------


@pytest.fixture(autouse=True)
def no_leaks():
    """Fail a test that leaves a virtual bus channel or an emulator thread behind."""
    import threading

    before = set(can_virtual.channels)
    yield
    left = set(can_virtual.channels) - before
    threads = [t.name for t in threading.enumerate() if t.name.startswith("odrive-can-emu")]
    assert not left, f"virtual CAN channels left open: {left}"
    assert not threads, f"emulator threads left running: {threads}"


@pytest.fixture
def channel() -> str:
    return f"odrive-test-{uuid.uuid4().hex[:8]}"


@pytest.fixture
def cfg(ref_cfg: Config, channel: str) -> Config:
    drive = dataclasses.replace(ref_cfg.drive, protocol="odrive_can", interface="virtual",
                                channel=channel, node_id=NODE, timeout_s=0.05,
                                heartbeat_timeout_s=0.15, watchdog_timeout_s=WATCHDOG_S)
    return dataclasses.replace(ref_cfg, drive=drive)


@pytest.fixture
def make_emu(cfg: Config, channel: str):
    def build(**kw) -> ODriveCanEmulator:
        kw.setdefault("heartbeat_period_s", 0.01)
        kw.setdefault("dt_s", DT)
        kw.setdefault("watchdog_timeout_s", WATCHDOG_S)
        return ODriveCanEmulator(cfg.plant, channel=channel, node_id=NODE, seed=1, **kw).start()

    yield from made_by(build, ODriveCanEmulator.stop)


@pytest.fixture
def make_backend(cfg: Config):
    def build(clock=None, **drive_changes) -> ODriveCanBackend:
        c = dataclasses.replace(cfg, drive=dataclasses.replace(cfg.drive, **drive_changes))
        return ODriveCanBackend.from_config(c, clock or SimClock())

    yield from made_by(build, ODriveCanBackend.close)


# --- codec: golden bytes (hand-computed: 1.5 = 0x3FC00000, -0.25 = 0xBE800000, 0.5 = 0x3F000000,
# 2.0 = 0x40000000, 10.0 = 0x41200000, 1.0 = 0x3F800000, -2.0 = 0xC0000000, 24.0 = 0x41C00000) ---

GOLDEN = [
    # (frame, arbitration id, data hex, rtr)
    (encode_heartbeat(NODE, Heartbeat(0x800, AxisState.IDLE)), 0x061, "0008000001000000", False),
    (encode_heartbeat(NODE, Heartbeat(0x4000, AxisState.CLOSED_LOOP_CONTROL, True, True, True, True)),
     0x061, "0040000008010181", False),
    (encode_estop(NODE), 0x062, "", False),
    (encode_motor_error(NODE, 0x1_0000_0001), 0x063, "0100000001000000", False),
    (encode_set_axis_state(NODE, AxisState.CLOSED_LOOP_CONTROL), 0x067, "0800000000000000", False),
    (encode_encoder_estimates(NODE, 1.5, -0.25), 0x069, "0000c03f000080be", False),
    (encode_request(NODE, Cmd.GET_ENCODER_ESTIMATES), 0x069, "", True),
    (encode_request(NODE, Cmd.GET_IQ, rtr=False), 0x074, "", False),
    (encode_set_controller_mode(NODE, ControlMode.TORQUE_CONTROL, InputMode.PASSTHROUGH),
     0x06B, "0100000001000000", False),
    (encode_set_input_torque(NODE, 0.5), 0x06E, "0000003f00000000", False),
    (encode_set_limits(NODE, 2.0, 10.0), 0x06F, "0000004000002041", False),
    (encode_iq(NODE, 1.0, -2.0), 0x074, "0000803f000000c0", False),
    (encode_bus_voltage_current(NODE, 24.0, 0.5), 0x077, "0000c0410000003f", False),
    (encode_clear_errors(NODE), 0x078, "", False),
]


@pytest.mark.parametrize("frame, arb_id, data_hex, rtr", GOLDEN, ids=[f"{g[1]:03X}" for g in GOLDEN])
def test_encode_golden_bytes(frame: Frame, arb_id: int, data_hex: str, rtr: bool) -> None:
    assert frame.arbitration_id == arb_id
    assert frame.data == bytes.fromhex(data_hex)
    assert frame.rtr is rtr


def test_decode_golden_bytes() -> None:
    f = lambda cmd, hexdata: Frame(arbitration_id(NODE, cmd), bytes.fromhex(hexdata))  # noqa: E731
    assert decode_heartbeat(f(Cmd.HEARTBEAT, "0040000008010181")) == Heartbeat(
        0x4000, AxisState.CLOSED_LOOP_CONTROL, True, True, True, True)
    enc = decode_encoder_estimates(f(Cmd.GET_ENCODER_ESTIMATES, "0000c03f000080be"))
    assert (enc.pos_turns, enc.vel_turns_s) == (1.5, -0.25)
    iq = decode_iq(f(Cmd.GET_IQ, "0000803f000000c0"))
    assert (iq.setpoint_a, iq.measured_a) == (1.0, -2.0)
    bus = decode_bus_voltage_current(f(Cmd.GET_BUS_VOLTAGE_CURRENT, "0000c0410000003f"))
    assert (bus.voltage_v, bus.current_a) == (24.0, 0.5)
    assert decode_set_axis_state(f(Cmd.SET_AXIS_STATE, "0800000000000000")) == 8
    assert decode_set_controller_mode(f(Cmd.SET_CONTROLLER_MODE, "0100000001000000")) == (1, 1)
    assert decode_set_input_torque(f(Cmd.SET_INPUT_TORQUE, "0000003f00000000")) == 0.5
    assert decode_set_limits(f(Cmd.SET_LIMITS, "0000004000002041")) == (2.0, 10.0)
    assert decode_motor_error(f(Cmd.GET_MOTOR_ERROR, "0100000001000000")) == 0x1_0000_0001


def test_arbitration_id_range() -> None:
    assert arbitration_id(0x3F, 0x1F) == 0x7FF
    with pytest.raises(ValueError):
        arbitration_id(0x40, 0x01)
    assert Frame(0x069).node_id == 3 and Frame(0x069).cmd == 0x09


@pytest.mark.parametrize("frame, where", [
    (Frame(0x069, bytes(4)), "0x069 (Get_Encoder_Estimates): 4 data bytes"),
    (Frame(0x069, bytes.fromhex("0000c03f0000c07f")), "0x069 (Get_Encoder_Estimates) byte 4"),  # NaN
    (Frame(0x061, bytes.fromhex("0000000005000000")), "0x061 (Heartbeat) byte 4: unknown axis state 5"),
    (Frame(0x074, b"", rtr=True), "0x074 (Get_Iq): remote frame"),
])
def test_decode_errors_name_frame_and_offset(frame: Frame, where: str) -> None:
    decoder = {0x09: decode_encoder_estimates, 0x01: decode_heartbeat, 0x14: decode_iq}[frame.cmd]
    with pytest.raises(ProtocolError, match=re.escape(where)):
        decoder(frame)


def test_axis_error_text() -> None:
    assert axis_error_text(0) == "NONE"
    assert axis_error_text(0x800).startswith("WATCHDOG_TIMER_EXPIRED")
    both = axis_error_text(0x4800)
    assert "WATCHDOG_TIMER_EXPIRED" in both and "ESTOP_REQUESTED" in both
    assert axis_error_text(0x800 | 0x4).endswith("unknown bits 0x4")


# --- the official DBC ----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def dbc():
    if not DBC.exists():
        pytest.skip(f"{DATA} absent: ODrive DBC not available")
    cantools = pytest.importorskip("cantools")
    return cantools.database.load_file(str(DBC))


def dbc_decode(db, arb_id: int, data: bytes) -> tuple[str, dict]:
    """Decode with the Axis0 entry of the command (the DBC names nodes 0–7 only)."""
    msg = db.get_message_by_frame_id(arb_id & 0x1F)
    return msg.name, msg.decode(data, decode_choices=False)


def test_tables_match_dbc(dbc) -> None:
    hb = dbc.get_message_by_name("Axis0_Heartbeat")
    choices = {int(k): str(v) for k, v in hb.get_signal_by_name("Axis_Error").choices.items()}
    assert {int(m): m.name for m in AxisError if m} == {k: v for k, v in choices.items() if k}
    states = {int(k): str(v) for k, v in hb.get_signal_by_name("Axis_State").choices.items()}
    assert states == {int(s): s.name for s in AxisState}


def test_our_frames_decode_with_dbc(dbc) -> None:
    """The frames of the golden table, as the official DBC reads them."""
    cases = [
        (GOLDEN[1][0], "Axis0_Heartbeat", {"Axis_Error": 0x4000, "Axis_State": 8, "Motor_Error_Flag": 1,
                                           "Encoder_Error_Flag": 1, "Controller_Error_Flag": 1,
                                           "Trajectory_Done_Flag": 1}),
        (GOLDEN[4][0], "Axis0_Set_Axis_State", {"Axis_Requested_State": 8}),
        (GOLDEN[5][0], "Axis0_Get_Encoder_Estimates", {"Pos_Estimate": 1.5, "Vel_Estimate": -0.25}),
        (GOLDEN[8][0], "Axis0_Set_Controller_Mode", {"Control_Mode": 1, "Input_Mode": 1}),
        (GOLDEN[9][0], "Axis0_Set_Input_Torque", {"Input_Torque": 0.5}),
        (GOLDEN[10][0], "Axis0_Set_Limits", {"Velocity_Limit": 2.0, "Current_Limit": 10.0}),
        (GOLDEN[11][0], "Axis0_Get_Iq", {"Iq_Setpoint": 1.0, "Iq_Measured": -2.0}),
        (GOLDEN[12][0], "Axis0_Get_Bus_Voltage_Current", {"Bus_Voltage": 24.0, "Bus_Current": 0.5}),
    ]
    for frame, name, expected in cases:
        assert dbc_decode(dbc, frame.arbitration_id, frame.data) == (name, pytest.approx(expected))
    for frame in (GOLDEN[2][0], GOLDEN[13][0]):  # Estop is not in the DBC; Clear_Errors has DLC 0
        assert frame.data == b""
    assert dbc.get_message_by_name("Axis0_Clear_Errors").length == 0


def test_dbc_slips_documented(dbc) -> None:
    """Known slips of the 0.5.6 DBC (shared/data/README): Motor_Error is 64 bits on the wire but
    32 in the DBC — the DBC loses the high word; Set_Input_Vel's units are swapped."""
    frame = encode_motor_error(NODE, 0x1_0000_0001)
    _, values = dbc_decode(dbc, frame.arbitration_id, frame.data)
    assert values["Motor_Error"] == 1 and decode_motor_error(frame) == 0x1_0000_0001
    vel = dbc.get_message_by_name("Axis0_Set_Input_Vel")
    assert vel.get_signal_by_name("Input_Vel").unit == "rev"  # should be rev/s


@pytest.mark.parametrize("suffix", [".log", ".asc"])
def test_captured_traffic_decodes_with_dbc(dbc, make_emu, make_backend, tmp_path, suffix) -> None:
    """Every data frame of a real exchange, both directions, decodes with the official DBC."""
    path = tmp_path / f"trace{suffix}"
    emu = make_emu(capture=path, heartbeat_every_ticks=5)
    clock = SimClock()
    backend = make_backend(clock)
    with backend:
        backend.enable()
        pd_ticks(backend, clock, 20, 0.001)
    emu.stop()
    names = set()
    for msg in can.LogReader(path):
        if msg.is_error_frame or msg.is_remote_frame or msg.dlc == 0:
            continue
        name, values = dbc_decode(dbc, msg.arbitration_id, bytes(msg.data))
        assert all(math.isfinite(v) for v in values.values()), (name, values)
        names.add(name)
    assert names >= {"Axis0_Heartbeat", "Axis0_Set_Controller_Mode", "Axis0_Set_Axis_State",
                     "Axis0_Set_Input_Torque", "Axis0_Get_Encoder_Estimates", "Axis0_Get_Iq"}


# --- driver against the emulator -----------------------------------------------------------------


def test_closed_loop_end_to_end(make_emu, make_backend) -> None:
    emu = make_emu(watchdog_timeout_s=0.5)
    clock = SimClock()
    backend = make_backend(clock, watchdog_timeout_s=0.5)
    with backend:
        backend.enable()
        assert emu.axis_state == AxisState.CLOSED_LOOP_CONTROL  # enable returned once it was
        samples = pd_ticks(backend, clock, 300, 0.01)
        assert [s.sequence for s in samples] == list(range(samples[0].sequence, samples[0].sequence + 300))
        assert all(s.state == DriveState.ENABLED and s.age_s == 0.0 for s in samples)
        assert all(math.isnan(s.torque_nm) for s in samples)
        assert samples[-1].position_rad == pytest.approx(0.01, abs=3e-4)
        assert emu.plant.theta_rad == pytest.approx(0.01, abs=3e-4)
        assert abs(samples[-1].current_a) < 1.0
        backend.disable()
        assert emu.wait_for(lambda e: e.axis_state == AxisState.IDLE, 1.0)
    assert emu.axis_error == 0


def test_lockstep_is_deterministic(cfg, channel) -> None:
    def run() -> list[float]:
        with ODriveCanEmulator(cfg.plant, channel=channel, node_id=NODE, seed=7,
                               heartbeat_period_s=0.01, watchdog_timeout_s=WATCHDOG_S):
            clock = SimClock()
            with ODriveCanBackend.from_config(cfg, clock) as backend:
                backend.enable()
                return [(s.position_rad, s.current_a) for s in pd_ticks(backend, clock, 100, 0.005)]

    assert run() == run()


def test_cyclic_feedback_without_requests(make_emu, cfg) -> None:
    emu = make_emu(cyclic_feedback=True)
    clock = SimClock()
    with ODriveCanBackend(clock, node_id=NODE, interface="virtual", channel=cfg.drive.channel,
                          timeout_s=0.05, cyclic_feedback=True, watchdog_timeout_s=WATCHDOG_S) as backend:
        backend.enable()
        samples = pd_ticks(backend, clock, 100, 0.005)
    assert emu.requests_answered == 0
    seqs = [s.sequence for s in samples]
    assert all(b > a for a, b in zip(seqs, seqs[1:]))
    assert samples[-1].position_rad == pytest.approx(0.005, abs=3e-4)


def test_realtime_mode(make_emu, make_backend) -> None:
    """The plant runs on the wall clock (see check_realtime_pd)."""
    emu = make_emu(mode=EmuMode.REALTIME, dt_s=0.002)
    clock = RealClock(spin_s=0.0005)
    check_realtime_pd(emu, make_backend(clock), clock)


def test_idle_after_close_and_after_exception(make_emu, make_backend) -> None:
    check_idle_after_close_and_after_exception(make_emu(), make_backend())


def test_lost_reply_gives_stale_sample_after_timeout(make_emu, make_backend) -> None:
    emu = make_emu()
    backend = make_backend(timeout_s=0.03)
    with backend:
        backend.enable()
        first = read_through_dropped_reply(emu, backend, 0.03)  # drops the encoder reply
        assert backend.read().sequence == first.sequence + 1
        emu.delay_next(2, 0.2)  # both replies later than the timeout
        assert backend.read().sequence == first.sequence + 1


def test_heartbeat_axis_error_is_a_fault_with_text(make_emu, make_backend) -> None:
    emu = make_emu()
    backend = make_backend()
    with backend:
        backend.enable()
        assert backend.read().state == DriveState.ENABLED
        emu.inject_axis_error(AxisError.ESTOP_REQUESTED | AxisError.OVER_TEMP)
        fb = backend.read()
        assert fb.state == DriveState.FAULT
        assert fb.fault_code == 0x44000
        assert "ESTOP_REQUESTED" in fb.fault_text and "OVER_TEMP" in fb.fault_text
        backend.disable()
        # a latched error refuses enable, reset_fault clears it
        with pytest.raises(EnableError, match="ESTOP_REQUESTED"):
            backend.enable()
        backend.reset_fault()
        assert emu.wait_for(lambda e: e.axis_error == 0, 1.0)
        emu.send_heartbeat()
        backend.enable()
        assert backend.read().state == DriveState.ENABLED


def test_left_closed_loop_while_enabled_is_a_fault(make_emu, make_backend) -> None:
    emu = make_emu()
    backend = make_backend()
    with backend:
        backend.enable()
        with emu._lock:
            emu.axis.request_state(AxisState.IDLE, time.monotonic())
        emu.send_heartbeat()
        fb = backend.read()
        assert fb.state == DriveState.FAULT and "IDLE while enabled" in fb.fault_text


def test_no_heartbeat_refuses_enable(make_emu, make_backend) -> None:
    emu = make_emu(heartbeat_period_s=None)
    backend = make_backend()
    with backend:
        t0 = time.monotonic()
        with pytest.raises(EnableError, match="no heartbeat from node 3"):
            backend.enable()
        assert time.monotonic() - t0 == pytest.approx(0.15, abs=0.1)
        assert not backend.enabled
    assert emu.axis_state == AxisState.IDLE


def test_heartbeat_lost_is_a_fault(make_emu, make_backend) -> None:
    emu = make_emu()
    backend = make_backend(timeout_s=0.02)
    with backend:
        backend.enable()
        emu.stop()
        deadline = time.monotonic() + 2.0
        fb = backend.read()
        while fb.state != DriveState.FAULT and time.monotonic() < deadline:
            fb = backend.read()
        assert fb.state == DriveState.FAULT and "heartbeat lost" in fb.fault_text


def test_drive_watchdog_expires_when_the_driver_stops_sending(make_emu, make_backend) -> None:
    emu = make_emu(watchdog_timeout_s=0.05, mode=EmuMode.REALTIME)
    clock = SimClock()
    backend = make_backend(clock, watchdog_timeout_s=0.05)
    with backend:
        run_then_go_silent(emu, backend, clock, 50)
        assert emu.axis_state == AxisState.IDLE
        emu.send_heartbeat()
        fb = backend.read()
        assert fb.state == DriveState.FAULT and "WATCHDOG_TIMER_EXPIRED" in fb.fault_text


def test_expire_watchdog_injection(make_emu, make_backend) -> None:
    emu = make_emu()
    backend = make_backend()
    with backend:
        backend.enable()
        emu.expire_watchdog()
        fb = backend.read()
        assert fb.state == DriveState.FAULT and fb.fault_code == 0x800


def test_error_frame_is_counted_not_fatal(make_emu, make_backend) -> None:
    emu = make_emu()
    backend = make_backend()
    with backend:
        backend.enable()
        before = backend.read()
        emu.send_error_frame()
        fb = backend.read()
        assert backend.error_frames == 1
        assert fb.state == DriveState.ENABLED and fb.sequence == before.sequence + 1


def test_bus_off_error_frame_is_a_fault(make_emu, make_backend) -> None:
    emu = make_emu()
    backend = make_backend()
    with backend:
        backend.enable()
        assert backend.read().state == DriveState.ENABLED
        emu.send_error_frame(0x040)  # CAN_ERR_BUSOFF
        fb = backend.read()
        assert fb.state == DriveState.FAULT and "bus off" in fb.fault_text
        assert backend.read().state == DriveState.FAULT  # latched until reopened


def test_emulator_answers_rtr_and_dlc0_requests(make_emu, channel) -> None:
    make_emu()
    with can.Bus(interface="virtual", channel=channel) as bus:
        for rtr in (True, False):
            request = encode_request(NODE, Cmd.GET_BUS_VOLTAGE_CURRENT, rtr=rtr)
            bus.send(can.Message(arbitration_id=request.arbitration_id, is_remote_frame=rtr,
                                 dlc=0, is_extended_id=False))
            deadline = time.monotonic() + 1.0
            while time.monotonic() < deadline:
                msg = bus.recv(0.5)
                if msg is not None and msg.arbitration_id == 0x077:
                    break
            assert msg is not None and msg.arbitration_id == 0x077
            reply = decode_bus_voltage_current(Frame(msg.arbitration_id, bytes(msg.data)))
            assert reply.voltage_v == 24.0


def test_data_frame_requests_work_end_to_end(make_emu, cfg) -> None:
    make_emu()
    clock = SimClock()
    with ODriveCanBackend(clock, node_id=NODE, interface="virtual", channel=cfg.drive.channel,
                          timeout_s=0.05, rtr_requests=False, watchdog_timeout_s=WATCHDOG_S) as backend:
        backend.enable()
        assert backend.read().sequence == 1


def test_from_config_refusals(cfg) -> None:
    bad_node = dataclasses.replace(cfg, drive=dataclasses.replace(cfg.drive, node_id=64))
    with pytest.raises(ConfigError, match=r"drive.node_id: 64 out of range"):
        ODriveCanBackend.from_config(bad_node, SimClock())
    short_watchdog = dataclasses.replace(cfg, drive=dataclasses.replace(cfg.drive, watchdog_timeout_s=0.001))
    with pytest.raises(ConfigError, match=r"drive.watchdog_timeout_s"):
        ODriveCanBackend.from_config(short_watchdog, SimClock())
    slow_bus = dataclasses.replace(cfg, drive=dataclasses.replace(cfg.drive, interface="socketcan",
                                                                  bitrate=250_000))
    with pytest.raises(ConfigError, match=r"loop.rate_hz: 1000 Hz .* 250000: at most 388 Hz"):
        ODriveCanBackend.from_config(slow_bus, SimClock())


def test_bus_budget() -> None:
    assert can_frame_bits(0) == 55 and can_frame_bits(8) == 135  # worst-case stuffing
    assert tick_bits(cyclic_feedback=False) == 515 and tick_bits(cyclic_feedback=True) == 405
    assert max_rate_for_bitrate(1_000_000, False) == pytest.approx(0.8e6 / 515)


def test_hil_emulated_drive_watchdog_idles_a_silent_controller(ref_cfg) -> None:
    """The HIL bench's emulated ODrive runs the watchdog the config states: a controller that
    stops talking (SIGSTOP, kill -9) leaves the axis IDLE with zero current, not torque applied."""
    from hil.hil_session import hil_rig
    from hil.odrive_axis import AxisState

    cfg = dataclasses.replace(ref_cfg, drive=dataclasses.replace(
        ref_cfg.drive, watchdog_timeout_s=0.05, heartbeat_timeout_s=0.5))
    with hil_rig(cfg, "odrive_can", realtime=True, seed=1) as rig:
        rig.backend.open()
        rig.backend.enable()
        rig.backend.write(0.3)
        axis = rig.emulator.axis
        assert axis.state == AxisState.CLOSED_LOOP_CONTROL
        deadline = time.monotonic() + 2.0  # the controller is silent from here on
        while axis.state == AxisState.CLOSED_LOOP_CONTROL and time.monotonic() < deadline:
            time.sleep(0.01)  # wall time is what the drive's watchdog counts
        assert axis.state == AxisState.IDLE
        assert axis.heartbeat().axis_error != 0  # WATCHDOG_TIMER_EXPIRED
        assert axis.current_command_a() == 0.0


# --- drive-side protection, confirmed disable, firmware version, any frame -------------------------


def test_watchdog_check_confirms_the_drive_watchdog(make_emu, make_backend) -> None:
    """CAN Simple 0.5.6 cannot read the watchdog config: enable checks it by going silent in
    CLOSED_LOOP at zero torque until a heartbeat reports WATCHDOG_TIMER_EXPIRED, clears it, and
    only then enables for the loop."""
    emu = make_emu()
    backend = make_backend()
    with backend:
        backend.enable()
        assert WATCHDOG_S <= backend.watchdog_confirmed_s < WATCHDOG_S + 0.5
        assert backend.unprotected == "" and emu.axis_error == 0
        assert emu.axis_state == AxisState.CLOSED_LOOP_CONTROL and emu.axis.input_torque_nm == 0.0
        assert backend.read().state == DriveState.ENABLED


def test_drive_without_watchdog_is_refused(make_emu, make_backend) -> None:
    emu = make_emu(watchdog_timeout_s=None)  # enable_watchdog False, the firmware default
    backend = make_backend()
    with backend:
        with pytest.raises(EnableError) as info:
            backend.enable()
        message = str(info.value)
        assert "did not expire within" in message and "drive.allow_unprotected: true" in message
        assert "\n" not in message and not backend.enabled
        assert emu.axis_state == AxisState.IDLE  # the check put it back, confirmed
        with pytest.raises(EnableError, match="did not expire"):  # still refused, no new check
            backend.enable()


def test_opt_out_enables_unprotected_with_a_warning_each_time(make_emu, make_backend, caplog) -> None:
    emu = make_emu(watchdog_timeout_s=None)
    backend = make_backend(allow_unprotected=True)
    with backend:
        for _ in range(2):
            backend.enable()
            assert emu.axis_state == AxisState.CLOSED_LOOP_CONTROL
            backend.disable()
    assert sum("UNPROTECTED" in r.getMessage() for r in caplog.records) == 2


def test_watchdog_inf_in_the_config_is_unprotected(make_emu, make_backend) -> None:
    make_emu()
    with make_backend(watchdog_timeout_s=math.inf) as backend:
        with pytest.raises(EnableError, match=r"watchdog_timeout_s is \.inf"):
            backend.enable()


def test_disable_waits_for_the_heartbeat_to_report_idle(make_emu, make_backend) -> None:
    emu = make_emu(heartbeat_period_s=0.05)
    backend = make_backend(heartbeat_timeout_s=0.3)
    with backend:
        backend.enable()
        seq = backend._heartbeat_seq
        backend.disable()
        assert not backend.enabled
        assert backend._heartbeat_seq > seq and backend.last_heartbeat.axis_state == AxisState.IDLE
        assert emu.axis_state == AxisState.IDLE


def test_disable_without_a_heartbeat_is_not_confirmed(make_emu, make_backend) -> None:
    """The drive stops reporting: IDLE is sent, but nothing confirms it, so the backend says so
    (``enabled`` stays True, the loop logs the drive as not confirmed disabled)."""
    from drivers.errors import CommunicationError

    emu = make_emu()
    backend = make_backend(state_timeout_s=0.1)
    with backend:
        backend.enable()
        emu.heartbeat_period_s = None  # no heartbeat from here on
        t0 = time.monotonic()
        with pytest.raises(CommunicationError, match=r"disable not confirmed within 0.1 s"):
            backend.disable()
        assert time.monotonic() - t0 >= 0.1
        assert backend.enabled
        assert emu.wait_for(lambda e: e.axis_state == AxisState.IDLE, 1.0)  # it did go IDLE
        emu.heartbeat_period_s = 0.01
        backend.disable()
        assert not backend.enabled


@pytest.mark.parametrize("version, accepted", [((0, 5, 6), True), ((0, 6, 10), False), ((0, 4, 12), False)])
def test_firmware_version_read_and_checked(make_emu, make_backend, version, accepted) -> None:
    from drivers.odrive_codec import FirmwareVersion

    fw = FirmwareVersion(*version, hardware=(3, 6, 56))
    make_emu(firmware=fw)
    with make_backend() as backend:
        if accepted:
            backend.enable()
            assert backend.firmware == fw
        else:
            with pytest.raises(EnableError) as info:
                backend.enable()
            text = str(info.value)
            assert f"firmware {'.'.join(map(str, version))} (hardware 3.6-56)" in text and "\n" not in text
            assert backend.read().state == DriveState.FAULT


def test_a_firmware_answer_after_enable_still_refuses(make_emu, make_backend, channel) -> None:
    """The Get_Version answer to the request sent at open may arrive late on a loaded link
    (after enable began): it still counts, and a firmware the driver does not speak latches the
    fault it would have refused enable with."""
    from drivers.odrive_codec import FirmwareVersion, encode_version

    make_emu()  # silent on Get_Version until the late answer below
    with make_backend() as backend:
        backend.enable()
        assert backend.firmware is None and backend.read().state == DriveState.ENABLED
        frame = encode_version(NODE, FirmwareVersion(0, 6, 10, hardware=(3, 6, 56)))
        with can.Bus(interface="virtual", channel=channel) as bus:
            bus.send(can.Message(arbitration_id=frame.arbitration_id, data=frame.data,
                                 is_extended_id=False))
        deadline = time.monotonic() + 2.0
        fb = backend.read()
        while fb.state != DriveState.FAULT and time.monotonic() < deadline:
            fb = backend.read()
        assert fb.state == DriveState.FAULT
        assert "firmware 0.6.10" in fb.fault_text
        assert backend.firmware == FirmwareVersion(0, 6, 10, hardware=(3, 6, 56))


def test_firmware_0_5_6_has_no_get_version(make_emu, make_backend) -> None:
    make_emu()
    with make_backend() as backend:
        backend.enable()
        assert backend.firmware is None


def test_any_frame_on_the_nodes_ids_is_survived(make_emu, make_backend, channel) -> None:
    """Error frames (not bus-off), RTR and zero-length frames on every command id, 8-byte
    garbage on every drive→host id: nothing raises, nothing is taken for a sample, the loop
    runs on once a real heartbeat has followed."""
    emu = make_emu()
    clock = SimClock()
    backend = make_backend(clock)
    garbage = bytes([0xFF, 0xFF, 0xFF, 0x7F, 0xEE, 0x80, 0x01, 0xFF])
    skip = {Cmd.ESTOP, 0x16, Cmd.CLEAR_ERRORS}  # DLC-0 commands: an empty frame is the command
    drive_to_host = {Cmd.GET_VERSION, Cmd.HEARTBEAT, Cmd.GET_MOTOR_ERROR, 0x04, 0x05, Cmd.GET_ENCODER_ESTIMATES,
                     0x0A, Cmd.GET_IQ, 0x15, Cmd.GET_BUS_VOLTAGE_CURRENT, 0x1C}
    with backend:
        backend.enable()
        pd_ticks(backend, clock, 5, 0.0)
        with can.Bus(interface="virtual", channel=channel) as bus:
            for error_class in (0x001, 0x004, 0x008, 0x010, 0x020):
                bus.send(can.Message(arbitration_id=error_class, is_error_frame=True, data=garbage))
            for cmd in range(32):
                arb = arbitration_id(NODE, cmd)
                if cmd not in skip:
                    bus.send(can.Message(arbitration_id=arb, is_remote_frame=True, dlc=8, is_extended_id=False))
                    bus.send(can.Message(arbitration_id=arb, data=b"", is_extended_id=False))
                if cmd in drive_to_host:
                    bus.send(can.Message(arbitration_id=arb, data=garbage, is_extended_id=False))
        emu.send_heartbeat()  # a real one after the garbage
        samples = pd_ticks(backend, clock, 20, 0.0)
        assert all(s.state == DriveState.ENABLED for s in samples), samples[-1].fault_text
        assert all(math.isfinite(s.position_rad) and math.isfinite(s.current_a) for s in samples)
        assert backend.error_frames == 5 and backend.rejected_frames >= 2
    assert emu.axis_state == AxisState.IDLE
