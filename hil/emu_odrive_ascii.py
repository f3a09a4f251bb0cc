"""An emulated ODrive speaking the ASCII protocol (firmware 0.5.6) on a pseudo-terminal.

``os.openpty()`` gives a master/slave pair; the emulator serves the master (raw mode) from a
service thread and the driver opens :attr:`ODriveAsciiEmulator.port_name` (the slave's path) with
pyserial, exactly as it would open ``/dev/ttyACM0``. One axis (``axis``, default 0) has the
turntable behind it (:class:`~hil.odrive_axis.ODriveAxis`); other axis numbers answer
``invalid motor N``.

Commands: ``c <axis> <torque>`` (torque mode + input torque, feeds the watchdog, no reply),
``f <axis>`` (``"%f %f"`` pos [turns], vel [turns/s]), ``r <property>`` (value printed as the
firmware does, truncated to 9 characters), ``w <property> <value>`` (no reply on success),
``u <axis>`` (feed the watchdog), ``sc`` (clear errors). A line with a wrong checksum is ignored;
with a right one the reply carries ``*<checksum>``. Error replies use the firmware's exact texts.
Deviations: other firmware commands (``p``, ``v``, ``q``, ``t``, ``ss``, ``se``, ``sr``, ...) answer
``not implemented``; writing a read-only property or an unparsable value answers
``not implemented``.

Properties (prefix ``axis<n>.``): ``error``, ``current_state``, ``requested_state``,
``controller.config.control_mode``, ``controller.config.input_mode``, ``controller.input_torque``,
``motor.current_control.Iq_measured``, ``motor.current_control.Iq_setpoint``,
``encoder.pos_estimate``, ``encoder.vel_estimate``, ``config.enable_watchdog``,
``config.watchdog_timeout``, ``motor.config.current_lim``, ``motor.config.torque_constant``;
``vbus_voltage`` and ``fw_version_major``/``_minor``/``_revision`` (``firmware``). Fault options
for the driver's checks: ``watchdog_config`` refused / ignored.

Modes: LOCKSTEP advances the plant one ``dt_s`` per ``c`` command; REALTIME advances it against
the wall clock. ``baudrate`` (optional) paces replies as a full-duplex UART at that rate would
(10 bits per byte; request lines queue on one wire, replies on the other, a reply starts once its
request has fully arrived); the pty itself has no baud rate. Commands still take effect when
their bytes are read.

Fault injection: :meth:`inject_garbage` (bytes put on the line ahead of the next reply),
:meth:`close_port` (the far end disappears), :meth:`drop_next` (replies swallowed),
:meth:`delay_next`. Byte log: ``byte_log`` (path or text stream) gets one line per chunk,
``<t_s> <'>'|'<'> <bytes as escaped text>`` (t_s since start; ``>`` = bytes the drive received,
``<`` = bytes it sent; :func:`hil.capture.format_serial_line`, the format of ``run --capture``).
"""

from __future__ import annotations

import math
import os
import select
import time
import tty
from pathlib import Path
from typing import Callable, TextIO

from controller.config import PlantConfig
from drivers.odrive_ascii_codec import (CMD_CLEAR_ERRORS, MAX_LINE_BYTES, decode_request,
                                        encode_reply, format_feedback, format_read_value,
                                        split_request_lines)
from drivers.odrive_codec import ControlMode
from hil.capture import format_serial_line
from hil.odrive_axis import EmuMode, ODriveEmulatorBase

_POLL_S = 0.005  # longest the service thread blocks in select [s]
BITS_PER_BYTE = 10  # start + 8 data + stop

_Value = float | int | bool
_Getter = Callable[[], _Value]
_Setter = Callable[[str, float], None]  # (value text, now [s])


class ODriveAsciiEmulator(ODriveEmulatorBase):
    """An ODrive's USB/UART ASCII console on a pty. Context manager, or ``start()``/``stop()``."""

    def __init__(self, plant: PlantConfig, *, seed: int = 0, mode: EmuMode | str = EmuMode.LOCKSTEP,
                 dt_s: float = 0.001, axis: int = 0, watchdog_timeout_s: float | None = None,
                 bus_voltage_v: float = 24.0, baudrate: int | None = None,
                 byte_log: str | Path | TextIO | None = None,
                 firmware: tuple[int, int, int] = (0, 5, 6), watchdog_config: str = "supported",
                 clock: Callable[[], float] = time.monotonic) -> None:
        """``dt_s``: plant period [s]; ``watchdog_timeout_s``: initial drive watchdog [s] (None =
        disabled; the host may enable it with ``w axisN.config.enable_watchdog 1``);
        ``firmware``: what ``r fw_version_major/minor/revision`` answer; ``watchdog_config``:
        ``supported``, ``refused`` (the two watchdog properties are unknown: ``invalid
        property``) or ``ignored`` (writes acknowledged by silence, nothing stored);
        ``baudrate``: pace replies as a UART at this rate (None = as fast as the pty)."""
        super().__init__(plant, seed=seed, mode=mode, dt_s=dt_s,
                         watchdog_timeout_s=watchdog_timeout_s, bus_voltage_v=bus_voltage_v,
                         clock=clock)
        self.axis_number = axis
        self.baudrate = baudrate
        if watchdog_config not in ("supported", "refused", "ignored"):
            raise ValueError(f"watchdog_config: supported, refused or ignored, got {watchdog_config!r}")
        self.firmware = firmware
        self.watchdog_config = watchdog_config
        self._byte_log_arg = byte_log
        self._byte_log: TextIO | None = None
        self._owns_log = False
        self._master = -1
        self._slave = -1
        self._wake_r = self._wake_w = -1
        self._close_requested = False
        self._rx = b""
        self._rx_free = self._tx_free = 0.0
        self._garbage = b""
        self._t0 = 0.0
        self.port_name = ""
        self.port_closed = False
        # counters (read by tests)
        self.lines_received = 0
        self.lines_ignored = 0  # bad checksum, too long, not ASCII
        self.replies_dropped = 0
        self._props = self._property_table()

    # --- lifecycle ---------------------------------------------------------------------------------
    def start(self) -> "ODriveAsciiEmulator":
        if self._thread is not None:
            return self
        self._master, self._slave = os.openpty()
        tty.setraw(self._master)
        self.port_name = os.ttyname(self._slave)
        self._wake_r, self._wake_w = os.pipe()
        if isinstance(self._byte_log_arg, (str, Path)):
            self._byte_log = open(self._byte_log_arg, "w", encoding="ascii")
            self._owns_log = True
        else:
            self._byte_log = self._byte_log_arg
        self._t0 = self._clock()
        self._next_step = self._t0 + self.axis.dt_s
        self._start_thread("odrive-ascii-emu")
        return self

    def stop(self) -> None:
        """Stop the thread, close both pty ends and the byte log. Safe to call twice."""
        self._join_thread()
        with self._lock:
            for fd in (self._master, self._slave, self._wake_r, self._wake_w):
                if fd >= 0:
                    os.close(fd)
            self._master = self._slave = self._wake_r = self._wake_w = -1
            if self._byte_log is not None and self._owns_log:
                self._byte_log.close()
            self._byte_log = None

    # --- fault injection ---------------------------------------------------------------------------
    def inject_garbage(self, data: bytes) -> None:
        """Put ``data`` on the line immediately ahead of the next reply (line noise mid-exchange)."""
        with self._lock:
            self._garbage += data

    def close_port(self, timeout_s: float = 1.0) -> None:
        """Close the master side, as a drive that is unplugged; returns once it is closed."""
        with self._changed:
            self._close_requested = True
            self._wake()
            self._changed.wait_for(lambda: self.port_closed, timeout=timeout_s)

    # --- service thread ----------------------------------------------------------------------------
    def _wake(self) -> None:
        if self._wake_w >= 0:
            os.write(self._wake_w, b"x")

    def _run(self) -> None:
        while not self._stop.is_set():
            with self._lock:
                if self._close_requested and not self.port_closed:
                    self._close_master()
                timeout = max(0.0, min(_POLL_S, self._next_event() - self._clock()))
                fds = [self._wake_r] + ([self._master] if not self.port_closed else [])
            ready, _, _ = select.select(fds, [], [], timeout)
            with self._changed:
                if self._wake_r in ready:
                    os.read(self._wake_r, 64)
                data = b""
                if not self.port_closed and self._master in ready:
                    try:
                        data = os.read(self._master, 4096)
                    except OSError:
                        data = b""
                now = self._clock()
                if data:
                    self._log("rx", data, now)
                    self._on_bytes(data, now)
                self._timers(now)
                self._changed.notify_all()

    def _close_master(self) -> None:
        os.close(self._master)
        self._master = -1
        self.port_closed = True
        self._queued.clear()
        self._changed.notify_all()

    def _on_bytes(self, data: bytes, now: float) -> None:
        lines, self._rx = split_request_lines(self._rx + data)
        if len(self._rx) > MAX_LINE_BYTES:  # an overlong line: dropped up to the next end of line
            self._rx = b""
            self.lines_ignored += 1
        for raw in lines:
            self.lines_received += 1
            arrived = self._arrival(len(raw) + 1, now)
            request = decode_request(raw)
            if request is None:
                self.lines_ignored += 1
                continue
            reply = self._execute(request.command, now)
            if reply is not None:
                self._reply(encode_reply(reply, request.use_checksum), arrived, now)

    def _arrival(self, n_bytes: int, now: float) -> float:
        """When a line of ``n_bytes`` (end of line included) would have fully arrived over a UART
        at ``baudrate`` — lines queue on the wire one after another; ``now`` when unpaced."""
        if not self.baudrate:
            return now
        self._rx_free = max(now, self._rx_free) + n_bytes * BITS_PER_BYTE / self.baudrate
        return self._rx_free

    # --- replies -----------------------------------------------------------------------------------
    def _reply(self, data: bytes, arrived: float, now: float) -> None:
        """Send a reply; paced, it starts once its request has arrived and the previous reply
        has gone out (full duplex: the two directions are separate wires)."""
        if self._drop_remaining > 0:
            self._drop_remaining -= 1
            self.replies_dropped += 1
            return
        data, self._garbage = self._garbage + data, b""
        due = now
        if self.baudrate:
            self._tx_free = max(arrived, self._tx_free) + len(data) * BITS_PER_BYTE / self.baudrate
            due = self._tx_free
        if self._delay_remaining > 0:
            self._delay_remaining -= 1
            due += self._delay_s
        if due <= now:
            self._write(data, now)
        else:
            self._queue(due, data)  # paced or delayed: written by _send_queued

    def _send_queued(self, item: bytes, now: float) -> None:
        self._write(item, now)

    def _write(self, data: bytes, now: float) -> None:
        if self.port_closed:
            return
        try:
            os.write(self._master, data)
        except OSError:
            return
        self._log("tx", data, now)

    def _log(self, direction: str, data: bytes, now: float) -> None:
        if self._byte_log is not None:
            # host→drive is what the emulator receives: the format of ``run --capture``
            self._byte_log.write(format_serial_line(now - self._t0, direction == "rx", data))

    # --- commands ----------------------------------------------------------------------------------
    def _execute(self, command: str, now: float) -> str | None:
        """Run one command; the reply text, or None for no reply."""
        words = command.split()
        head = words[0]
        if head == "c":
            return self._cmd_torque(words, now)
        if head == "f":
            return self._with_axis(words, 2, self._feedback_text)
        if head == "u":
            return self._with_axis(words, 2, lambda: self.axis.feed_watchdog(now))
        if head == "r":
            if len(words) < 2:
                return "invalid command format"
            prop = self._props.get(words[1])
            return "invalid property" if prop is None else format_read_value(prop[0]())
        if head == "w":
            return self._cmd_write(words, now)
        if head == CMD_CLEAR_ERRORS:
            self.axis.clear_errors()
            return None
        if head[0] in "pvqtsi":
            return "not implemented"
        return "unknown command"

    def _feedback_text(self) -> str:
        fb = self.axis.feedback()
        return format_feedback(fb.pos_turns, fb.vel_turns_s)

    def _with_axis(self, words: list[str], n_words: int, action: Callable[[], str | None]) -> str | None:
        if len(words) < n_words:
            return "invalid command format"
        try:
            number = int(words[1])
        except ValueError:
            return "invalid command format"
        if number != self.axis_number:
            return f"invalid motor {number}"
        return action()

    def _cmd_torque(self, words: list[str], now: float) -> str | None:
        if len(words) < 3:
            return "invalid command format"
        try:
            torque = _finite(words[2])  # `c 0 nan` is refused as a real drive's parser does
        except ValueError:
            return "invalid command format"

        def apply() -> None:
            axis = self.axis
            axis.control_mode = ControlMode.TORQUE_CONTROL
            axis.set_input_torque(torque)
            axis.feed_watchdog(now)
            if self.mode is EmuMode.LOCKSTEP:
                axis.step()

        return self._with_axis(words, 3, apply)

    def _cmd_write(self, words: list[str], now: float) -> str | None:
        if len(words) < 3:
            return "invalid command format"
        prop = self._props.get(words[1])
        if prop is None:
            return "invalid property"
        setter = prop[1]
        if setter is None:
            return "not implemented"
        try:
            setter(words[2], now)
        except ValueError:
            return "not implemented"
        return None

    def _property_table(self) -> dict[str, tuple[_Getter, _Setter | None]]:
        """Property path → (read, write or None for read-only). Writers raise ValueError on a
        value they cannot take."""
        axis = self.axis
        p = f"axis{self.axis_number}."

        def attr(name: str, convert: Callable[[str], object]) -> _Setter:
            return lambda text, now: setattr(axis, name, convert(text))

        def control_mode(text: str, now: float) -> None:
            axis.set_controller_mode(int(text), axis.input_mode)

        def input_mode(text: str, now: float) -> None:
            axis.set_controller_mode(axis.control_mode, int(text))

        def requested_state(text: str, now: float) -> None:
            axis.request_state(int(text), now)

        def ignore(text: str, now: float) -> None:
            float(text)  # parsed, acknowledged by silence, not stored

        watchdog = {
            p + "config.enable_watchdog": (lambda: axis.watchdog_enabled,
                                           attr("watchdog_enabled", _bool)),
            p + "config.watchdog_timeout": (lambda: axis.watchdog_timeout_s,
                                            attr("watchdog_timeout_s", _finite)),
        }
        if self.watchdog_config == "refused":
            watchdog = {}
        elif self.watchdog_config == "ignored":
            watchdog = {name: (read, ignore) for name, (read, _) in watchdog.items()}
        major, minor, revision = self.firmware
        return watchdog | {
            "fw_version_major": (lambda: major, None),
            "fw_version_minor": (lambda: minor, None),
            "fw_version_revision": (lambda: revision, None),
            p + "error": (lambda: axis.error, attr("error", int)),
            p + "current_state": (lambda: int(axis.state), None),
            p + "requested_state": (lambda: 0, requested_state),  # reads back 0 once acted upon
            p + "controller.config.control_mode": (lambda: int(axis.control_mode), control_mode),
            p + "controller.config.input_mode": (lambda: int(axis.input_mode), input_mode),
            p + "controller.input_torque": (lambda: axis.input_torque_nm, attr("input_torque_nm", _finite)),
            p + "motor.current_control.Iq_measured": (lambda: axis.feedback().iq_measured_a, None),
            p + "motor.current_control.Iq_setpoint": (axis.current_command_a, None),
            p + "encoder.pos_estimate": (lambda: axis.feedback().pos_turns, None),
            p + "encoder.vel_estimate": (lambda: axis.feedback().vel_turns_s, None),
            p + "motor.config.current_lim": (lambda: axis.current_limit_a, attr("current_limit_a", _finite)),
            p + "motor.config.torque_constant": (lambda: axis.plant.Kt, None),
            "vbus_voltage": (lambda: axis.bus_voltage_v, None),
        }


def _bool(text: str) -> bool:
    if text in ("1", "true", "True"):
        return True
    if text in ("0", "false", "False"):
        return False
    raise ValueError(text)


def _finite(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(text)
    return value
