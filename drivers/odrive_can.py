"""ODrive over CAN Simple (firmware 0.5.6): the torque-mode backend.

One receive path: the tick polls ``bus.recv`` (no Notifier thread). Per tick:

``read()``  drain the frames received since the last tick (heartbeat, late replies, error frames);
            then either request Get_Encoder_Estimates and Get_Iq (RTR, or DLC 0) and wait for
            both replies, or — with ``cyclic_feedback`` (the drive sends them at the loop rate,
            ``axis.config.can.encoder_rate_ms``/``iq_rate_ms``) — wait for the next ones; never
            longer than ``timeout_s``. ``sequence`` counts encoder frames received: unchanged
            means no new position (stale). Position/velocity turns → rad; current = Iq_measured;
            torque estimate NaN (0.5.6 does not report it); temperature NaN.
``write()`` Set_Input_Torque.

``open()`` sends Get_Version (0x00): firmware 0.6+ answers, and a version other than 0.5.x
latches a fault and refuses enable (0.5.6 has no Get_Version and stays silent: ``firmware`` None).
``enable()`` needs a fresh heartbeat without axis error; the first enable after ``open`` checks
the drive watchdog (below); then Set_Controller_Mode (torque, passthrough), Set_Input_Torque(0)
and Set_Axis_State(CLOSED_LOOP_CONTROL), and it returns once a later heartbeat reports
CLOSED_LOOP_CONTROL (else EnableError, and IDLE is requested). ``disable()`` sends
Set_Axis_State(IDLE) and returns once a later heartbeat reports IDLE, within ``state_timeout_s``
(else CommunicationError: not confirmed); ``reset_fault()`` Clear_Errors.

Nothing is sent in the background: only the caller's read/write/enable/disable talk to the
drive. Every frame addressed to the axis feeds the drive watchdog, so a dead loop must not keep
the drive alive. CAN Simple 0.5.6 can neither set nor read ``axis.config.watchdog_timeout`` /
``enable_watchdog`` (configure them with odrivetool; ``watchdog_timeout_s`` tells the driver what
they are), so the watchdog is checked by timing: CLOSED_LOOP_CONTROL at zero torque, nothing
sent, until a heartbeat reports WATCHDOG_TIMER_EXPIRED within ``watchdog_timeout_s`` +
``state_timeout_s``; then Clear_Errors. Without that (or with ``watchdog_timeout_s`` inf) enable
is refused unless ``allow_unprotected`` (then warned at every enable).

Resolution: position is a float32 in turns — 2^-24 turn (one count of a 24-bit encoder) within
±1 turn, 128 counts at 100 turns.

State: from the heartbeat. Axis error (or a sub-component error flag) → FAULT with the code and
the decoded text; a state other than CLOSED_LOOP_CONTROL while enabled → FAULT; no heartbeat for
``heartbeat_timeout_s`` (wall time) → FAULT. Error frames on the bus are counted
(``error_frames``) and logged; they do not fault the backend by themselves, except bus-off
(the controller has left the bus: nothing is sent or received any more) → FAULT, latched
until the backend is reopened.
"""

from __future__ import annotations

import logging
import math
import time
from typing import Callable

import can

from .backend import Backend, Clock, DriveState, Feedback, refuse_or_warn_unprotected
from .cia402_protocol import CAN_ERR_BUSOFF, describe_error_frame  # SocketCAN error classes
from .errors import BackendError, CommunicationError, EnableError, ProtocolError
from .odrive_codec import (MAX_NODE_ID, AxisError, AxisState, Cmd, ControlMode, EncoderEstimates,
                           FirmwareVersion, Frame, Heartbeat, InputMode, Iq, decode_encoder_estimates,
                           decode_heartbeat, decode_iq, decode_version, encode_clear_errors,
                           encode_request, encode_set_axis_state, encode_set_controller_mode,
                           encode_set_input_torque, firmware_refusal)

log = logging.getLogger(__name__)

TWO_PI = 2.0 * math.pi
NAN = math.nan
LINK_MARGIN = 0.2  # fraction of each period kept free on the link (drive latency, jitter)
_DRAIN_MAX = 1000  # frames handled per drain, so a flooded bus cannot stall the tick


def can_frame_bits(data_bytes: int) -> int:
    """Worst-case bits of a classic CAN frame with an 11-bit id, bit stuffing and the 3-bit
    interframe space included: 34 + 8n stuffable bits, one stuff bit per 4, plus 13 fixed."""
    stuffable = 34 + 8 * data_bytes
    return stuffable + (stuffable - 1) // 4 + 13


def tick_bits(cyclic_feedback: bool) -> int:
    """Bits on the bus per tick: two requests (DLC 0) unless cyclic, two 8-byte replies, one
    8-byte torque command."""
    requests = 0 if cyclic_feedback else 2 * can_frame_bits(0)
    return requests + 3 * can_frame_bits(8)


def max_rate_for_bitrate(bitrate: int, cyclic_feedback: bool) -> float:
    """Highest loop rate [Hz] that keeps LINK_MARGIN of the bus free."""
    return (1.0 - LINK_MARGIN) * bitrate / tick_bits(cyclic_feedback)


def _to_message(frame: Frame) -> can.Message:
    return can.Message(arbitration_id=frame.arbitration_id, data=frame.data, dlc=len(frame.data),
                       is_remote_frame=frame.rtr, is_extended_id=False)


class ODriveCanBackend(Backend):
    """One ODrive axis (node id) in torque control over CAN Simple 0.5.6."""

    name = "odrive_can"

    def __init__(self, clock: Clock, *, node_id: int, interface: str = "socketcan",
                 channel: str = "can0", bitrate: int = 250_000, timeout_s: float = 0.002,
                 heartbeat_timeout_s: float = 0.5, watchdog_timeout_s: float = math.inf,
                 cyclic_feedback: bool = False, rtr_requests: bool = True,
                 state_timeout_s: float = 0.5, allow_unprotected: bool = False,
                 bus: can.BusABC | None = None,
                 link_time: Callable[[], float] = time.monotonic) -> None:
        """``timeout_s``: longest wait for replies per tick [s]; ``heartbeat_timeout_s``: heartbeat
        age that counts as lost [s]; ``watchdog_timeout_s``: the drive's configured watchdog [s]
        (inf = disabled), used to keep it fed while ``enable()`` waits and to check it (below);
        ``state_timeout_s``: bound for a state the drive must report (disable confirmed, the
        watchdog check) beyond the heartbeat period [s]; ``allow_unprotected``: enable even when
        the watchdog check fails (warned at every enable); ``bus``: an open bus to
        use instead of creating one (the caller keeps ownership); ``link_time``: monotonic wall
        time [s] for link timeouts. ``clock`` stamps the samples (``t_s``, ``age_s``)."""
        super().__init__()
        if not 0 <= node_id <= MAX_NODE_ID:
            raise BackendError(f"{self.name}: node_id {node_id} out of range 0..{MAX_NODE_ID}")
        if min(timeout_s, heartbeat_timeout_s, watchdog_timeout_s, state_timeout_s) <= 0:
            raise BackendError(f"{self.name}: timeouts must be > 0")
        self.clock = clock
        self.node_id = node_id
        self.interface = interface
        self.channel = channel
        self.bitrate = bitrate
        self.timeout_s = timeout_s
        self.heartbeat_timeout_s = heartbeat_timeout_s
        self.watchdog_timeout_s = watchdog_timeout_s
        self.cyclic_feedback = cyclic_feedback
        self.rtr_requests = rtr_requests
        self.state_timeout_s = state_timeout_s
        self.allow_unprotected = allow_unprotected
        self._injected_bus = bus
        self._bus: can.BusABC | None = None
        self._link_time = link_time
        self._reset_link_state()

    @classmethod
    def from_config(cls, cfg, clock: Clock, bus: can.BusABC | None = None) -> "ODriveCanBackend":
        """Build from ``cfg.drive`` (interface, channel, bitrate, node_id, timeout_s,
        heartbeat_timeout_s, watchdog_timeout_s, cyclic_feedback). Refuses (ConfigError) a loop
        period the drive watchdog cannot survive and a rate the bus cannot carry."""
        from controller.schema import ConfigError

        d = cfg.drive
        cyclic = d.cyclic_feedback
        if not 0 <= d.node_id <= MAX_NODE_ID:
            raise ConfigError("drive.node_id", f"{d.node_id} out of range for ODrive CAN Simple "
                                               f"(0..{MAX_NODE_ID})")
        period = cfg.loop.dt_s
        if math.isfinite(d.watchdog_timeout_s) and period >= d.watchdog_timeout_s:
            raise ConfigError("drive.watchdog_timeout_s",
                              f"{d.watchdog_timeout_s:g} s is not longer than the loop period "
                              f"{period:g} s: the drive watchdog would expire between ticks")
        if d.interface != "virtual":
            limit = max_rate_for_bitrate(d.bitrate, cyclic)
            if cfg.loop.rate_hz > limit:
                raise ConfigError("loop.rate_hz",
                                  f"{cfg.loop.rate_hz:g} Hz is above what odrive_can holds at "
                                  f"drive.bitrate {d.bitrate}: at most {limit:.0f} Hz "
                                  f"({tick_bits(cyclic)} bits per tick, "
                                  f"{LINK_MARGIN:.0%} of the bus kept free)")
        return cls(clock, node_id=d.node_id, interface=d.interface, channel=d.channel,
                   bitrate=d.bitrate, timeout_s=d.timeout_s,
                   heartbeat_timeout_s=d.heartbeat_timeout_s,
                   watchdog_timeout_s=d.watchdog_timeout_s, cyclic_feedback=cyclic,
                   state_timeout_s=d.state_timeout_s, allow_unprotected=d.allow_unprotected, bus=bus)

    def max_rate_hz(self) -> float:
        if self.interface == "virtual":
            return math.inf
        return max_rate_for_bitrate(self.bitrate, self.cyclic_feedback)

    # --- state kept between ticks --------------------------------------------------------------
    def _reset_link_state(self) -> None:
        self._heartbeat: Heartbeat | None = None
        self._heartbeat_at = -math.inf  # link time of the last heartbeat [s]
        self._heartbeat_seq = 0
        self._encoder: EncoderEstimates | None = None
        self._encoder_at = NAN  # loop-clock time the last encoder frame was received [s]
        self._encoder_seq = 0
        self._iq: Iq | None = None
        self._iq_seq = 0
        self._read_encoder_seq = 0  # encoder frames seen at the previous read
        self._read_iq_seq = 0
        self._opened_at = self._link_time()
        self.error_frames = 0
        self.rejected_frames = 0
        self.bus_off = False
        self.firmware: FirmwareVersion | None = None  # from Get_Version (0.6+); None: not reported
        self._firmware_refusal = ""
        self.watchdog_confirmed_s = NAN  # silence after which the drive watchdog was seen expired [s]
        self.unprotected = ""  # why the drive watchdog is not confirmed ("" = it is, or unchecked)
        self._closed_loop_requested = False  # since the last confirmed IDLE

    @property
    def last_heartbeat(self) -> Heartbeat | None:
        return self._heartbeat

    # --- hooks -----------------------------------------------------------------------------------
    def identity(self) -> dict[str, str]:
        """Protocol, node, firmware (0.5.6 has no Get_Version: not reported) and the watchdog
        check's outcome (after the first enable)."""
        out = {"protocol": self.name, "node_id": str(self.node_id),
               "firmware": str(self.firmware) if self.firmware else "not reported (0.5.x)"}
        if self.unprotected:
            out["protection"] = f"none ({self.unprotected})"
        elif self.watchdog_confirmed_s == self.watchdog_confirmed_s:
            out["protection"] = (f"axis watchdog, seen expired after {self.watchdog_confirmed_s:.3f} s "
                                 f"of silence at enable")
        return out

    def _open(self) -> None:
        if self._injected_bus is not None:
            self._bus = self._injected_bus
        else:
            try:
                self._bus = can.Bus(interface=self.interface, channel=self.channel,
                                    bitrate=self.bitrate)
            except (can.CanError, OSError, ValueError) as err:
                raise CommunicationError(f"{self.name}: cannot open {self.interface} channel "
                                         f"{self.channel!r}: {err}") from err
        self._reset_link_state()
        # firmware 0.6+ answers (checked when it arrives); 0.5.6 has no Get_Version and is silent
        self._send(encode_request(self.node_id, Cmd.GET_VERSION, rtr=True))

    def _close(self) -> None:
        bus, self._bus = self._bus, None
        if bus is not None and bus is not self._injected_bus:
            bus.shutdown()

    def _enable(self, timeout_s: float) -> None:
        self._drain()
        if not self._heartbeat_fresh():
            self._wait_until(self._heartbeat_fresh, self._link_time() + self.heartbeat_timeout_s)
        if not self._heartbeat_fresh():
            raise EnableError(f"{self.name}: no heartbeat from node {self.node_id} on "
                              f"{self.interface} {self.channel!r} within {self.heartbeat_timeout_s:g} s "
                              f"(drive powered? node id, bitrate {self.bitrate}?)")
        if self._firmware_refusal:
            raise EnableError(f"{self.name}: node {self.node_id}: {self._firmware_refusal}")
        hb = self._heartbeat
        assert hb is not None
        if hb.axis_error:
            raise EnableError(f"{self.name}: node {self.node_id} reports axis error "
                              f"0x{hb.axis_error:X}: {hb.fault_text()}; fix the cause, then reset_fault()")
        if not self.unprotected and math.isnan(self.watchdog_confirmed_s):
            self._check_watchdog()
        if self.unprotected:
            refuse_or_warn_unprotected(f"{self.name}: node {self.node_id}", self.unprotected,
                                       self.allow_unprotected, "a dead loop would leave it applying current")
        seq0 = self._request_closed_loop()
        try:
            self._await_closed_loop(seq0, self._link_time() + timeout_s, timeout_s)
        except BaseException:
            self._send_quietly(encode_set_axis_state(self.node_id, AxisState.IDLE))
            raise

    def _request_closed_loop(self) -> int:
        """Torque mode, passthrough, zero torque (never resume an old one), CLOSED_LOOP_CONTROL;
        returns the heartbeat count before the request."""
        self._send(encode_set_controller_mode(self.node_id, ControlMode.TORQUE_CONTROL,
                                              InputMode.PASSTHROUGH))
        self._send(encode_set_input_torque(self.node_id, 0.0))
        seq0 = self._heartbeat_seq
        self._closed_loop_requested = True
        self._send(encode_set_axis_state(self.node_id, AxisState.CLOSED_LOOP_CONTROL))
        return seq0

    def _check_watchdog(self) -> None:
        """CAN Simple 0.5.6 can neither set nor read ``axis.config.watchdog_timeout`` /
        ``enable_watchdog``: the check is timed instead. CLOSED_LOOP_CONTROL at zero torque,
        then nothing sent; a heartbeat must report WATCHDOG_TIMER_EXPIRED (and IDLE) within
        ``watchdog_timeout_s`` + ``state_timeout_s``; then Clear_Errors. Otherwise ``unprotected``
        says why (and the axis is put back to IDLE)."""
        if not math.isfinite(self.watchdog_timeout_s):
            self.unprotected = ("drive.watchdog_timeout_s is .inf: the drive watchdog is not checked "
                                "(CAN Simple 0.5.6 cannot read it)")
            return
        seq0 = self._request_closed_loop()
        t0 = self._link_time()

        def expired() -> bool:
            hb = self._heartbeat
            return (self._heartbeat_seq > seq0 and hb is not None
                    and bool(hb.axis_error & AxisError.WATCHDOG_TIMER_EXPIRED))

        seen = self._wait_until(expired, t0 + self.watchdog_timeout_s + self.state_timeout_s)
        silence = self._link_time() - t0
        if not seen:
            self._send(encode_set_axis_state(self.node_id, AxisState.IDLE))
            self._confirm_idle()
            self.unprotected = (f"the drive watchdog did not expire within {silence:.3f} s of silence "
                                f"in CLOSED_LOOP_CONTROL (axis.config.enable_watchdog off, or "
                                f"watchdog_timeout above drive.watchdog_timeout_s "
                                f"{self.watchdog_timeout_s:g} s? set them with odrivetool)")
            return
        seq1 = self._heartbeat_seq
        self._send(encode_clear_errors(self.node_id))
        self._closed_loop_requested = False  # the watchdog has put it to IDLE
        if not self._wait_until(lambda: self._heartbeat_seq > seq1 and self._heartbeat is not None
                                and self._heartbeat.axis_error == 0,
                                self._link_time() + self.state_timeout_s):
            raise EnableError(f"{self.name}: node {self.node_id}: the watchdog check's error did "
                              f"not clear within {self.state_timeout_s:g} s")
        self.watchdog_confirmed_s = silence
        log.info("%s: node %d: drive watchdog confirmed (expired within %.3f s of silence)",
                 self.name, self.node_id, silence)

    def _await_closed_loop(self, seq0: int, deadline: float, timeout_s: float) -> None:
        """Wait for a heartbeat newer than ``seq0`` reporting CLOSED_LOOP_CONTROL. While waiting,
        keep a configured drive watchdog fed with Get_Bus_Voltage_Current requests (harmless
        telemetry that is not a feedback sample, so the number sent — wall-time dependent —
        leaves ``sequence`` and a lockstep run's log unchanged)."""
        feed_every = self.watchdog_timeout_s / 4.0
        next_feed = self._link_time() + feed_every
        while True:
            hb = self._heartbeat
            if self._heartbeat_seq > seq0 and hb is not None:
                if hb.axis_error:
                    raise EnableError(f"{self.name}: node {self.node_id} faulted while enabling: "
                                      f"axis error 0x{hb.axis_error:X}: {hb.fault_text()}")
                if hb.axis_state == AxisState.CLOSED_LOOP_CONTROL:
                    return
            now = self._link_time()
            if now >= deadline:
                state = hb.axis_state.name if hb is not None else "unknown"
                raise EnableError(f"{self.name}: node {self.node_id} did not reach "
                                  f"CLOSED_LOOP_CONTROL within {timeout_s:g} s (last state {state})")
            if now >= next_feed:  # a request whose reply is not a sample: `sequence` stays put
                self._send(encode_request(self.node_id, Cmd.GET_BUS_VOLTAGE_CURRENT, self.rtr_requests))
                next_feed = now + feed_every
            msg = self._recv(min(deadline, next_feed) - now)
            if msg is not None:
                self._handle(msg)

    def _disable(self) -> None:
        """Set_Axis_State(IDLE), confirmed by a later heartbeat reporting IDLE within
        ``state_timeout_s`` when closed loop was requested since the last confirmation; else
        CommunicationError (the base class then keeps ``enabled`` True: not confirmed)."""
        if self._bus is not None:
            self._send(encode_set_axis_state(self.node_id, AxisState.IDLE))
            self._confirm_idle()

    def _confirm_idle(self) -> None:
        if not self._closed_loop_requested:
            return
        seq0 = self._heartbeat_seq

        def idle() -> bool:
            hb = self._heartbeat
            return self._heartbeat_seq > seq0 and hb is not None and hb.axis_state == AxisState.IDLE

        if not self._wait_until(idle, self._link_time() + self.state_timeout_s):
            hb = self._heartbeat
            last = hb.axis_state.name if hb is not None and self._heartbeat_seq > seq0 else "no heartbeat"
            raise CommunicationError(f"{self.name}: node {self.node_id}: disable not confirmed within "
                                     f"{self.state_timeout_s:g} s (last: {last})")
        self._closed_loop_requested = False

    def _reset_fault(self) -> None:
        self._send(encode_clear_errors(self.node_id))

    def _write(self, torque_nm: float) -> None:
        self._send(encode_set_input_torque(self.node_id, torque_nm))

    def _read(self) -> Feedback:
        deadline = self._link_time() + self.timeout_s  # the whole read, sends included
        self._drain()
        if self.cyclic_feedback:
            enc0, iq0 = self._read_encoder_seq, self._read_iq_seq
        else:
            enc0, iq0 = self._encoder_seq, self._iq_seq
            for cmd in (Cmd.GET_ENCODER_ESTIMATES, Cmd.GET_IQ):
                self._send(encode_request(self.node_id, cmd, self.rtr_requests), deadline)
        self._wait_until(lambda: self._encoder_seq > enc0 and self._iq_seq > iq0, deadline)
        self._read_encoder_seq, self._read_iq_seq = self._encoder_seq, self._iq_seq
        return self._sample()

    # --- the sample --------------------------------------------------------------------------------
    def _sample(self) -> Feedback:
        now = self.clock.now()
        state, code, text = self._state()
        enc, iq = self._encoder, self._iq
        return Feedback(
            t_s=now,
            position_rad=enc.pos_turns * TWO_PI if enc else NAN,
            velocity_rad_s=enc.vel_turns_s * TWO_PI if enc else NAN,
            current_a=iq.measured_a if iq else NAN,
            torque_nm=NAN,
            state=state,
            fault_code=code,
            fault_text=text,
            sequence=self._encoder_seq,
            age_s=now - self._encoder_at if enc else math.inf,
        )

    def _heartbeat_fresh(self) -> bool:
        return self._link_time() - self._heartbeat_at <= self.heartbeat_timeout_s

    def _state(self) -> tuple[DriveState, int, str]:
        if self.bus_off:
            return DriveState.FAULT, 0, f"CAN bus off on {self.channel!r} (error frame)"
        if self._firmware_refusal:
            return DriveState.FAULT, 0, self._firmware_refusal
        hb = self._heartbeat
        if hb is None:
            waited = self._link_time() - self._opened_at
            if waited > self.heartbeat_timeout_s:
                return DriveState.FAULT, 0, f"no heartbeat from node {self.node_id} for {waited:.3f} s"
            return DriveState.DISABLED, 0, ""
        age = self._link_time() - self._heartbeat_at
        if age > self.heartbeat_timeout_s:
            return (DriveState.FAULT, hb.axis_error,
                    f"heartbeat lost: none for {age:.3f} s (timeout {self.heartbeat_timeout_s:g} s)")
        text = hb.fault_text()
        if text:
            return DriveState.FAULT, hb.axis_error, text
        closed = hb.axis_state == AxisState.CLOSED_LOOP_CONTROL
        if self.enabled and not closed:
            return (DriveState.FAULT, 0,
                    f"axis state {hb.axis_state.name} while enabled (expected CLOSED_LOOP_CONTROL)")
        if closed:
            return DriveState.ENABLED, 0, ""
        if hb.axis_state in (AxisState.IDLE, AxisState.UNDEFINED):
            return DriveState.DISABLED, 0, ""
        return DriveState.ENABLING, 0, ""

    # --- receive path ------------------------------------------------------------------------------
    def _recv(self, timeout_s: float) -> can.Message | None:
        if self._bus is None:
            raise CommunicationError(f"{self.name}: bus not open")
        try:
            return self._bus.recv(max(0.0, timeout_s))
        except can.CanError as err:
            raise CommunicationError(f"{self.name}: receive failed on {self.channel!r}: {err}") from err

    def _drain(self) -> None:
        for _ in range(_DRAIN_MAX):
            msg = self._recv(0.0)
            if msg is None:
                return
            self._handle(msg)

    def _wait_until(self, done: Callable[[], bool], deadline: float) -> bool:
        """Handle frames until ``done()`` or the link-time deadline; True if done."""
        while not done():
            remaining = deadline - self._link_time()
            if remaining <= 0:
                return False
            msg = self._recv(remaining)
            if msg is not None:
                self._handle(msg)
        return True

    def _handle(self, msg: can.Message) -> None:
        if msg.is_error_frame:
            self.error_frames += 1
            if msg.arbitration_id & CAN_ERR_BUSOFF:
                self.bus_off = True
            log.warning("%s: error frame on %s: %s (%d so far)", self.name, self.channel,
                        describe_error_frame(msg.arbitration_id), self.error_frames)
            return
        if msg.is_extended_id or msg.arbitration_id >> 5 != self.node_id:
            return
        frame = Frame(msg.arbitration_id, bytes(msg.data), msg.is_remote_frame)
        if frame.is_request:
            return  # another host's request, not data
        cmd = frame.cmd
        try:
            if cmd == Cmd.HEARTBEAT:
                self._heartbeat = decode_heartbeat(frame)
                self._heartbeat_at = self._link_time()
                self._heartbeat_seq += 1
            elif cmd == Cmd.GET_ENCODER_ESTIMATES:
                self._encoder = decode_encoder_estimates(frame)
                self._encoder_at = self.clock.now()
                self._encoder_seq += 1
            elif cmd == Cmd.GET_IQ:
                self._iq = decode_iq(frame)
                self._iq_seq += 1
            elif cmd == Cmd.GET_VERSION:
                # asked once at open: the first answer counts whenever it arrives (a loaded
                # link may deliver it after enable began; a refusal then latches the fault and
                # the loop stops); a later one while enabled is not ours. Garbage on this id is
                # refused by the decoder (its unreleased flag is not a bool)
                if self.firmware is not None and (self._closed_loop_requested or self.enabled):
                    self.rejected_frames += 1
                    log.warning("%s: Get_Version frame 0x%03X while enabled ignored", self.name,
                                msg.arbitration_id)
                else:
                    self._on_version(decode_version(frame))
        except ProtocolError as err:
            self.rejected_frames += 1
            log.warning("%s: %s", self.name, err)

    def _on_version(self, version: FirmwareVersion) -> None:
        """A Get_Version reply (firmware 0.6+): a firmware whose protocol this driver does not
        speak latches a fault (whenever the reply arrives) and refuses enable."""
        if self.firmware is None:
            log.info("%s: node %d: firmware %s", self.name, self.node_id, version)
        self.firmware = version
        refusal = firmware_refusal(version, "CAN Simple")
        if refusal and not self._firmware_refusal:
            self._firmware_refusal = refusal
            log.error("%s: node %d: %s", self.name, self.node_id, refusal)

    # --- send path ---------------------------------------------------------------------------------
    def _send(self, frame: Frame, deadline: float | None = None) -> None:
        """Send one frame; a full transmit queue is waited on until ``deadline`` (link time),
        or for timeout_s."""
        if self._bus is None:
            raise CommunicationError(f"{self.name}: bus not open")
        timeout = self.timeout_s if deadline is None else max(0.0, deadline - self._link_time())
        try:
            self._bus.send(_to_message(frame), timeout=timeout)
        except can.CanError as err:
            raise CommunicationError(f"{self.name}: send of frame 0x{frame.arbitration_id:03X} "
                                     f"failed: {err}") from err

    def _send_quietly(self, frame: Frame) -> None:
        try:
            self._send(frame)
        except CommunicationError as err:
            log.error("%s: %s", self.name, err)
