"""ODrive CAN Simple (firmware 0.5.6): pure encode/decode of the frames this project uses.

What firmware 0.6 changed (heartbeat layout, error bits, Get_Error, Clear_Errors' byte) is in
:mod:`drivers.odrive_codec06`; :mod:`drivers.odrive_dialect` says which layout a firmware speaks.

No I/O and no python-can here: a :class:`Frame` is an 11-bit arbitration id, the data bytes and
the RTR flag. The driver and the emulator convert to ``can.Message`` at their edge.

Layout (PROTOCOLS.md §1): arbitration id = ``node_id << 5 | cmd``; payloads little-endian,
float32 IEEE-754, u32. Units on the wire: position [turns], velocity [turns/s], torque [N·m],
current [A], voltage [V]. Data frames are sent with DLC 8 (unused bytes zero) as in the official
DBC; Estop, Clear_Errors and Get_* requests have DLC 0. Every decoder raises
:class:`~drivers.errors.ProtocolError` naming the frame id (and byte offset) for a frame it cannot
decode, including a non-finite float: a NaN is never handed on as a value.
"""

from __future__ import annotations

import enum
import math
import struct
from dataclasses import dataclass

from .errors import ProtocolError

MAX_NODE_ID = 0x3F  # 6 bits of node id in an 11-bit id
_DLC_DATA = 8


class Cmd(enum.IntEnum):
    """CAN Simple command ids (0.5.6) used by the driver and the emulator; GET_VERSION is 0.6's
    (in 0.5.6 cmd 0x00 is reserved for CANopen NMT and not answered)."""

    GET_VERSION = 0x00
    HEARTBEAT = 0x01
    ESTOP = 0x02
    GET_MOTOR_ERROR = 0x03
    SET_AXIS_STATE = 0x07
    GET_ENCODER_ESTIMATES = 0x09
    SET_CONTROLLER_MODE = 0x0B
    SET_INPUT_TORQUE = 0x0E
    SET_LIMITS = 0x0F
    GET_IQ = 0x14
    GET_BUS_VOLTAGE_CURRENT = 0x17
    CLEAR_ERRORS = 0x18


#: Get_* commands: answered when the request is RTR or has DLC 0; the reply uses the same id.
REQUESTABLE = frozenset({Cmd.GET_MOTOR_ERROR, Cmd.GET_ENCODER_ESTIMATES, Cmd.GET_IQ,
                         Cmd.GET_BUS_VOLTAGE_CURRENT})


class AxisState(enum.IntEnum):
    """``axis.current_state`` / ``requested_state`` values of firmware 0.5.6."""

    UNDEFINED = 0
    IDLE = 1
    STARTUP_SEQUENCE = 2
    FULL_CALIBRATION_SEQUENCE = 3
    MOTOR_CALIBRATION = 4
    ENCODER_INDEX_SEARCH = 6
    ENCODER_OFFSET_CALIBRATION = 7
    CLOSED_LOOP_CONTROL = 8
    LOCKIN_SPIN = 9
    ENCODER_DIR_FIND = 10
    HOMING = 11
    ENCODER_HALL_POLARITY_CALIBRATION = 12
    ENCODER_HALL_PHASE_CALIBRATION = 13


class ControlMode(enum.IntEnum):
    VOLTAGE_CONTROL = 0
    TORQUE_CONTROL = 1
    VELOCITY_CONTROL = 2
    POSITION_CONTROL = 3


class InputMode(enum.IntEnum):
    INACTIVE = 0
    PASSTHROUGH = 1
    VEL_RAMP = 2
    POS_FILTER = 3
    MIX_CHANNELS = 4
    TRAP_TRAJ = 5
    TORQUE_RAMP = 6
    MIRROR = 7
    TUNING = 8


class AxisError(enum.IntFlag):
    """``axis.error`` bits of firmware 0.5.6 (``Firmware/odrive-interface.yaml``)."""

    NONE = 0
    INVALID_STATE = 0x1
    MOTOR_FAILED = 0x40
    SENSORLESS_ESTIMATOR_FAILED = 0x80
    ENCODER_FAILED = 0x100
    CONTROLLER_FAILED = 0x200
    WATCHDOG_TIMER_EXPIRED = 0x800
    MIN_ENDSTOP_PRESSED = 0x1000
    MAX_ENDSTOP_PRESSED = 0x2000
    ESTOP_REQUESTED = 0x4000
    HOMING_WITHOUT_ENDSTOP = 0x20000
    OVER_TEMP = 0x40000
    UNKNOWN_POSITION = 0x80000


#: What each axis error bit means, for operators (the text the loop logs with a fault).
AXIS_ERROR_TEXT: dict[int, str] = {
    AxisError.INVALID_STATE: "INVALID_STATE (requested state not possible now)",
    AxisError.MOTOR_FAILED: "MOTOR_FAILED (see motor.error)",
    AxisError.SENSORLESS_ESTIMATOR_FAILED: "SENSORLESS_ESTIMATOR_FAILED",
    AxisError.ENCODER_FAILED: "ENCODER_FAILED (see encoder.error)",
    AxisError.CONTROLLER_FAILED: "CONTROLLER_FAILED (see controller.error)",
    AxisError.WATCHDOG_TIMER_EXPIRED: "WATCHDOG_TIMER_EXPIRED (no frame within the drive watchdog timeout)",
    AxisError.MIN_ENDSTOP_PRESSED: "MIN_ENDSTOP_PRESSED",
    AxisError.MAX_ENDSTOP_PRESSED: "MAX_ENDSTOP_PRESSED",
    AxisError.ESTOP_REQUESTED: "ESTOP_REQUESTED",
    AxisError.HOMING_WITHOUT_ENDSTOP: "HOMING_WITHOUT_ENDSTOP",
    AxisError.OVER_TEMP: "OVER_TEMP",
    AxisError.UNKNOWN_POSITION: "UNKNOWN_POSITION",
}


class MotorError(enum.IntFlag):
    """``motor.error`` bits of firmware 0.5.6 (64 bits on the wire; the DBC says 32)."""

    NONE = 0
    PHASE_RESISTANCE_OUT_OF_RANGE = 0x1
    PHASE_INDUCTANCE_OUT_OF_RANGE = 0x2
    DRV_FAULT = 0x8
    CONTROL_DEADLINE_MISSED = 0x10
    MODULATION_MAGNITUDE = 0x80
    CURRENT_SENSE_SATURATION = 0x400
    CURRENT_LIMIT_VIOLATION = 0x1000
    MODULATION_IS_NAN = 0x10000
    MOTOR_THERMISTOR_OVER_TEMP = 0x20000
    FET_THERMISTOR_OVER_TEMP = 0x40000
    TIMER_UPDATE_MISSED = 0x80000
    CURRENT_MEASUREMENT_UNAVAILABLE = 0x100000
    CONTROLLER_FAILED = 0x200000
    I_BUS_OUT_OF_RANGE = 0x400000
    BRAKE_RESISTOR_DISARMED = 0x800000
    SYSTEM_LEVEL = 0x1000000
    BAD_TIMING = 0x2000000
    UNKNOWN_PHASE_ESTIMATE = 0x4000000
    UNKNOWN_PHASE_VEL = 0x8000000
    UNKNOWN_TORQUE = 0x10000000
    UNKNOWN_CURRENT_COMMAND = 0x20000000
    UNKNOWN_CURRENT_MEASUREMENT = 0x40000000
    UNKNOWN_VBUS_VOLTAGE = 0x80000000
    UNKNOWN_VOLTAGE_COMMAND = 0x100000000
    UNKNOWN_GAINS = 0x200000000
    CONTROLLER_INITIALIZING = 0x400000000
    UNBALANCED_PHASES = 0x800000000


def flag_text(code: int, flags: type[enum.IntFlag], texts: dict[int, str] | None = None) -> str:
    """``A | B`` for the set bits of ``code``; bits the table does not know as ``0x…`` (hex)."""
    if code == 0:
        return "NONE"
    parts: list[str] = []
    known = 0
    for member in flags:
        if member.value and code & member.value == member.value:
            parts.append((texts or {}).get(member.value, member.name or hex(member.value)))
            known |= member.value
    unknown = code & ~known
    if unknown:
        parts.append(f"unknown bits 0x{unknown:X}")
    return " | ".join(parts)


def axis_error_text(code: int) -> str:
    """Text for an ``axis.error`` value (0.5.6 bits), e.g. ``WATCHDOG_TIMER_EXPIRED (…)``."""
    return flag_text(code, AxisError, AXIS_ERROR_TEXT)


def motor_error_text(code: int) -> str:
    """Text for a ``motor.error`` value (0.5.6 bits)."""
    return flag_text(code, MotorError)


# --- frames -------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Frame:
    """One classic CAN frame with an 11-bit id. ``rtr`` frames carry no data."""

    arbitration_id: int
    data: bytes = b""
    rtr: bool = False

    @property
    def node_id(self) -> int:
        return self.arbitration_id >> 5

    @property
    def cmd(self) -> int:
        return self.arbitration_id & 0x1F

    @property
    def is_request(self) -> bool:
        """A Get_* request: RTR, or a data frame with DLC 0 (the firmware answers both)."""
        return self.rtr or len(self.data) == 0


def arbitration_id(node_id: int, cmd: int) -> int:
    """``node_id << 5 | cmd``; raises ValueError outside node 0..63, cmd 0..31."""
    if not 0 <= node_id <= MAX_NODE_ID:
        raise ValueError(f"node_id {node_id} out of range 0..{MAX_NODE_ID}")
    if not 0 <= cmd <= 0x1F:
        raise ValueError(f"cmd 0x{cmd:X} out of range 0..0x1F")
    return node_id << 5 | cmd


def frame_name(arb_id: int, name: str | None = None) -> str:
    """``0x063 (Get_Motor_Error)`` for error messages; ``name`` overrides the 0.5.6 command name
    (0.6 reuses ids under other names)."""
    cmd = arb_id & 0x1F
    if name is None:
        try:
            name = Cmd(cmd).name.title()
        except ValueError:
            return f"0x{arb_id:03X} (cmd 0x{cmd:02X})"
    return f"0x{arb_id:03X} ({name})"


def check_frame(frame: Frame, cmd: Cmd, min_len: int, name: str | None = None) -> None:
    """Raise ProtocolError (naming the frame) unless ``frame`` is a ``cmd`` data frame of at
    least ``min_len`` bytes; ``name`` as in :func:`frame_name`."""
    where = f"frame {frame_name(frame.arbitration_id, name)}"
    if frame.cmd != cmd:
        raise ProtocolError(f"{where}: expected cmd 0x{cmd:02X} {name or cmd.name}")
    if frame.rtr:
        raise ProtocolError(f"{where}: remote frame carries no data")
    if len(frame.data) < min_len:
        raise ProtocolError(f"{where}: {len(frame.data)} data bytes, expected {min_len}")



def _f32(frame: Frame, offset: int, what: str) -> float:
    (value,) = struct.unpack_from("<f", frame.data, offset)
    if not math.isfinite(value):
        raise ProtocolError(f"frame {frame_name(frame.arbitration_id)} byte {offset}: {what} is {value}")
    return value


def u32_at(frame: Frame, offset: int) -> int:
    return struct.unpack_from("<I", frame.data, offset)[0]


def _data(node_id: int, cmd: Cmd, payload: bytes) -> Frame:
    return Frame(arbitration_id(node_id, cmd), payload.ljust(_DLC_DATA, b"\0"))


def _two_f32(node_id: int, cmd: Cmd, a: float, b: float) -> Frame:
    """Two f32 at @0 and @4."""
    return _data(node_id, cmd, struct.pack("<ff", a, b))


def _decode_two_f32(frame: Frame, cmd: Cmd, what_a: str, what_b: str) -> tuple[float, float]:
    """The two finite f32 at @0 and @4 of an 8-byte ``cmd`` frame (``what_*`` name them in errors)."""
    check_frame(frame, cmd, 8)
    return _f32(frame, 0, what_a), _f32(frame, 4, what_b)


def encode_request(node_id: int, cmd: Cmd, rtr: bool = True) -> Frame:
    """A Get_* request: RTR with DLC 0 (``rtr=True``) or a data frame with DLC 0."""
    if cmd not in REQUESTABLE and cmd != Cmd.GET_VERSION:
        raise ValueError(f"{cmd!r} is not a Get_* message")
    return Frame(arbitration_id(node_id, cmd), b"", rtr)


# --- Heartbeat (0x01), drive → host --------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Heartbeat:
    axis_error: int  # AxisError bits
    axis_state: AxisState
    motor_error: bool = False  # motor.error != 0
    encoder_error: bool = False  # encoder.error != 0
    controller_error: bool = False  # controller.error != 0
    trajectory_done: bool = False

    def fault_text(self) -> str:
        """Decoded axis error plus the sub-component flags; "" when nothing is flagged."""
        parts = [axis_error_text(self.axis_error)] if self.axis_error else []
        for flag, name in ((self.motor_error, "motor"), (self.encoder_error, "encoder"),
                           (self.controller_error, "controller")):
            if flag:
                parts.append(f"{name} error flagged")
        return "; ".join(parts)


def encode_heartbeat(node_id: int, hb: Heartbeat) -> Frame:
    """axis_error u32 @0, axis_state u8 @4, flags u8 @5/@6, @7 bit0 controller, bit7 traj done."""
    flags7 = (1 if hb.controller_error else 0) | (0x80 if hb.trajectory_done else 0)
    payload = struct.pack("<IBBBB", hb.axis_error, int(hb.axis_state), int(hb.motor_error),
                          int(hb.encoder_error), flags7)
    return Frame(arbitration_id(node_id, Cmd.HEARTBEAT), payload)


def heartbeat_axis_state(frame: Frame) -> AxisState:
    """The part of a heartbeat every firmware lays out alike: 8 bytes, axis state u8 @4 (a
    known state). Raises ProtocolError otherwise. Nothing here depends on the firmware."""
    check_frame(frame, Cmd.HEARTBEAT, 8)
    raw_state = frame.data[4]
    try:
        return AxisState(raw_state)
    except ValueError:
        raise ProtocolError(f"frame {frame_name(frame.arbitration_id)} byte 4: unknown axis state "
                            f"{raw_state}") from None


def decode_heartbeat(frame: Frame) -> Heartbeat:
    """The 0.5.6 layout (0.6: :func:`drivers.odrive_codec06.decode_heartbeat06`)."""
    state = heartbeat_axis_state(frame)
    d = frame.data
    return Heartbeat(u32_at(frame, 0), state, bool(d[5] & 1), bool(d[6] & 1), bool(d[7] & 1),
                     bool(d[7] & 0x80))


# --- Get_Version (0x00, firmware 0.6+), drive → host -----------------------------------------------
# Layout (ODrive 0.6 CAN Simple): protocol_version u8 @0, hw_version major/minor/variant u8 @1..3,
# fw_version major/minor/revision u8 @4..6, fw_version_unreleased u8 @7.

#: The firmware line whose ASCII protocol the ASCII driver speaks (the CAN driver speaks more:
#: :data:`drivers.odrive_dialect.CAN_FIRMWARE`).
SUPPORTED_FIRMWARE = (0, 5)


@dataclass(frozen=True, slots=True)
class FirmwareVersion:
    major: int
    minor: int
    revision: int
    unreleased: bool = False
    hardware: tuple[int, int, int] | None = None  # major, minor, variant (CAN only)

    def __str__(self) -> str:
        text = f"{self.major}.{self.minor}.{self.revision}" + ("-dev" if self.unreleased else "")
        if self.hardware:
            text += " (hardware {}.{}-{})".format(*self.hardware)
        return text


def firmware_refusal(version: FirmwareVersion, link: str,
                     supported: tuple[tuple[int, int], ...] = (SUPPORTED_FIRMWARE,),
                     why: str = "") -> str | None:
    """Why a driver must not talk to this firmware (one line naming it), or None when its
    (major, minor) is one of ``supported``, the lines whose ``link`` protocol the driver speaks;
    ``why`` says what differs in the others."""
    if (version.major, version.minor) in supported:
        return None
    lines = [f"{major}.{minor}.x" for major, minor in supported]
    return (f"firmware {version}: this driver speaks the {link} protocol of firmware "
            f"{' and '.join(lines)}{f' ({why})' if why else ''}; flash {' or '.join(lines)} or use "
            f"a driver for that firmware")


def encode_version(node_id: int, version: FirmwareVersion, protocol_version: int = 2) -> Frame:
    hw = version.hardware or (0, 0, 0)
    return Frame(arbitration_id(node_id, Cmd.GET_VERSION),
                 bytes([protocol_version, *hw, version.major, version.minor, version.revision,
                        int(version.unreleased)]))


def decode_version(frame: Frame) -> FirmwareVersion:
    check_frame(frame, Cmd.GET_VERSION, 8)
    d = frame.data
    if d[7] > 1:  # fw_version_unreleased is a bool: anything else is not a version reply
        raise ProtocolError(f"frame {frame_name(frame.arbitration_id)} byte 7: unreleased flag is "
                            f"{d[7]}, not 0 or 1")
    return FirmwareVersion(d[4], d[5], d[6], bool(d[7]), (d[1], d[2], d[3]))


# --- commands, host → drive ----------------------------------------------------------------------


def encode_estop(node_id: int) -> Frame:
    return Frame(arbitration_id(node_id, Cmd.ESTOP), b"")


def encode_clear_errors(node_id: int) -> Frame:
    """DLC 0 in 0.5.6 (0.6 takes one byte: :func:`drivers.odrive_codec06.encode_clear_errors06`)."""
    return Frame(arbitration_id(node_id, Cmd.CLEAR_ERRORS), b"")


def encode_set_axis_state(node_id: int, state: AxisState) -> Frame:
    return _data(node_id, Cmd.SET_AXIS_STATE, struct.pack("<I", int(state)))


def decode_set_axis_state(frame: Frame) -> int:
    """The requested state as sent (an int: the receiver decides what it supports)."""
    check_frame(frame, Cmd.SET_AXIS_STATE, 4)
    return u32_at(frame, 0)


def encode_set_controller_mode(node_id: int, control_mode: ControlMode, input_mode: InputMode) -> Frame:
    return _data(node_id, Cmd.SET_CONTROLLER_MODE, struct.pack("<II", int(control_mode), int(input_mode)))


def decode_set_controller_mode(frame: Frame) -> tuple[int, int]:
    """(control_mode, input_mode) as sent."""
    check_frame(frame, Cmd.SET_CONTROLLER_MODE, 8)
    return u32_at(frame, 0), u32_at(frame, 4)


def encode_set_input_torque(node_id: int, torque_nm: float) -> Frame:
    """torque f32 @0 [N·m]."""
    return _data(node_id, Cmd.SET_INPUT_TORQUE, struct.pack("<f", torque_nm))


def decode_set_input_torque(frame: Frame) -> float:
    check_frame(frame, Cmd.SET_INPUT_TORQUE, 4)
    return _f32(frame, 0, "input_torque")


def encode_set_limits(node_id: int, vel_limit_turns_s: float, current_limit_a: float) -> Frame:
    """vel_limit f32 @0 [turns/s], current_limit f32 @4 [A]."""
    return _two_f32(node_id, Cmd.SET_LIMITS, vel_limit_turns_s, current_limit_a)


def decode_set_limits(frame: Frame) -> tuple[float, float]:
    """(vel_limit [turns/s], current_limit [A])."""
    return _decode_two_f32(frame, Cmd.SET_LIMITS, "vel_limit", "current_limit")


# --- telemetry, drive → host ---------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class EncoderEstimates:
    pos_turns: float  # [turns]
    vel_turns_s: float  # [turns/s]


def encode_encoder_estimates(node_id: int, pos_turns: float, vel_turns_s: float) -> Frame:
    return _two_f32(node_id, Cmd.GET_ENCODER_ESTIMATES, pos_turns, vel_turns_s)


def decode_encoder_estimates(frame: Frame) -> EncoderEstimates:
    return EncoderEstimates(*_decode_two_f32(frame, Cmd.GET_ENCODER_ESTIMATES, "pos_estimate",
                                             "vel_estimate"))


@dataclass(frozen=True, slots=True)
class Iq:
    setpoint_a: float  # [A]
    measured_a: float  # [A]


def encode_iq(node_id: int, setpoint_a: float, measured_a: float) -> Frame:
    return _two_f32(node_id, Cmd.GET_IQ, setpoint_a, measured_a)


def decode_iq(frame: Frame) -> Iq:
    return Iq(*_decode_two_f32(frame, Cmd.GET_IQ, "Iq_setpoint", "Iq_measured"))


@dataclass(frozen=True, slots=True)
class BusVoltageCurrent:
    voltage_v: float  # [V]
    current_a: float  # [A]


def encode_bus_voltage_current(node_id: int, voltage_v: float, current_a: float) -> Frame:
    return _two_f32(node_id, Cmd.GET_BUS_VOLTAGE_CURRENT, voltage_v, current_a)


def decode_bus_voltage_current(frame: Frame) -> BusVoltageCurrent:
    return BusVoltageCurrent(*_decode_two_f32(frame, Cmd.GET_BUS_VOLTAGE_CURRENT, "bus_voltage",
                                              "bus_current"))


def encode_motor_error(node_id: int, motor_error: int) -> Frame:
    """motor.error u64 @0 (the DBC declares only 32 bits: a known slip)."""
    return Frame(arbitration_id(node_id, Cmd.GET_MOTOR_ERROR), struct.pack("<Q", motor_error))


def decode_motor_error(frame: Frame) -> int:
    check_frame(frame, Cmd.GET_MOTOR_ERROR, 8)
    return struct.unpack_from("<Q", frame.data, 0)[0]
