"""What an ODrive firmware line changes on CAN Simple, in one table the driver and the emulator share.

A :class:`Dialect` holds the frame functions and the error bits whose meaning depends on the
firmware: the heartbeat layout, the axis error bits (watchdog expiry, estop, a refused request),
the Clear_Errors frame, and the text of an error code. 0.5.x: :mod:`drivers.odrive_codec`;
0.6.x: :mod:`drivers.odrive_codec06`. Frames that did not change are encoded the same for both.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Union

from . import odrive_codec as oc
from . import odrive_codec06 as oc6

AnyHeartbeat = Union[oc.Heartbeat, oc6.Heartbeat06]


@dataclass(frozen=True)
class Dialect:
    line: tuple[int, int]  # (major, minor) of the firmware line
    watchdog_expired: int  # axis error bit of a watchdog expiry
    estop_requested: int  # axis error bit of an Estop
    invalid_state: int  # axis error bit of a state request the axis cannot follow (0: none)
    bad_controller_mode: int  # axis error bit of an unknown control / input mode
    decode_heartbeat: Callable[[oc.Frame], AnyHeartbeat]
    encode_clear_errors: Callable[[int], oc.Frame]
    error_text: Callable[[int], str]

    @property
    def name(self) -> str:
        return "{}.{}.x".format(*self.line)


DIALECT_05 = Dialect((0, 5), oc.AxisError.WATCHDOG_TIMER_EXPIRED, oc.AxisError.ESTOP_REQUESTED,
                     oc.AxisError.INVALID_STATE, oc.AxisError.CONTROLLER_FAILED,
                     oc.decode_heartbeat, oc.encode_clear_errors, oc.axis_error_text)
# 0.6 reports a refused state request in the heartbeat's procedure result (INVALID_STATE), not as
# an axis error; an unknown controller mode is taken as BAD_CONFIG (not confirmed from a source)
DIALECT_06 = Dialect((0, 6), oc6.ODriveError.WATCHDOG_TIMER_EXPIRED, oc6.ODriveError.ESTOP_REQUESTED,
                     0, oc6.ODriveError.BAD_CONFIG,
                     oc6.decode_heartbeat06, oc6.encode_clear_errors06, oc6.odrive_error_text)

#: The firmware lines whose CAN Simple protocol the CAN driver speaks.
CAN_FIRMWARE: dict[tuple[int, int], Dialect] = {DIALECT_05.line: DIALECT_05, DIALECT_06.line: DIALECT_06}


def can_dialect(version: oc.FirmwareVersion) -> Dialect | None:
    """The dialect of a firmware that answered Get_Version; None when the driver does not speak it."""
    return CAN_FIRMWARE.get((version.major, version.minor))


def can_firmware_refusal(version: oc.FirmwareVersion) -> str | None:
    """One line why the CAN driver refuses this firmware, or None."""
    return oc.firmware_refusal(version, "CAN Simple", tuple(CAN_FIRMWARE))
