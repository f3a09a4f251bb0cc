"""ODrive over the ASCII protocol (UART / USB CDC, firmware 0.5.6): the torque-mode backend.

Per tick, one write and up to three reply lines, bounded by ``timeout_s``:

``read()``  discard whatever arrived since the last tick (late replies, noise: counted in
            ``rejected_lines``), send ``f <axis>`` and ``r axis<n>.motor.current_control.Iq_measured``
            (and every ``status_every_ticks`` ticks ``r axis<n>.current_state``) in one write, read
            the replies. Each reply has its own shape — two ``%f`` numbers, one ``%f`` number, an
            integer — so a lost or shifted line can never be taken for another; a line that does
            not parse is counted in ``rejected_lines``, skipped, and never becomes a value; a
            reply missing at the deadline leaves the sample stale (``sequence`` counts good ``f``
            replies). Position/velocity turns → rad; current = Iq_measured; torque estimate and
            temperature NaN.
``write()`` ``c <axis> <torque>`` (no reply; feeds the drive watchdog).

``open()`` reads ``fw_version_major/minor/revision`` (first contact: nothing answering, or a
firmware other than 0.5.x, is refused). ``enable()`` checks ``axis.error``, writes the watchdog
timeout and enables the watchdog (when ``watchdog_timeout_s`` is finite) and reads both back — a
watchdog not confirmed on refuses enable unless ``allow_unprotected`` — then passthrough input,
zero torque in torque mode, requests CLOSED_LOOP_CONTROL and polls ``current_state`` until it is
reached. ``disable()`` requests IDLE, switches off the watchdog it switched on, and polls
``current_state`` until IDLE within ``state_timeout_s`` (else CommunicationError: not confirmed).

Link budget: the request and reply bytes per tick at 10 bits/byte set the highest loop rate
(:func:`max_rate_for_baud`; worst case: the tick that polls the state); a loop rate above it is
refused when opening. The port's write timeout is ``state_timeout_s``, not ``timeout_s``: a
tick's few dozen bytes fit the OS buffer, so a write blocks only on a dead link — and pyserial
raises "Write timeout" after a complete write when the thread was merely descheduled longer than
the timeout (seen at 2 ms on a loaded machine: ``hil --protocol odrive_ascii`` failed at 0 ticks).
Without checksums, line noise that happens to form a well-formed reply
cannot be told from one: enable ``use_checksum`` on a noisy link. The port is opened with
``exclusive=True`` and read with ``select`` on its file descriptor (POSIX).

Resolution: ``f`` prints 6 decimals of a turn — 1e-6 turn = 6.3 µrad, about 17 counts of a 24-bit
encoder; the ``r`` reply for Iq is truncated to 9 characters (1e-6 A below 10 A).
"""

from __future__ import annotations

import logging
import math
import select
import time
from typing import Callable, Sequence

import serial

from .backend import Backend, Clock, DriveState, Feedback, refuse_or_warn_unprotected
from .errors import BackendError, CommunicationError, EnableError, ProtocolError
from .odrive_ascii_codec import (CMD_CLEAR_ERRORS, MAX_LINE_BYTES, READ_REPLY_CHARS,
                                 cmd_feed_watchdog, cmd_feedback, cmd_read, cmd_torque, cmd_write,
                                 decode_reply, encode_line, format_feedback, parse_feedback,
                                 parse_float, parse_int, prop_axis_error, prop_current_state,
                                 prop_enable_watchdog, prop_input_mode, prop_iq_measured,
                                 prop_requested_state, prop_watchdog_timeout)
from .odrive_codec import (AxisState, FirmwareVersion, InputMode, axis_error_text,
                           firmware_refusal)

log = logging.getLogger(__name__)

TWO_PI = 2.0 * math.pi
NAN = math.nan
BITS_PER_BYTE = 10  # UART 8N1: start + 8 data + stop
LINK_MARGIN = 0.2  # fraction of each period kept free (drive processing, OS and USB latency)
# Widest values the byte budget assumes: |pos| < 1e4 turns, |vel| < 100 turns/s, |torque| < 100 N·m.
_WORST_POS_TURNS = -9999.999999
_WORST_VEL_TURNS_S = -99.999999
_WORST_TORQUE_NM = -99.999999
_CHECKSUM_REQUEST_BYTES = 5  # " *255"
_CHECKSUM_REPLY_BYTES = 4  # "*255"


def tick_lines(axis: int, use_checksum: bool, status: bool) -> tuple[list[int], list[int], int]:
    """Byte counts of one tick: (request lines, their reply lines, the torque command line), with
    worst-case number widths and 3-digit checksums; requests end in ``\\n``, replies in ``\\r\\n``."""
    requests = [cmd_feedback(axis), cmd_read(prop_iq_measured(axis))]
    replies = [format_feedback(_WORST_POS_TURNS, _WORST_VEL_TURNS_S), "-" * READ_REPLY_CHARS]
    if status:
        requests.append(cmd_read(prop_current_state(axis)))
        replies.append("13")
    req_cs = _CHECKSUM_REQUEST_BYTES if use_checksum else 0
    rep_cs = _CHECKSUM_REPLY_BYTES if use_checksum else 0
    torque = len(cmd_torque(axis, _WORST_TORQUE_NM)) + 1 + req_cs
    return ([len(r) + 1 + req_cs for r in requests], [len(r) + 2 + rep_cs for r in replies], torque)


def tick_byte_times(axis: int, use_checksum: bool, status: bool) -> int:
    """Byte times one tick holds the link (full duplex, requests pipelined as the driver sends
    them): the requests go out back to back; each reply starts once its request has arrived and
    the previous reply has ended; the torque command follows the last reply. Drive processing
    time is taken as zero here — LINK_MARGIN covers it."""
    requests, replies, torque = tick_lines(axis, use_checksum, status)
    sent = done = 0
    for req, rep in zip(requests, replies):
        sent += req
        done = max(sent, done) + rep
    return done + torque


def max_rate_for_baud(baudrate: int, axis: int = 0, use_checksum: bool = False,
                      status: bool = True) -> float:
    """Highest loop rate [Hz] whose worst-case tick fits the UART (10 bits/byte) with LINK_MARGIN
    of each period to spare."""
    seconds = tick_byte_times(axis, use_checksum, status) * BITS_PER_BYTE / baudrate
    return (1.0 - LINK_MARGIN) / seconds


def rate_refusal(rate_hz: float, baudrate: int, axis: int, use_checksum: bool, status: bool) -> str | None:
    """The one-line reason a loop rate cannot run on this link, or None if it can."""
    limit = max_rate_for_baud(baudrate, axis, use_checksum, status)
    if rate_hz <= limit:
        return None
    return (f"{rate_hz:g} Hz is above what odrive_ascii holds at {baudrate} baud: at most "
            f"{limit:.1f} Hz ({tick_byte_times(axis, use_checksum, status)} byte times per tick "
            f"at {BITS_PER_BYTE} bits/byte, {LINK_MARGIN:.0%} margin)")


def _parse_iq(text: str) -> float:
    return parse_float(text, "Iq_measured", fixed=True)


def _parse_state(text: str) -> int:
    return parse_int(text, "current_state")


def _parse_bool(text: str, what: str) -> int:
    """A bool property as 1/0 (the firmware prints ints; ``True``/``False`` taken as well)."""
    if text in ("True", "true"):
        return 1
    if text in ("False", "false"):
        return 0
    return parse_int(text, what)


def _parse_error(text: str) -> int:
    return parse_int(text, "axis error")


class ODriveAsciiBackend(Backend):
    """One ODrive axis in torque control over the ASCII protocol."""

    name = "odrive_ascii"

    def __init__(self, clock: Clock, *, port: str | serial.Serial, baudrate: int = 115200,
                 axis: int = 0, timeout_s: float = 0.002, use_checksum: bool = False,
                 status_every_ticks: int = 10, rate_hz: float | None = None,
                 watchdog_timeout_s: float = math.inf, state_timeout_s: float = 0.5,
                 allow_unprotected: bool = False,
                 link_time: Callable[[], float] = time.monotonic) -> None:
        """``port``: device path, or an open ``serial.Serial`` (the caller keeps ownership);
        ``timeout_s``: longest wait for the replies of one tick [s]; ``status_every_ticks``: poll
        ``current_state`` every n ticks (0 = never); ``rate_hz``: the loop rate, refused in
        ``open()`` if the link cannot hold it; ``watchdog_timeout_s``: written to the drive and
        enabled in ``enable()`` and read back (inf = leave the drive's setting alone; it must then
        read back enabled) [s]; ``state_timeout_s``: bound for the firmware query at open and for
        a disable to be confirmed by ``current_state`` [s]; ``allow_unprotected``: enable even
        when the watchdog is not confirmed (warned at every enable)."""
        super().__init__()
        if min(timeout_s, watchdog_timeout_s, baudrate, state_timeout_s) <= 0:
            raise BackendError(f"{self.name}: timeout_s, watchdog_timeout_s, baudrate must be > 0")
        if status_every_ticks < 0:
            raise BackendError(f"{self.name}: status_every_ticks must be >= 0")
        self.clock = clock
        self.port = port
        self.baudrate = baudrate
        self.axis = axis
        self.timeout_s = timeout_s
        self.use_checksum = use_checksum
        self.status_every_ticks = status_every_ticks
        self.rate_hz = rate_hz
        self.watchdog_timeout_s = watchdog_timeout_s
        self.state_timeout_s = state_timeout_s
        self.allow_unprotected = allow_unprotected
        self.firmware: FirmwareVersion | None = None  # read at open
        self.unprotected = ""  # why the drive watchdog is not confirmed ("" = it is)
        self._watchdog_read_back = False  # confirmed at the last enable
        self._closed_loop_requested = False  # since the last confirmed IDLE
        self._link_time = link_time
        self._ser: serial.Serial | None = None
        self._rx = b""
        self.rejected_lines = 0
        self.last_rejected = ""
        self._reset_samples()

    @classmethod
    def from_config(cls, cfg, clock: Clock, port: str | serial.Serial | None = None) -> "ODriveAsciiBackend":
        """Build from ``cfg.drive`` (port, baudrate, axis, timeout_s, watchdog_timeout_s,
        checksum) and ``cfg.loop.rate_hz``; ``port`` overrides ``cfg.drive.port``. Refuses
        (ConfigError) a loop rate the link cannot hold and a period the drive watchdog cannot
        survive."""
        from controller.schema import ConfigError

        d = cfg.drive
        use_checksum = d.checksum
        status_every = d.status_every_ticks
        reason = rate_refusal(cfg.loop.rate_hz, d.baudrate, d.axis, use_checksum, status_every > 0)
        if reason:
            raise ConfigError("loop.rate_hz", reason)
        if math.isfinite(d.watchdog_timeout_s) and cfg.loop.dt_s >= d.watchdog_timeout_s:
            raise ConfigError("drive.watchdog_timeout_s",
                              f"{d.watchdog_timeout_s:g} s is not longer than the loop period "
                              f"{cfg.loop.dt_s:g} s: the drive watchdog would expire between ticks")
        port = d.port if port is None else port
        if not port:
            raise ConfigError("drive.port", "required for odrive_ascii (e.g. /dev/ttyACM0)")
        return cls(clock, port=port, baudrate=d.baudrate, axis=d.axis, timeout_s=d.timeout_s,
                   use_checksum=use_checksum, status_every_ticks=status_every,
                   rate_hz=cfg.loop.rate_hz, watchdog_timeout_s=d.watchdog_timeout_s,
                   state_timeout_s=d.state_timeout_s, allow_unprotected=d.allow_unprotected)

    def max_rate_hz(self) -> float:
        return max_rate_for_baud(self.baudrate, self.axis, self.use_checksum,
                                 self.status_every_ticks > 0)

    def _reset_samples(self) -> None:
        self._pos_turns = NAN
        self._vel_turns_s = NAN
        self._iq_a = NAN
        self._sample_at = NAN  # loop-clock time of the last good ``f`` reply [s]
        self._sequence = 0
        self._axis_state: int | None = None
        self._axis_error = 0
        self._tick = 0

    # --- hooks -----------------------------------------------------------------------------------
    def identity(self) -> dict[str, str]:
        """Protocol, axis, firmware (read at open) and the watchdog read back at enable."""
        out = {"protocol": self.name, "axis": str(self.axis),
               "firmware": str(self.firmware) if self.firmware else "not read"}
        if self.unprotected:
            out["protection"] = f"none ({self.unprotected})"
        elif self._watchdog_read_back:
            timeout = (f"{self.watchdog_timeout_s:g} s" if math.isfinite(self.watchdog_timeout_s)
                       else "as set with odrivetool")
            out["protection"] = f"axis watchdog, {timeout}, read back enabled"
        return out

    def _open(self) -> None:
        if self.rate_hz is not None:
            reason = rate_refusal(self.rate_hz, self.baudrate, self.axis, self.use_checksum,
                                  self.status_every_ticks > 0)
            if reason:
                raise BackendError(f"{self.name}: {reason}")
        if isinstance(self.port, str):
            try:
                self._ser = serial.Serial(self.port, self.baudrate, timeout=0,
                                          write_timeout=self.state_timeout_s, exclusive=True)
            except (serial.SerialException, OSError, ValueError) as err:
                raise CommunicationError(f"{self.name}: cannot open {self.port}: {err}") from err
        else:
            self._ser = self.port
        self._rx = b""
        self._reset_samples()
        try:
            self._check_firmware()
        except BaseException:
            self._close()
            raise

    def _check_firmware(self) -> None:
        """``r fw_version_major`` / ``_minor`` / ``_revision``: the drive answers at all (first
        contact), and speaks the ASCII protocol of the firmware line this driver knows."""
        deadline = self._link_time() + self.state_timeout_s
        self._discard_pending()
        parts = [self._query_int(cmd_read(f"fw_version_{part}"), deadline, f"fw_version_{part}",
                                 CommunicationError)
                 for part in ("major", "minor", "revision")]
        self.firmware = FirmwareVersion(parts[0], parts[1], parts[2])
        log.info("%s: firmware %s on %s", self.name, self.firmware, self._port_name())
        refusal = firmware_refusal(self.firmware, "ASCII",
                                   why="0.6 renamed properties and moved error codes")
        if refusal:
            raise BackendError(f"{self.name}: {self._port_name()}: {refusal}")

    def _close(self) -> None:
        ser, self._ser = self._ser, None
        if ser is not None and ser is not self.port:
            ser.close()

    def _enable(self, timeout_s: float) -> None:
        a = self.axis
        deadline = self._link_time() + timeout_s
        self._discard_pending()
        error = self._query_int(cmd_read(prop_axis_error(a)), deadline, "axis error")
        if error:
            raise EnableError(f"{self.name}: axis {a} reports error 0x{error:X}: "
                              f"{axis_error_text(error)}; fix the cause, then reset_fault()")
        self.unprotected = self._configure_watchdog(deadline)
        self._watchdog_read_back = not self.unprotected
        if self.unprotected:
            refuse_or_warn_unprotected(f"{self.name}: axis {a}", self.unprotected,
                                       self.allow_unprotected, "a dead loop would leave it applying current")
        setup = [cmd_write(prop_input_mode(a), int(InputMode.PASSTHROUGH)),
                 cmd_torque(a, 0.0),  # torque mode, zero torque: never resume an old command
                 cmd_write(prop_requested_state(a), int(AxisState.CLOSED_LOOP_CONTROL))]
        self._closed_loop_requested = True
        self._send(setup)
        try:
            self._await_closed_loop(deadline, timeout_s)
        except BaseException:
            self._send_quietly([cmd_write(prop_requested_state(a), int(AxisState.IDLE))])
            raise
        self._axis_state = AxisState.CLOSED_LOOP_CONTROL
        self._axis_error = 0
        self._tick = 0

    def _configure_watchdog(self, deadline: float) -> str:
        """Write ``config.watchdog_timeout`` and ``enable_watchdog`` (finite ``watchdog_timeout_s``)
        and read both back; "" when the drive's watchdog is confirmed on with the timeout
        intended (or, for inf, on with whatever timeout the drive has), else why not."""
        a = self.axis
        self._discard_pending()
        if math.isfinite(self.watchdog_timeout_s):
            self._send([cmd_write(prop_watchdog_timeout(a), float(self.watchdog_timeout_s)),
                        cmd_write(prop_enable_watchdog(a), 1)])
        try:
            timeout = parse_float(self._reply_to(cmd_read(prop_watchdog_timeout(a)), deadline),
                                  "watchdog_timeout", fixed=True)
            enabled = _parse_bool(self._reply_to(cmd_read(prop_enable_watchdog(a)), deadline),
                                  "enable_watchdog")
        except ProtocolError as err:
            self._drain_until_quiet(deadline)  # the other refusals' lines, so none is taken later
            return f"the drive watchdog could not be configured and read back ({err})"
        if enabled != 1:
            return (f"{prop_enable_watchdog(a)} reads back {enabled}"
                    + ("" if math.isfinite(self.watchdog_timeout_s) else
                       " and drive.watchdog_timeout_s is .inf (left to the drive)"))
        if math.isfinite(self.watchdog_timeout_s):
            if abs(timeout - round(self.watchdog_timeout_s, 6)) > 2e-6:
                return (f"{prop_watchdog_timeout(a)} reads back {timeout:g} s after writing "
                        f"{self.watchdog_timeout_s:g} s")
        elif not timeout > 0:
            return f"{prop_watchdog_timeout(a)} reads back {timeout:g} s"
        return ""

    def _drain_until_quiet(self, deadline: float) -> None:
        """Read and drop lines until none arrives for max(timeout_s, 50 ms), or the deadline."""
        quiet = max(self.timeout_s, 0.05)
        while self._readline(min(deadline, self._link_time() + quiet)) is not None:
            pass

    def _reply_to(self, command: str, deadline: float) -> str:
        """The first reply line after sending ``command`` (an error text from an earlier write
        that was refused comes first, and is what is returned: it does not parse as a value)."""
        self._send([command])
        line = self._readline(deadline)
        if line is None:
            raise ProtocolError(f"no reply to {command!r}")
        return decode_reply(line, self.use_checksum)

    def _await_closed_loop(self, deadline: float, timeout_s: float) -> None:
        """Poll ``current_state`` until CLOSED_LOOP_CONTROL. The first reply after the setup
        writes is read without discarding anything, so a refusal of one of them surfaces here."""
        a = self.axis
        feed = [cmd_feed_watchdog(a)] if math.isfinite(self.watchdog_timeout_s) else []
        first = True
        while True:
            if not first:
                self._discard_pending()
            if feed:
                self._send(feed)
            state = self._query_int(cmd_read(prop_current_state(a)), deadline, "current state")
            first = False
            if state == AxisState.CLOSED_LOOP_CONTROL:
                return
            if state == AxisState.IDLE:
                error = self._query_int(cmd_read(prop_axis_error(a)), deadline, "axis error")
                if error:
                    raise EnableError(f"{self.name}: axis {a} faulted while enabling: error "
                                      f"0x{error:X}: {axis_error_text(error)}")
            if self._link_time() >= deadline:
                raise EnableError(f"{self.name}: axis {a} did not reach CLOSED_LOOP_CONTROL within "
                                  f"{timeout_s:g} s (last state {state})")

    def _query_int(self, command: str, deadline: float, what: str,
                   error: type[BackendError] = EnableError) -> int:
        """One request/reply; no reply or a refusal raises ``error`` (EnableError by default)."""
        self._send([command])
        line = self._readline(deadline)
        if line is None:
            raise error(f"{self.name}: no reply to {command!r} on {self._port_name()} "
                        f"(drive connected? ASCII protocol on this port? baud rate {self.baudrate}?)")
        try:
            return parse_int(decode_reply(line, self.use_checksum), what)
        except ProtocolError as err:
            raise error(f"{self.name}: {command!r}: {err}") from err

    def _disable(self) -> None:
        if self._ser is None:
            return
        self._send([cmd_write(prop_requested_state(self.axis), int(AxisState.IDLE))])
        self._axis_state = None
        if self._closed_loop_requested:
            self._confirm_idle()  # raises when not confirmed: the watchdog then stays armed
        if math.isfinite(self.watchdog_timeout_s) and not self.unprotected:
            # the inverse of enable() (it switched the watchdog on), once IDLE needs no feeding
            self._send([cmd_write(prop_enable_watchdog(self.axis), 0)])

    def _confirm_idle(self) -> None:
        """Poll ``current_state`` until IDLE within ``state_timeout_s``; else CommunicationError
        (the base class keeps ``enabled`` True: not confirmed)."""
        a = self.axis
        deadline = self._link_time() + self.state_timeout_s
        last = "no reply"
        while self._link_time() < deadline:
            self._discard_pending()
            self._send([cmd_read(prop_current_state(a))])
            line = self._readline(deadline)
            if line is None:
                break
            state = self._parse(line, _parse_state)
            if state is None:
                continue
            self._axis_state = state
            if state == AxisState.IDLE:
                self._closed_loop_requested = False
                return
            last = f"state {state}"
        raise CommunicationError(f"{self.name}: axis {a}: disable not confirmed within "
                                 f"{self.state_timeout_s:g} s (last: {last})")

    def _reset_fault(self) -> None:
        self._send([CMD_CLEAR_ERRORS])
        self._axis_error = 0

    def _write(self, torque_nm: float) -> None:
        self._send([cmd_torque(self.axis, torque_nm)])

    def _read(self) -> Feedback:
        a = self.axis
        self._discard_pending()
        status = self.status_every_ticks > 0 and self._tick % self.status_every_ticks == 0
        self._tick += 1
        commands = [cmd_feedback(a), cmd_read(prop_iq_measured(a))]
        if status:
            commands.append(cmd_read(prop_current_state(a)))
        deadline = self._link_time() + self.timeout_s  # the write (which hardly blocks) included
        self._send(commands)
        parsers: tuple[Callable[[str], object], ...] = (parse_feedback, _parse_iq, _parse_state)
        f, iq, state = self._replies(parsers[:len(commands)], deadline)
        if f is not None:
            self._pos_turns, self._vel_turns_s = f
            self._sample_at = self.clock.now()
            self._sequence += 1
        if iq is not None:
            self._iq_a = iq
        if state is not None:
            self._axis_state = state
            if state != AxisState.CLOSED_LOOP_CONTROL and self.enabled:
                self._poll_error()
        return self._sample()

    def _replies(self, slots: Sequence[Callable[[str], object]], deadline: float) -> list:
        """The replies in request order, one per slot (None where missing). A line that does not
        parse for the slot it would fill — noise, a late reply of an earlier tick — is rejected
        and skipped: the reply shapes differ, so no line can fill the wrong slot."""
        values: list = [None, None, None]
        for i, parse in enumerate(slots):
            while values[i] is None:
                line = self._readline(deadline)
                if line is None:
                    return values
                values[i] = self._parse(line, parse)
        return values

    def _poll_error(self) -> None:
        """Fault path (the axis left closed loop): read ``axis.error``, bounded by timeout_s."""
        self._send([cmd_read(prop_axis_error(self.axis))])
        line = self._readline(self._link_time() + self.timeout_s)
        code = self._parse(line, _parse_error) if line is not None else None
        if code is not None:
            self._axis_error = code

    # --- the sample --------------------------------------------------------------------------------
    def _sample(self) -> Feedback:
        now = self.clock.now()
        state, code, text = self._state()
        return Feedback(
            t_s=now,
            position_rad=self._pos_turns * TWO_PI,
            velocity_rad_s=self._vel_turns_s * TWO_PI,
            current_a=self._iq_a,
            torque_nm=NAN,
            state=state,
            fault_code=code,
            fault_text=text,
            sequence=self._sequence,
            age_s=now - self._sample_at if self._sequence else math.inf,
        )

    def _state(self) -> tuple[DriveState, int, str]:
        if self._axis_error:
            return DriveState.FAULT, self._axis_error, axis_error_text(self._axis_error)
        st = self._axis_state
        if st is None:
            return (DriveState.ENABLED if self.enabled else DriveState.DISABLED), 0, ""
        if st == AxisState.CLOSED_LOOP_CONTROL:
            return DriveState.ENABLED, 0, ""
        if self.enabled:
            try:
                name = AxisState(st).name
            except ValueError:
                name = str(st)
            return DriveState.FAULT, 0, f"axis state {name} while enabled (expected CLOSED_LOOP_CONTROL)"
        if st in (AxisState.IDLE, AxisState.UNDEFINED):
            return DriveState.DISABLED, 0, ""
        return DriveState.ENABLING, 0, ""

    # --- lines -------------------------------------------------------------------------------------
    def _parse(self, line: bytes, parse: Callable[[str], object]):
        try:
            return parse(decode_reply(line, self.use_checksum))
        except ProtocolError as err:
            self._reject(str(err))
            return None

    def _reject(self, reason: str) -> None:
        self.rejected_lines += 1
        self.last_rejected = reason
        log.debug("%s: rejected: %s", self.name, reason)

    def _discard_pending(self) -> None:
        """Drop bytes that arrived outside an exchange (late replies, noise), counting the lines."""
        data = self._rx + self._read_available(0.0)
        self._rx = b""
        if data:
            lines = data.count(b"\n") + (0 if data.endswith(b"\n") else 1)
            for _ in range(lines):
                self._reject(f"discarded out-of-turn bytes {data[:40]!r}")

    def _readline(self, deadline: float) -> bytes | None:
        """One ``\\n``-terminated line, or None at the link-time deadline (partial bytes kept)."""
        while True:
            end = self._rx.find(b"\n")
            if end >= 0:
                line, self._rx = self._rx[:end + 1], self._rx[end + 1:]
                return line
            if len(self._rx) > MAX_LINE_BYTES:
                self._reject(f"overlong line {self._rx[:40]!r}...")
                self._rx = b""
            remaining = deadline - self._link_time()
            if remaining <= 0:
                return None
            self._rx += self._read_available(remaining)

    def _read_available(self, timeout_s: float) -> bytes:
        ser = self._require_port()
        try:
            ready, _, _ = select.select([ser.fileno()], [], [], max(0.0, timeout_s))
            if not ready:
                return b""
            return ser.read(max(1, ser.in_waiting))
        except (serial.SerialException, OSError, ValueError) as err:
            raise CommunicationError(f"{self.name}: read from {self._port_name()} failed: {err}") from err

    def _send(self, commands: list[str]) -> None:
        ser = self._require_port()
        data = b"".join(encode_line(c, self.use_checksum) for c in commands)
        try:
            ser.write(data)
        except (serial.SerialException, OSError, ValueError) as err:
            raise CommunicationError(f"{self.name}: write to {self._port_name()} failed: {err}") from err

    def _send_quietly(self, commands: list[str]) -> None:
        try:
            self._send(commands)
        except CommunicationError as err:
            log.error("%s: %s", self.name, err)

    def _require_port(self) -> serial.Serial:
        if self._ser is None:
            raise CommunicationError(f"{self.name}: port not open")
        return self._ser

    def _port_name(self) -> str:
        return self.port if isinstance(self.port, str) else getattr(self.port, "port", "<port>")
