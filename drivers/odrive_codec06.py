"""ODrive CAN Simple, firmware 0.6: pure encode/decode of the frames whose layout differs from 0.5.6.

Everything else the driver uses (Set_Axis_State 0x07, Set_Controller_Mode 0x0B, Set_Input_Torque
0x0E, Set_Limits 0x0F, Get_Encoder_Estimates 0x09, Get_Iq 0x14, Estop 0x02, axis states,
control and input modes) is laid out as in 0.5.6: :mod:`drivers.odrive_codec` encodes it.

Source of the layouts and the enums: odriverobotics/ODriveArduino ``src/can_simple_messages.hpp``
(generated from ODrive's CAN DBC) and ``src/ODriveEnums.h`` (``ODrive.Error``,
``ODrive.ProcedureResult``); the same bits are in the odrive-cansimple-0.6.10 DBC.

- Heartbeat (0x01): Axis_Error u32 @0 (:class:`ODriveError` bits), Axis_State u8 @4,
  Procedure_Result u8 @5 (:class:`ProcedureResult`), Trajectory_Done_Flag @6 bit 0, @7 reserved.
- Get_Error (0x03, 0.5.6's Get_Motor_Error id): Active_Errors u32 @0, Disarm_Reason u32 @4.
- Clear_Errors (0x18): DLC 1, Identify u8 @0 (1 = blink the LED to find the drive).
"""

from __future__ import annotations

import enum
import struct
from dataclasses import dataclass

from .errors import ProtocolError
from .odrive_codec import (AxisState, Cmd, Frame, arbitration_id, check_frame, flag_text, frame_name,
                           heartbeat_axis_state, u32_at)

GET_ERROR_NAME = "Get_Error"  # 0.6's name of cmd 0x03


class ODriveError(enum.IntFlag):
    """``ODrive.Error`` of firmware 0.6: heartbeat Axis_Error, ``active_errors``, ``disarm_reason``
    (ODriveArduino ``src/ODriveEnums.h``)."""

    NONE = 0
    INITIALIZING = 0x1
    SYSTEM_LEVEL = 0x2
    TIMING_ERROR = 0x4
    MISSING_ESTIMATE = 0x8
    BAD_CONFIG = 0x10
    DRV_FAULT = 0x20
    MISSING_INPUT = 0x40
    DC_BUS_OVER_VOLTAGE = 0x100
    DC_BUS_UNDER_VOLTAGE = 0x200
    DC_BUS_OVER_CURRENT = 0x400
    DC_BUS_OVER_REGEN_CURRENT = 0x800
    CURRENT_LIMIT_VIOLATION = 0x1000
    MOTOR_OVER_TEMP = 0x2000
    INVERTER_OVER_TEMP = 0x4000
    VELOCITY_LIMIT_VIOLATION = 0x8000
    POSITION_LIMIT_VIOLATION = 0x10000
    WATCHDOG_TIMER_EXPIRED = 0x1000000
    ESTOP_REQUESTED = 0x2000000
    SPINOUT_DETECTED = 0x4000000
    BRAKE_RESISTOR_DISARMED = 0x8000000
    THERMISTOR_DISCONNECTED = 0x10000000
    CALIBRATION_ERROR = 0x40000000


#: Operator text where the bare name says too little (the loop logs it with a fault).
ODRIVE_ERROR_TEXT: dict[int, str] = {
    ODriveError.WATCHDOG_TIMER_EXPIRED: "WATCHDOG_TIMER_EXPIRED (no frame within the drive watchdog timeout)",
    ODriveError.BAD_CONFIG: "BAD_CONFIG (a configuration the drive cannot run)",
    ODriveError.MISSING_INPUT: "MISSING_INPUT (no input from the configured source)",
}


class ProcedureResult(enum.IntEnum):
    """``ODrive.ProcedureResult`` of firmware 0.6 (ODriveArduino ``src/ODriveEnums.h``): the
    outcome of the last requested state; DISARMED when an error ended closed loop."""

    SUCCESS = 0
    BUSY = 1
    CANCELLED = 2
    DISARMED = 3
    NO_RESPONSE = 4
    POLE_PAIR_CPR_MISMATCH = 5
    PHASE_RESISTANCE_OUT_OF_RANGE = 6
    PHASE_INDUCTANCE_OUT_OF_RANGE = 7
    UNBALANCED_PHASES = 8
    INVALID_MOTOR_TYPE = 9
    ILLEGAL_HALL_STATE = 10
    TIMEOUT = 11
    HOMING_WITHOUT_ENDSTOP = 12
    INVALID_STATE = 13
    NOT_CALIBRATED = 14
    NOT_CONVERGING = 15


def odrive_error_text(code: int) -> str:
    """Text for a 0.6 ``ODrive.Error`` value, e.g. ``WATCHDOG_TIMER_EXPIRED (…)``."""
    return flag_text(code, ODriveError, ODRIVE_ERROR_TEXT)


def procedure_result_text(code: int) -> str:
    """``DISARMED``; a value this table does not know as ``procedure result N``."""
    try:
        return ProcedureResult(code).name
    except ValueError:
        return f"procedure result {code}"


# --- Heartbeat (0x01), drive → host --------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Heartbeat06:
    axis_error: int  # ODriveError bits
    axis_state: AxisState
    procedure_result: int = ProcedureResult.SUCCESS  # kept as sent: newer firmware adds values
    trajectory_done: bool = False

    def fault_text(self) -> str:
        """Decoded axis error; "" when none. The procedure result is not a fault by itself
        (DISARMED comes with the error that disarmed)."""
        return odrive_error_text(self.axis_error) if self.axis_error else ""

    def procedure_text(self) -> str:
        return procedure_result_text(self.procedure_result)


def encode_heartbeat06(node_id: int, hb: Heartbeat06) -> Frame:
    """axis_error u32 @0, axis_state u8 @4, procedure_result u8 @5, @6 bit0 trajectory done."""
    payload = struct.pack("<IBBBB", hb.axis_error, int(hb.axis_state), hb.procedure_result,
                          int(hb.trajectory_done), 0)
    return Frame(arbitration_id(node_id, Cmd.HEARTBEAT), payload)


def decode_heartbeat06(frame: Frame) -> Heartbeat06:
    state = heartbeat_axis_state(frame)
    d = frame.data
    return Heartbeat06(u32_at(frame, 0), state, d[5], bool(d[6] & 1))


# --- Get_Error (0x03), drive → host --------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ErrorStatus:
    active_errors: int  # ODriveError bits present now
    disarm_reason: int  # ODriveError bits that last disarmed the axis (kept until Clear_Errors)

    def text(self) -> str:
        return (f"active {odrive_error_text(self.active_errors)}; "
                f"disarm reason {odrive_error_text(self.disarm_reason)}")


def encode_error_status(node_id: int, status: ErrorStatus) -> Frame:
    return Frame(arbitration_id(node_id, Cmd.GET_MOTOR_ERROR),
                 struct.pack("<II", status.active_errors, status.disarm_reason))


def decode_error_status(frame: Frame) -> ErrorStatus:
    check_frame(frame, Cmd.GET_MOTOR_ERROR, 8, GET_ERROR_NAME)
    return ErrorStatus(u32_at(frame, 0), u32_at(frame, 4))


# --- Clear_Errors (0x18), host → drive -----------------------------------------------------------


def encode_clear_errors06(node_id: int, identify: bool = False) -> Frame:
    """DLC 1: Identify u8 @0 (0.5.6: DLC 0)."""
    return Frame(arbitration_id(node_id, Cmd.CLEAR_ERRORS), bytes([int(identify)]))


def decode_clear_errors06(frame: Frame) -> bool:
    """The Identify flag. A DLC-0 frame reads as Identify 0: ODrive's own ROS node was advised
    by its maintainer to clear errors on an S1 that way (odriverobotics/ros_odrive PR #14)."""
    check_frame(frame, Cmd.CLEAR_ERRORS, 0)
    if not frame.data:
        return False
    if frame.data[0] > 1:
        raise ProtocolError(f"frame {frame_name(frame.arbitration_id)} byte 0: Identify is "
                            f"{frame.data[0]}, not 0 or 1")
    return bool(frame.data[0])
