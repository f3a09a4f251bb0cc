"""An emulated ODrive (CAN Simple, firmware 0.5.6 or 0.6) on the far side of a python-can bus.

The emulator opens its own bus on ``channel`` (``interface='virtual'`` by default: every bus on
the same channel in this process sees the others' frames) and serves one axis
(:class:`~hil.odrive_axis.ODriveAxis`, a :class:`~hil.plant.Turntable` behind it) from a service
thread:

- Heartbeat (0x01) every ``heartbeat_period_s`` of wall time, and/or after every
  ``heartbeat_every_ticks`` torque commands (lockstep).
- Set_Axis_State (IDLE / CLOSED_LOOP_CONTROL), Set_Controller_Mode, Set_Input_Torque, Set_Limits,
  Clear_Errors, Estop.
- Get_Encoder_Estimates, Get_Iq, Get_Bus_Voltage_Current, Get_Motor_Error (0.6: Get_Error)
  answered when the request is RTR or has DLC 0; the reply uses the request's id.
- ``cyclic_feedback``: encoder estimates and Iq sent without request — every ``dt_s`` of wall time
  (REALTIME), or after every torque command (LOCKSTEP).
- The drive watchdog (``watchdog_timeout_s``, None = disabled as by default on the drive): every
  frame addressed to the axis feeds it, requests included; checked in CLOSED_LOOP only (in
  LOCKSTEP until the loop's first plant period, see :class:`~hil.odrive_axis.ODriveEmulatorBase`).
- Get_Version (0x00) answered only with ``firmware`` given (0.6+ behaviour; 0.5.6 is silent).
- ``firmware`` 0.6 or later speaks 0.6's layouts (:mod:`drivers.odrive_codec06`): the heartbeat
  with the procedure result at byte 5, 0.6's error bits (watchdog expiry 0x1000000, estop
  0x2000000), Get_Error (active errors, disarm reason) on cmd 0x03, Clear_Errors with DLC 1
  (Identify; counted in ``identify_requests``) — and with DLC 0, taken as Identify 0 as ODrive's
  maintainer advised for ros_odrive (PR #14); an RTR Clear_Errors is rejected. No firmware, or
  0.5.x: 0.5.6 exactly as before. ``clear_errors_dlc`` lists the DLC of every Clear_Errors.

Modes (:class:`~hil.odrive_axis.EmuMode`): LOCKSTEP advances the plant one ``dt_s`` per
Set_Input_Torque received (in any state: in IDLE the current command is zero) — deterministic,
the feedback a request returns is the plant after the torque commands received before it.
REALTIME advances the plant against the wall clock in the service thread.

Fault injection: :meth:`drop_next`, :meth:`delay_next` (response frames: replies to Get_*
requests and cyclic feedback, heartbeats are not affected; a delayed frame's content is as of
the request), :meth:`inject_axis_error`,
:meth:`send_error_frame`, :meth:`expire_watchdog`, :meth:`stop_heartbeat`, :meth:`ignore_idle`. Capture: ``capture`` is a ``can.Listener`` or a
path for ``can.Logger`` (format from the extension: ``.log`` candump, ``.asc``, ...); it receives
every frame the emulator receives and sends.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Callable

import can

from controller.config import PlantConfig
from drivers.errors import ProtocolError
from drivers.odrive_codec import (REQUESTABLE, Cmd, FirmwareVersion, Frame, Heartbeat,
                                  decode_set_axis_state, decode_set_controller_mode,
                                  decode_set_input_torque,
                                  decode_set_limits, encode_bus_voltage_current,
                                  encode_encoder_estimates, encode_heartbeat, encode_iq,
                                  encode_motor_error, encode_version)
from drivers.odrive_codec06 import (decode_clear_errors06, encode_error_status,
                                    encode_heartbeat06)
from drivers.odrive_dialect import DIALECT_05, DIALECT_06, Dialect
from hil.odrive_axis import EmuMode, ODriveEmulatorBase

log = logging.getLogger(__name__)

_POLL_S = 0.005  # longest the service thread blocks in recv [s]


def emulated_dialect(firmware: FirmwareVersion | None) -> Dialect:
    """0.5.6 without a firmware or with 0.5.x; 0.6's layouts for 0.6 and anything later (a later
    firmware is emulated as 0.6-like: the driver is to refuse it by its version alone)."""
    if firmware is None or (firmware.major, firmware.minor) < (0, 6):
        return DIALECT_05
    return DIALECT_06


def firmware_from_text(text: str) -> FirmwareVersion | None:
    """The ``firmware`` argument for a ``drive.emulated_firmware`` text ("0.5.6" or "0.6.<n>"):
    None for 0.5.6 (which has no Get_Version and stays silent), else the version it answers."""
    major, minor, revision = (int(part) for part in text.split("."))
    return None if (major, minor) < (0, 6) else FirmwareVersion(major, minor, revision)


def to_message(frame: Frame) -> can.Message:
    return can.Message(arbitration_id=frame.arbitration_id, data=frame.data,
                       dlc=len(frame.data), is_remote_frame=frame.rtr, is_extended_id=False)


class ODriveCanEmulator(ODriveEmulatorBase):
    """An ODrive axis on a CAN bus. Use as a context manager, or ``start()`` / ``stop()``."""

    def __init__(self, plant: PlantConfig, *, channel: str, node_id: int = 0, seed: int = 0,
                 mode: EmuMode | str = EmuMode.LOCKSTEP, dt_s: float = 0.001,
                 interface: str = "virtual", heartbeat_period_s: float | None = 0.1,
                 heartbeat_every_ticks: int = 0, cyclic_feedback: bool = False,
                 watchdog_timeout_s: float | None = None, bus_voltage_v: float = 24.0,
                 capture: can.Listener | str | Path | None = None,
                 firmware: FirmwareVersion | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        """``dt_s``: plant period [s]; ``heartbeat_period_s``: wall-time heartbeat [s] (None = off);
        ``watchdog_timeout_s``: drive watchdog [s] (None = disabled); ``firmware``: answer
        Get_Version (0x00) with it, as firmware 0.6+ does (None: silent, as 0.5.6);
        ``clock``: wall time [s]."""
        super().__init__(plant, seed=seed, mode=mode, dt_s=dt_s,
                         watchdog_timeout_s=watchdog_timeout_s, bus_voltage_v=bus_voltage_v,
                         clock=clock, dialect=emulated_dialect(firmware))
        self.node_id = node_id
        self.channel = channel
        self.interface = interface
        self.heartbeat_period_s = heartbeat_period_s
        self.heartbeat_every_ticks = heartbeat_every_ticks
        self.cyclic_feedback = cyclic_feedback
        self.firmware = firmware
        self._capture_arg = capture
        self._capture: can.Listener | None = None
        self._owns_capture = False
        self._bus: can.BusABC | None = None
        # counters (read by tests)
        self.frames_received = 0
        self.requests_answered = 0
        self.responses_dropped = 0
        self.rejected_frames = 0
        self.error_frames_received = 0
        self.identify_requests = 0  # 0.6 Clear_Errors with Identify 1
        self.clear_errors_dlc: list[int] = []  # the DLC of every Clear_Errors received

    # --- lifecycle ---------------------------------------------------------------------------------
    def start(self) -> "ODriveCanEmulator":
        if self._thread is not None:
            return self
        self._bus = can.Bus(interface=self.interface, channel=self.channel)
        if isinstance(self._capture_arg, (str, Path)):
            self._capture = can.Logger(self._capture_arg)
            self._owns_capture = True
        else:
            self._capture = self._capture_arg
        now = self._clock()
        self._next_heartbeat = now
        self._next_step = now + self.axis.dt_s
        self._start_thread(f"odrive-can-emu-{self.node_id}")
        return self

    def stop(self) -> None:
        """Stop the service thread, release the bus and the capture. Safe to call twice."""
        self._join_thread()
        with self._lock:
            if self._bus is not None:
                self._bus.shutdown()
                self._bus = None
            if self._capture is not None and self._owns_capture:
                self._capture.stop()
            self._capture = None

    # --- fault injection ---------------------------------------------------------------------------
    def inject_axis_error(self, code: int, announce: bool = True) -> None:
        """Latch axis error bits (the axis drops to IDLE). ``announce``: send a heartbeat now
        instead of at the next period, so the host sees it on its next read."""
        with self._changed:
            super().inject_axis_error(code)
            if announce:
                self.send_heartbeat()

    def expire_watchdog(self) -> None:
        """Expire the drive watchdog now (as if the host had gone silent): the firmware's bit."""
        self.inject_axis_error(self.axis.dialect.watchdog_expired)

    def send_error_frame(self, error_class: int = 0) -> None:
        """Put one CAN error frame on the bus (``error_class``: SocketCAN's CAN_ERR_* bits in the
        id, e.g. 0x040 bus-off)."""
        with self._lock:
            self._send_message(can.Message(is_error_frame=True, arbitration_id=error_class, dlc=0))

    def stop_heartbeat(self) -> None:
        """Stop sending heartbeats, for good (a drive whose CAN side hangs)."""
        with self._lock:
            self.heartbeat_period_s = None
            self.heartbeat_every_ticks = 0

    def send_heartbeat(self) -> None:
        with self._lock:
            self._send(self._heartbeat_frame())

    def _heartbeat_frame(self) -> Frame:
        """The axis's heartbeat in its firmware's layout."""
        hb = self.axis.heartbeat()
        if isinstance(hb, Heartbeat):
            return encode_heartbeat(self.node_id, hb)
        return encode_heartbeat06(self.node_id, hb)

    # --- service thread ----------------------------------------------------------------------------
    def _run(self) -> None:
        while not self._stop.is_set():
            timeout = max(0.0, min(_POLL_S, self._next_event() - self._clock()))
            try:
                msg = self._bus.recv(timeout) if self._bus is not None else None
            except can.CanError as err:
                log.error("emulator node %d: recv failed: %s", self.node_id, err)
                return
            with self._changed:
                now = self._clock()
                if msg is not None:
                    self._on_message(msg, now)
                self._timers(now)
                self._changed.notify_all()

    def _next_event(self) -> float:
        with self._lock:
            t = super()._next_event()
            if self.heartbeat_period_s:
                t = min(t, self._next_heartbeat)
            return t

    def _on_realtime_step(self) -> None:
        if self.cyclic_feedback:
            self._send_feedback()

    def _periodic(self, now: float) -> None:
        if self.heartbeat_period_s and now >= self._next_heartbeat:
            self._send(self._heartbeat_frame())
            self._next_heartbeat = max(self._next_heartbeat + self.heartbeat_period_s, now)

    def _send_queued(self, item: Frame, now: float) -> None:
        self._send(item)

    def _on_message(self, msg: can.Message, now: float) -> None:
        if self._capture is not None:
            self._capture.on_message_received(msg)
        if msg.is_error_frame:
            self.error_frames_received += 1
            return
        if msg.is_extended_id or msg.arbitration_id >> 5 != self.node_id:
            return
        self.frames_received += 1
        frame = Frame(msg.arbitration_id, bytes(msg.data), msg.is_remote_frame)
        axis = self.axis
        axis.feed_watchdog(now)  # every frame addressed to the axis feeds it (do_command)
        cmd = frame.cmd
        try:
            if cmd == Cmd.GET_VERSION:
                if frame.is_request and self.firmware is not None:
                    self._respond(encode_version(self.node_id, self.firmware))
            elif cmd in REQUESTABLE:
                if frame.is_request:
                    self._answer(Cmd(cmd))
            elif cmd == Cmd.SET_AXIS_STATE:
                axis.request_state(decode_set_axis_state(frame), now)
            elif cmd == Cmd.SET_CONTROLLER_MODE:
                axis.set_controller_mode(*decode_set_controller_mode(frame))
            elif cmd == Cmd.SET_INPUT_TORQUE:
                axis.set_input_torque(decode_set_input_torque(frame))
                if self.mode is EmuMode.LOCKSTEP:
                    self._lockstep_tick()
            elif cmd == Cmd.SET_LIMITS:
                axis.set_limits(*decode_set_limits(frame))
            elif cmd == Cmd.CLEAR_ERRORS:
                if axis.dialect.line >= (0, 6):
                    self.identify_requests += decode_clear_errors06(frame)
                self.clear_errors_dlc.append(len(frame.data))
                axis.clear_errors()
            elif cmd == Cmd.ESTOP:
                axis.estop()
        except ProtocolError as err:
            self.rejected_frames += 1
            log.warning("emulator node %d: %s", self.node_id, err)

    def _lockstep_tick(self) -> None:
        self.axis.step()
        if self.cyclic_feedback:
            self._send_feedback()
        n = self.heartbeat_every_ticks
        if n and self.axis.steps % n == 0:
            self._send(self._heartbeat_frame())

    def _answer(self, cmd: Cmd) -> None:
        node, axis = self.node_id, self.axis
        if cmd == Cmd.GET_ENCODER_ESTIMATES:
            fb = axis.feedback()
            frame = encode_encoder_estimates(node, fb.pos_turns, fb.vel_turns_s)
        elif cmd == Cmd.GET_IQ:
            fb = axis.feedback()
            frame = encode_iq(node, fb.iq_setpoint_a, fb.iq_measured_a)
        elif cmd == Cmd.GET_BUS_VOLTAGE_CURRENT:
            frame = encode_bus_voltage_current(node, axis.bus_voltage_v, axis.bus_current_a())
        elif axis.dialect.line >= (0, 6):  # cmd 0x03 is Get_Error in 0.6
            frame = encode_error_status(node, axis.error_status())
        else:
            frame = encode_motor_error(node, axis.motor_error)
        self.requests_answered += 1
        self._respond(frame)

    def _send_feedback(self) -> None:
        fb = self.axis.feedback()
        self._respond(encode_encoder_estimates(self.node_id, fb.pos_turns, fb.vel_turns_s))
        self._respond(encode_iq(self.node_id, fb.iq_setpoint_a, fb.iq_measured_a))

    def _respond(self, frame: Frame) -> None:
        """Send a response frame, subject to drop/delay injection."""
        if self._drop_remaining > 0:
            self._drop_remaining -= 1
            self.responses_dropped += 1
            return
        if self._delay_remaining > 0:
            self._delay_remaining -= 1
            self._queue(self._clock() + self._delay_s, frame)
            return
        self._send(frame)

    def _send(self, frame: Frame) -> None:
        self._send_message(to_message(frame))

    def _send_message(self, msg: can.Message) -> None:
        if self._bus is None:
            return
        msg.timestamp = time.time()
        msg.channel = self.channel
        try:
            self._bus.send(msg)
        except can.CanError as err:
            log.warning("emulator node %d: send failed: %s", self.node_id, err)
            return
        if self._capture is not None:
            msg.is_rx = False
            self._capture.on_message_received(msg)
