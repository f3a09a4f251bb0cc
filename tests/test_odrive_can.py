"""ODrive CAN Simple: golden bytes of the codec, the official DBC, and the driver against the
emulated drive on a python-can virtual bus (lockstep unless stated). The driver's behaviour that
must hold on both firmware lines runs against an emulated 0.5.6 (silent on Get_Version) and an
emulated 0.6.10 (``@BOTH_FIRMWARES``)."""

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
from drivers.errors import BackendError, EnableError, ProtocolError
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
                                  encode_set_limits, FirmwareVersion)
from drivers.odrive_dialect import DIALECT_05, DIALECT_06, Dialect
from hil.emu_odrive_can import ODriveCanEmulator
from hil.odrive_axis import EmuMode

from .odrive_helpers import (DT, check_idle_after_close_and_after_exception, check_realtime_pd,
                             made_by, pd_ticks, read_through_dropped_reply, run_then_go_silent)

DATA = Path(__file__).resolve().parents[2] / "shared" / "data"
DBC = DATA / "odrive-cansimple-0.5.6.dbc"
NODE = 3
WATCHDOG_S = 0.05  # the emulated drive's watchdog and the config's, unless a test says otherwise
FW06 = FirmwareVersion(0, 6, 10, hardware=(4, 4, 58))  # an ODrive Pro on 0.6.10
#: the emulated firmware: None = 0.5.6 (no Get_Version answer), or 0.6.10
BOTH_FIRMWARES = pytest.mark.parametrize("fw", [None, FW06], ids=["fw0.5.6", "fw0.6.10"])


def dialect_of(fw: FirmwareVersion | None) -> Dialect:
    return DIALECT_06 if fw is not None else DIALECT_05


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


# --- codec, firmware 0.6 (golden bytes hand-computed from the layouts in drivers/odrive_codec06) ---


def test_06_golden_bytes() -> None:
    from drivers.odrive_codec06 import (ErrorStatus, Heartbeat06, ProcedureResult, decode_clear_errors06,
                                        decode_error_status, decode_heartbeat06, encode_clear_errors06,
                                        encode_error_status, encode_heartbeat06)

    hb = Heartbeat06(0x1000000, AxisState.IDLE, ProcedureResult.DISARMED, True)
    frame = encode_heartbeat06(NODE, hb)
    assert (frame.arbitration_id, frame.data.hex()) == (0x061, "0000000101030100")
    assert decode_heartbeat06(frame) == hb
    assert decode_heartbeat06(Frame(0x061, bytes.fromhex("0000000201100000"))).procedure_result == 16
    status = ErrorStatus(0x200, 0x1000200)
    frame = encode_error_status(NODE, status)
    assert (frame.arbitration_id, frame.data.hex()) == (0x063, "0002000000020001")
    assert decode_error_status(frame) == status
    assert encode_clear_errors06(NODE).data == b"\x00" and encode_clear_errors06(NODE, True).data == b"\x01"
    assert decode_clear_errors06(Frame(0x078, b"\x01")) is True
    assert decode_clear_errors06(Frame(0x078, b"")) is False  # DLC 0: Identify 0


@pytest.mark.parametrize("decode, frame, where", [
    ("decode_error_status", Frame(0x063, bytes(4)), "0x063 (Get_Error): 4 data bytes, expected 8"),
    ("decode_heartbeat06", Frame(0x061, bytes.fromhex("0000000005000000")),
     "0x061 (Heartbeat) byte 4: unknown axis state 5"),
    ("decode_clear_errors06", Frame(0x078, b"\x02"), "0x078 (Clear_Errors) byte 0: Identify is 2"),
    ("decode_clear_errors06", Frame(0x078, b"", rtr=True), "0x078 (Clear_Errors): remote frame"),
])
def test_06_decode_errors_name_frame_and_offset(decode: str, frame: Frame, where: str) -> None:
    from drivers import odrive_codec06

    with pytest.raises(ProtocolError, match=re.escape(where)):
        getattr(odrive_codec06, decode)(frame)


def test_06_error_bits_and_text() -> None:
    """0.6's ODrive.Error (ODriveArduino src/ODriveEnums.h; the 0.6.10 DBC has the same)."""
    from drivers.odrive_codec06 import ODriveError, odrive_error_text, procedure_result_text

    assert DIALECT_06.watchdog_expired == ODriveError.WATCHDOG_TIMER_EXPIRED == 0x1000000
    assert DIALECT_05.watchdog_expired == AxisError.WATCHDOG_TIMER_EXPIRED == 0x800
    assert ODriveError.ESTOP_REQUESTED == 0x2000000 and ODriveError.CALIBRATION_ERROR == 0x40000000
    assert odrive_error_text(0x1000000).startswith("WATCHDOG_TIMER_EXPIRED (")
    # 0x800 is the 0.5.6 watchdog but 0.6's DC_BUS_OVER_REGEN_CURRENT: the layout decides
    assert odrive_error_text(0x800) == "DC_BUS_OVER_REGEN_CURRENT"
    assert odrive_error_text(0x200 | 0x80) == "DC_BUS_UNDER_VOLTAGE | unknown bits 0x80"
    assert procedure_result_text(3) == "DISARMED" and procedure_result_text(99) == "procedure result 99"


def test_06_emulator_speaks_06_on_the_bus(make_emu, channel) -> None:
    """Raw frames on the virtual bus: the 0.6 emulator answers Get_Version and Get_Error (0x03),
    clears on Clear_Errors with DLC 1 and — as ODrive's maintainer advised for ros_odrive —
    DLC 0, counts Identify 1, rejects an RTR Clear_Errors; its heartbeat is 0.6's layout."""
    from drivers.odrive_codec06 import ErrorStatus, decode_error_status, decode_heartbeat06

    emu = make_emu(firmware=FW06, heartbeat_period_s=None)
    with can.Bus(interface="virtual", channel=channel) as bus:
        def send(cmd: int, data: bytes = b"", rtr: bool = False) -> None:
            bus.send(can.Message(arbitration_id=arbitration_id(NODE, cmd), data=data, dlc=len(data),
                                 is_remote_frame=rtr, is_extended_id=False))

        def reply(cmd: int) -> Frame:
            deadline = time.monotonic() + 1.0
            while time.monotonic() < deadline:
                msg = bus.recv(0.5)
                if msg is not None and msg.arbitration_id == arbitration_id(NODE, cmd):
                    return Frame(msg.arbitration_id, bytes(msg.data))
            raise AssertionError(f"no reply on cmd 0x{cmd:02X}")

        send(Cmd.GET_VERSION, rtr=True)
        assert reply(Cmd.GET_VERSION).data[4:7] == bytes([0, 6, 10])
        send(Cmd.SET_AXIS_STATE, bytes([8, 0, 0, 0]))
        send(Cmd.ESTOP)
        assert emu.wait_for(lambda e: e.axis_error != 0, 1.0)
        emu.send_heartbeat()
        hb = decode_heartbeat06(reply(Cmd.HEARTBEAT))
        assert (hb.axis_error, hb.axis_state, hb.procedure_result) == (0x2000000, AxisState.IDLE, 3)
        send(Cmd.GET_MOTOR_ERROR, rtr=True)
        assert decode_error_status(reply(Cmd.GET_MOTOR_ERROR)) == ErrorStatus(0x2000000, 0x2000000)
        send(Cmd.CLEAR_ERRORS, rtr=True)  # not a command: rejected, nothing cleared
        send(Cmd.CLEAR_ERRORS, b"\x01")  # clears, and asks to blink
        assert emu.wait_for(lambda e: e.axis_error == 0 and e.identify_requests == 1, 1.0)
        emu.expire_watchdog()
        send(Cmd.CLEAR_ERRORS)  # DLC 0
        assert emu.wait_for(lambda e: e.axis_error == 0, 1.0)
        assert emu.rejected_frames == 1 and emu.clear_errors_dlc == [1, 0]


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


@BOTH_FIRMWARES
def test_closed_loop_end_to_end(make_emu, make_backend, fw) -> None:
    emu = make_emu(watchdog_timeout_s=0.5, firmware=fw)
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
        assert backend.dialect is dialect_of(fw) and backend.firmware == fw
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


@BOTH_FIRMWARES
def test_idle_after_close_and_after_exception(make_emu, make_backend, fw) -> None:
    check_idle_after_close_and_after_exception(make_emu(firmware=fw), make_backend())


def test_lost_reply_gives_stale_sample_after_timeout(make_emu, make_backend) -> None:
    emu = make_emu()
    backend = make_backend(timeout_s=0.03)
    with backend:
        backend.enable()
        first = read_through_dropped_reply(emu, backend, 0.03)  # drops the encoder reply
        assert backend.read().sequence == first.sequence + 1
        emu.delay_next(2, 0.2)  # both replies later than the timeout
        assert backend.read().sequence == first.sequence + 1


def refused_until_reset(emu: ODriveCanEmulator, backend: ODriveCanBackend, error: str) -> None:
    """On a disabled backend whose drive latched ``error``: enable is refused naming it until
    reset_fault() clears it in the drive; then enable works."""
    with pytest.raises(EnableError, match=error):
        backend.enable()
    backend.reset_fault()
    assert emu.wait_for(lambda e: e.axis_error == 0, 1.0)
    emu.send_heartbeat()
    backend.enable()
    assert backend.read().state == DriveState.ENABLED


@BOTH_FIRMWARES
def test_heartbeat_axis_error_is_a_fault_with_text(make_emu, make_backend, fw) -> None:
    from drivers.odrive_codec06 import ODriveError

    emu = make_emu(firmware=fw)
    backend = make_backend()
    # each firmware's own bits (0.5.6 0x44000; 0.6 0x2002000): the other's would read as unknown
    code, over_temp = ((AxisError.ESTOP_REQUESTED | AxisError.OVER_TEMP, "OVER_TEMP") if fw is None else
                       (ODriveError.ESTOP_REQUESTED | ODriveError.MOTOR_OVER_TEMP, "MOTOR_OVER_TEMP"))
    with backend:
        backend.enable()
        assert backend.read().state == DriveState.ENABLED
        emu.inject_axis_error(code)
        fb = backend.read()
        assert fb.state == DriveState.FAULT
        assert fb.fault_code == code
        assert "ESTOP_REQUESTED" in fb.fault_text and over_temp in fb.fault_text
        assert "unknown bits" not in fb.fault_text
        backend.disable()
        refused_until_reset(emu, backend, "ESTOP_REQUESTED")


@BOTH_FIRMWARES
def test_left_closed_loop_while_enabled_is_a_fault(make_emu, make_backend, fw) -> None:
    emu = make_emu(firmware=fw)
    backend = make_backend()
    with backend:
        backend.enable()
        with emu._lock:
            emu.axis.request_state(AxisState.IDLE, time.monotonic())
        emu.send_heartbeat()
        fb = backend.read()
        assert fb.state == DriveState.FAULT and "IDLE while enabled" in fb.fault_text


@BOTH_FIRMWARES
def test_no_heartbeat_refuses_enable(make_emu, make_backend, fw) -> None:
    emu = make_emu(heartbeat_period_s=None, firmware=fw)
    backend = make_backend()
    with backend:
        # 0.6 answered Get_Version at open; a silent node leaves 0.5.6's layout unsettled
        assert backend.dialect is (DIALECT_06 if fw else None)
        t0 = time.monotonic()
        with pytest.raises(EnableError, match="no heartbeat from node 3"):
            backend.enable()
        assert time.monotonic() - t0 == pytest.approx(0.15, abs=0.1)
        assert not backend.enabled
    assert emu.axis_state == AxisState.IDLE


@BOTH_FIRMWARES
def test_heartbeat_lost_is_a_fault(make_emu, make_backend, fw) -> None:
    emu = make_emu(firmware=fw)
    backend = make_backend(timeout_s=0.02)
    with backend:
        backend.enable()
        emu.stop()
        deadline = time.monotonic() + 2.0
        fb = backend.read()
        while fb.state != DriveState.FAULT and time.monotonic() < deadline:
            fb = backend.read()
        assert fb.state == DriveState.FAULT and "heartbeat lost" in fb.fault_text


@BOTH_FIRMWARES
def test_drive_watchdog_expires_when_the_driver_stops_sending(make_emu, make_backend, fw) -> None:
    emu = make_emu(watchdog_timeout_s=0.05, mode=EmuMode.REALTIME, firmware=fw)
    clock = SimClock()
    backend = make_backend(clock, watchdog_timeout_s=0.05)
    with backend:
        run_then_go_silent(emu, backend, clock, 50)
        assert emu.axis_state == AxisState.IDLE
        emu.send_heartbeat()
        fb = backend.read()
        assert fb.state == DriveState.FAULT and "WATCHDOG_TIMER_EXPIRED" in fb.fault_text
        assert fb.fault_code == dialect_of(fw).watchdog_expired


@BOTH_FIRMWARES
def test_expire_watchdog_injection(make_emu, make_backend, fw) -> None:
    emu = make_emu(firmware=fw)
    backend = make_backend()
    with backend:
        backend.enable()
        emu.expire_watchdog()
        fb = backend.read()
        assert fb.state == DriveState.FAULT
        assert fb.fault_code == {None: 0x800, FW06: 0x1000000}[fw]


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


@BOTH_FIRMWARES
def test_watchdog_check_confirms_the_drive_watchdog(make_emu, make_backend, fw) -> None:
    """The driver cannot read the watchdog config over CAN: enable checks it by going silent in
    CLOSED_LOOP at zero torque until a heartbeat reports WATCHDOG_TIMER_EXPIRED (0.5.6: 0x800,
    0.6: 0x1000000), clears it, and only then enables for the loop."""
    emu = make_emu(firmware=fw)
    backend = make_backend()
    with backend:
        backend.enable()
        assert WATCHDOG_S <= backend.watchdog_confirmed_s < WATCHDOG_S + 0.5
        assert backend.unprotected == "" and emu.axis_error == 0
        assert emu.axis_state == AxisState.CLOSED_LOOP_CONTROL and emu.axis.input_torque_nm == 0.0
        assert backend.read().state == DriveState.ENABLED


@BOTH_FIRMWARES
def test_drive_without_watchdog_is_refused(make_emu, make_backend, fw) -> None:
    emu = make_emu(watchdog_timeout_s=None, firmware=fw)  # enable_watchdog False, the default
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


@BOTH_FIRMWARES
def test_disable_waits_for_the_heartbeat_to_report_idle(make_emu, make_backend, fw) -> None:
    emu = make_emu(heartbeat_period_s=0.05, firmware=fw)
    backend = make_backend(heartbeat_timeout_s=0.3)
    with backend:
        backend.enable()
        seq = backend._heartbeat_seq
        backend.disable()
        assert not backend.enabled
        assert backend._heartbeat_seq > seq and backend.last_heartbeat.axis_state == AxisState.IDLE
        assert emu.axis_state == AxisState.IDLE


@BOTH_FIRMWARES
def test_disable_without_a_heartbeat_is_not_confirmed(make_emu, make_backend, fw) -> None:
    """The drive stops reporting: IDLE is sent, but nothing confirms it, so the backend says so
    (``enabled`` stays True, the loop logs the drive as not confirmed disabled)."""
    from drivers.errors import CommunicationError

    emu = make_emu(firmware=fw)
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


@pytest.mark.parametrize("version, dialect", [((0, 5, 6), DIALECT_05), ((0, 6, 10), DIALECT_06),
                                             ((0, 6, 0), DIALECT_06)])
def test_firmware_version_read_and_its_layout_used(make_emu, make_backend, version, dialect) -> None:
    fw = FirmwareVersion(*version, hardware=(3, 6, 56))
    make_emu(firmware=fw)
    with make_backend() as backend:
        assert backend.firmware == fw and backend.dialect is dialect  # settled at open
        backend.enable()
        assert backend.identity()["firmware"] == f"{'.'.join(map(str, version))} (hardware 3.6-56)"


@pytest.mark.parametrize("version", [(0, 7, 0), (1, 0, 2), (0, 4, 12)])
def test_an_unsupported_firmware_is_refused_at_open_in_one_line(make_emu, make_backend, version) -> None:
    """0.7 or 1.0 (whatever they lay out) and 0.4 are refused at the first contact: one line
    naming the version, nothing left open (the autouse fixture checks the bus was shut)."""
    fw = FirmwareVersion(*version, hardware=(4, 4, 58))
    emu = make_emu(firmware=fw)
    backend = make_backend()
    with pytest.raises(BackendError) as info:
        backend.open()
    text = str(info.value)
    assert not isinstance(info.value, EnableError) and not backend.is_open
    assert f"node 3: firmware {'.'.join(map(str, version))} (hardware 4.4-58): this driver speaks the " \
           f"CAN Simple protocol of firmware 0.5.x and 0.6.x" in text and "\n" not in text
    assert emu.axis_state == AxisState.IDLE


def test_run_refuses_a_foreign_firmware_at_first_contact(cfg, make_emu, tmp_path, capsys) -> None:
    """``frictionctl run`` on a drive answering firmware 0.7: one line, exit 2, nothing written."""
    import yaml

    from controller import cli
    from controller.schema import to_plain

    make_emu(firmware=FirmwareVersion(0, 7, 1))
    run_cfg = dataclasses.replace(cfg, loop=dataclasses.replace(cfg.loop, rate_hz=200.0),
                                  drive=dataclasses.replace(cfg.drive, timeout_s=0.002))
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(to_plain(run_cfg)))
    out = tmp_path / "out"
    rc = cli.main(["run", "--config", str(path), "--scenario", "creep", "--out", str(out)])
    err = [line for line in capsys.readouterr().err.strip().splitlines()
           if "drive.interface is 'virtual'" not in line]
    assert rc == 2 and len(err) == 1, err
    assert "drive refused at first contact: odrive_can: node 3: firmware 0.7.1" in err[0]
    assert not out.exists()


def test_firmware_0_5_6_has_no_get_version(make_emu, make_backend) -> None:
    """Silence for state_timeout_s after a Get_Version sent once the node was heard: 0.5.x."""
    make_emu()
    with make_backend() as backend:
        assert backend.dialect is DIALECT_05 and backend.firmware is None
        backend.enable()
        assert backend.identity()["firmware"] == "not reported (0.5.x)"


def _versions_asked(reader: can.BufferedReader, node: int = NODE) -> int:
    """Get_Version requests among the frames ``reader`` has received so far (then drained)."""
    count = 0
    while (msg := reader.get_message(0.0)) is not None:
        count += msg.arbitration_id == arbitration_id(node, Cmd.GET_VERSION) and msg.is_remote_frame
    return count


def test_a_node_heard_only_after_open_is_settled_at_enable(make_emu, make_backend) -> None:
    """Nothing heard at open (drive off): the layout stays unsettled, a heartbeat then is a sign
    of life only (not decoded), and enable settles it first — asking Get_Version again, since
    the first request went out before the drive listened — before anything else."""
    reader = can.BufferedReader()
    emu = make_emu(heartbeat_period_s=None, capture=reader)
    backend = make_backend()
    with backend:
        assert backend.dialect is None and _versions_asked(reader) == 1
        emu.heartbeat_period_s = 0.01  # the drive comes up
        time.sleep(0.05)
        fb = backend.read()
        assert fb.state == DriveState.DISABLED and backend.last_heartbeat is None  # held, not read
        backend.enable()
        assert backend.dialect is DIALECT_05 and _versions_asked(reader) == 1
        assert backend.read().state == DriveState.ENABLED


def test_a_06_heartbeat_with_procedure_result_disarmed_is_no_motor_error(make_emu, make_backend) -> None:
    """0.6 byte 5 is the procedure result: DISARMED (3) has bit 0 set, which 0.5.6's layout reads
    as the motor-error flag. The Get_Version reply is late (0.3 s, within state_timeout_s): the
    heartbeats meanwhile are held, then read in 0.6's layout — not a fault, enable proceeds."""
    from drivers.odrive_codec06 import Heartbeat06, ProcedureResult

    emu = make_emu(firmware=FW06)
    with emu._lock:  # the last run ended disarmed; its error has been cleared since
        emu.axis.procedure_result = ProcedureResult.DISARMED
    raw = emu._heartbeat_frame()
    assert DIALECT_05.decode_heartbeat(raw).fault_text() == "motor error flagged"  # the hazard
    emu.delay_next(2, 0.3)  # both Get_Version replies (open asks twice)
    with make_backend() as backend:
        assert backend.dialect is DIALECT_06
        hb = backend.last_heartbeat
        assert isinstance(hb, Heartbeat06) and hb.procedure_result == ProcedureResult.DISARMED
        fb = backend.read()
        assert fb.state == DriveState.DISABLED and fb.fault_text == ""
        backend.enable()
        assert backend.read().state == DriveState.ENABLED


def test_06_get_error_explains_the_fault(make_emu, make_backend) -> None:
    """On 0.6 a new axis error makes the tick ask Get_Error once: the fault text carries the
    active errors and the disarm reason, decoded; the next ticks do not ask again. A latched
    error refuses enable with the same explanation."""
    from drivers.odrive_codec06 import ODriveError

    reader = can.BufferedReader()
    emu = make_emu(firmware=FW06, capture=reader)
    backend = make_backend()
    get_error = arbitration_id(NODE, Cmd.GET_MOTOR_ERROR)

    def asked() -> int:
        n = 0
        while (msg := reader.get_message(0.0)) is not None:
            n += msg.arbitration_id == get_error and msg.is_remote_frame
        return n

    with backend:
        backend.enable()
        backend.read()
        assert asked() == 0  # nothing extra while all is well
        emu.inject_axis_error(ODriveError.DC_BUS_UNDER_VOLTAGE)
        fb = backend.read()
        assert fb.state == DriveState.FAULT and fb.fault_code == 0x200
        assert fb.fault_text == ("DC_BUS_UNDER_VOLTAGE; Get_Error: active DC_BUS_UNDER_VOLTAGE; "
                                 "disarm reason DC_BUS_UNDER_VOLTAGE")
        for _ in range(3):
            assert "disarm reason DC_BUS_UNDER_VOLTAGE" in backend.read().fault_text
        assert asked() == 1
        backend.disable()
        with pytest.raises(EnableError, match=r"reports axis error 0x200: DC_BUS_UNDER_VOLTAGE; "
                                              r"Get_Error: active .*; disarm reason "):
            backend.enable()


def test_05_fault_asks_nothing_extra(make_emu, make_backend) -> None:
    """0.5.6's cmd 0x03 is Get_Motor_Error: the 0.5.6 driver does not ask it (unchanged)."""
    reader = can.BufferedReader()
    emu = make_emu(capture=reader)
    with make_backend() as backend:
        backend.enable()
        emu.inject_axis_error(AxisError.MOTOR_FAILED)
        fb = backend.read()
        assert fb.state == DriveState.FAULT and fb.fault_text.startswith("MOTOR_FAILED")
    frames = []
    while (msg := reader.get_message(0.0)) is not None:
        frames.append(msg.arbitration_id)
    assert arbitration_id(NODE, Cmd.GET_MOTOR_ERROR) not in frames


@BOTH_FIRMWARES
def test_clear_errors_in_the_firmwares_form(make_emu, make_backend, fw) -> None:
    """Clear_Errors (after the watchdog check, and reset_fault) is DLC 0 on 0.5.6, DLC 1 with
    Identify 0 on 0.6 (which it clears; no LED blinking asked)."""
    emu = make_emu(firmware=fw)
    with make_backend() as backend:
        backend.enable()
        emu.inject_axis_error(dialect_of(fw).estop_requested)
        assert backend.read().state == DriveState.FAULT
        backend.disable()
        backend.reset_fault()
        assert emu.wait_for(lambda e: e.axis_error == 0, 1.0)
    assert emu.clear_errors_dlc == [1 if fw else 0] * 2 and emu.identify_requests == 0


@BOTH_FIRMWARES
def test_estop_is_a_latched_fault_until_reset(make_emu, make_backend, channel, fw) -> None:
    """An Estop frame (another node's) disarms the axis with the firmware's ESTOP_REQUESTED bit:
    a fault, latched in the drive until reset_fault, that ends disabled."""
    emu = make_emu(firmware=fw)
    with make_backend() as backend:
        backend.enable()
        with can.Bus(interface="virtual", channel=channel) as bus:
            frame = encode_estop(NODE)
            bus.send(can.Message(arbitration_id=frame.arbitration_id, dlc=0, is_extended_id=False))
        assert emu.wait_for(lambda e: e.axis_error != 0, 1.0)
        emu.send_heartbeat()
        fb = backend.read()
        assert fb.state == DriveState.FAULT and fb.fault_code == dialect_of(fw).estop_requested
        assert fb.fault_text.startswith("ESTOP_REQUESTED")
        backend.disable()
        assert not backend.enabled and emu.axis_state == AxisState.IDLE
        refused_until_reset(emu, backend, "ESTOP_REQUESTED")


def _send_version(channel: str, version: FirmwareVersion) -> None:
    from drivers.odrive_codec import encode_version

    frame = encode_version(NODE, version)
    with can.Bus(interface="virtual", channel=channel) as bus:
        bus.send(can.Message(arbitration_id=frame.arbitration_id, data=frame.data, is_extended_id=False))


def test_a_late_version_reply_while_running_latches_a_fault(make_emu, make_backend, channel) -> None:
    """Silence settled 0.5.x; a Get_Version reply naming 0.6.10 comes after the run began. The
    layout is not switched: a fault latches, naming both; the loop's disable is still confirmed;
    enable is refused until the link is reopened (which settles the layout afresh)."""
    from drivers.odrive_codec import Heartbeat

    make_emu()  # silent on Get_Version until the late answer below
    backend = make_backend()
    with backend:
        backend.enable()
        assert backend.dialect is DIALECT_05 and backend.read().state == DriveState.ENABLED
        _send_version(channel, FW06)
        deadline = time.monotonic() + 2.0
        fb = backend.read()
        while fb.state != DriveState.FAULT and time.monotonic() < deadline:
            fb = backend.read()
        assert fb.state == DriveState.FAULT
        assert fb.fault_text.startswith("Get_Version answered firmware 0.6.10 (hardware 4.4-58) after "
                                        "the frame layout was settled as 0.5.x (no reply within")
        assert "reopen the link" in fb.fault_text
        assert backend.dialect is DIALECT_05 and isinstance(backend.last_heartbeat, Heartbeat)
        assert backend.read().state == DriveState.FAULT  # latched
        backend.disable()  # confirmed by the axis state, alike in both layouts
        assert not backend.enabled
        with pytest.raises(EnableError, match="Get_Version answered firmware 0.6.10"):
            backend.enable()
    with backend:  # reopened: settled afresh
        backend.enable()
        assert backend.read().state == DriveState.ENABLED


def test_a_late_version_reply_during_enable_refuses_it(make_emu, make_backend) -> None:
    """A 0.6 drive whose Get_Version replies come 0.5 s late, after state_timeout_s 0.2 s of
    silence settled 0.5.x: the reply arrives while enable runs the watchdog check (0.6's
    0x1000000 is not 0.5.6's 0x800, so the check is still waiting): enable is refused with the
    late reply named, and the axis is left IDLE."""
    emu = make_emu(firmware=FW06, watchdog_timeout_s=0.5)
    emu.delay_next(2, 0.5)
    backend = make_backend(state_timeout_s=0.2, watchdog_timeout_s=0.5)
    with backend:
        assert backend.dialect is DIALECT_05  # wrong, as silence said
        with pytest.raises(EnableError) as info:
            backend.enable()
        assert "Get_Version answered firmware 0.6.10" in str(info.value) and "\n" not in str(info.value)
        assert not backend.enabled and emu.axis_state == AxisState.IDLE


def test_reset_fault_needs_the_firmware(make_emu, make_backend) -> None:
    """Nothing heard since open: which Clear_Errors to send is not known; it says so."""
    from drivers.errors import CommunicationError

    emu = make_emu(heartbeat_period_s=None)
    with make_backend() as backend:
        with pytest.raises(CommunicationError, match="not heard since open"):
            backend.reset_fault()
    assert emu.clear_errors_dlc == []


@BOTH_FIRMWARES
def test_any_frame_on_the_nodes_ids_is_survived(make_emu, make_backend, channel, fw) -> None:
    """Error frames (not bus-off), RTR and zero-length frames on every command id, 8-byte
    garbage on every drive→host id: nothing raises, nothing is taken for a sample, the loop
    runs on once a real heartbeat has followed."""
    emu = make_emu(firmware=fw)
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
