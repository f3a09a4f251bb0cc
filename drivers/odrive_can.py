"""ODrive over CAN Simple (firmware 0.5.x and 0.6.x): the torque-mode backend.

One receive path: the tick polls ``bus.recv`` (no Notifier thread). Per tick:

``read()``  drain the frames received since the last tick (heartbeat, late replies, error frames);
            then either request Get_Encoder_Estimates and Get_Iq (RTR, or DLC 0) and wait for
            both replies, or — with ``cyclic_feedback`` (the drive sends them at the loop rate,
            ``axis.config.can.encoder_rate_ms``/``iq_rate_ms``) — wait for the next ones; never
            longer than ``timeout_s``. ``sequence`` counts encoder frames received: unchanged
            means no new position (stale). Position/velocity turns → rad; current = Iq_measured;
            torque estimate NaN (0.6's Get_Torques would add a frame per tick: not asked);
            temperature NaN. On 0.6, the tick on which a heartbeat first reports a new axis
            error also asks Get_Error (one frame on that tick only) and the fault text carries
            the active errors and the disarm reason, decoded.
``write()`` Set_Input_Torque.

**Firmware, settled before any heartbeat is interpreted.** 0.5.6 and 0.6 lay the heartbeat out
differently (0.6 byte 5 is the procedure result — DISARMED = 3 — where 0.5.6 has the motor-error
flag), number the axis errors differently (watchdog expiry 0x800 vs 0x1000000) and differ in
Clear_Errors (DLC 0 vs 1). ``open()`` sends Get_Version (0x00): 0.6+ answers, 0.5.6 has no such
message and stays silent. Until the layout is settled a heartbeat counts only as a sign of life
(length and axis state checked — byte 4 is the same in both); its error fields are not read.
Settled by (a) a reply: 0.5.x or 0.6.x selects that layout, any other version is refused at
open with one line naming it; or (b) silence for ``state_timeout_s`` after a Get_Version sent
while the node was heard (a heartbeat had arrived: a request sent before the drive listened
proves nothing, so it is sent again once one has): then 0.5.x. ``open()`` waits for that, at
most ``heartbeat_timeout_s`` for the first heartbeat plus ``state_timeout_s`` (a 0.5.6 drive
costs that once per open); a node not heard by then leaves it unsettled and ``enable()``
settles it once the heartbeat comes. Enable never proceeds unsettled. A Get_Version reply that
arrives after the layout was settled (by silence, or a second reply naming another version)
never switches layouts mid-run: it latches a fault naming both, the loop stops (the disable is
still confirmed: the axis state byte is the same in both layouts), and enable is refused until
the link is reopened.

``enable()`` needs a fresh heartbeat without axis error; the first enable after ``open`` checks
the drive watchdog (below); then Set_Controller_Mode (torque, passthrough), Set_Input_Torque(0)
and Set_Axis_State(CLOSED_LOOP_CONTROL), and it returns once a later heartbeat reports
CLOSED_LOOP_CONTROL (else EnableError, and IDLE is requested). ``disable()`` sends
Set_Axis_State(IDLE) and returns once a later heartbeat reports IDLE, within ``state_timeout_s``
(else CommunicationError: not confirmed); ``reset_fault()`` Clear_Errors (in the firmware's form).

Nothing is sent in the background: only the caller's read/write/enable/disable talk to the
drive. Every frame addressed to the axis feeds the drive watchdog (0.5.6 and 0.6 alike), so a
dead loop must not keep the drive alive. This driver neither sets nor reads
``axis.config.watchdog_timeout`` / ``enable_watchdog`` (0.5.6 CAN Simple cannot; 0.6's endpoint
access, cmd 0x04/0x05, is not used: configure them with odrivetool or the GUI;
``watchdog_timeout_s`` tells the driver what they are), so the watchdog is checked by timing:
CLOSED_LOOP_CONTROL at zero torque, nothing sent, until a heartbeat reports
WATCHDOG_TIMER_EXPIRED (the firmware's bit) within ``watchdog_timeout_s`` + ``state_timeout_s``;
then Clear_Errors. Without that (or with ``watchdog_timeout_s`` inf) enable is refused unless
``allow_unprotected`` (then warned at every enable).

Resolution: position is a float32 in turns — 2^-24 turn (one count of a 24-bit encoder) within
±1 turn, 128 counts at 100 turns.

State: from the heartbeat. Axis error (or, 0.5.6, a sub-component error flag) → FAULT with the
code and the decoded text; a state other than CLOSED_LOOP_CONTROL while enabled → FAULT; no
heartbeat for ``heartbeat_timeout_s`` (wall time) → FAULT; a refused or late firmware → FAULT.
Error frames on the bus are counted (``error_frames``) and logged; they do not fault the backend
by themselves, except bus-off (the controller has left the bus: nothing is sent or received any
more) → FAULT, latched until the backend is reopened.
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
from .odrive_codec import (MAX_NODE_ID, AxisState, Cmd, ControlMode, EncoderEstimates,
                           FirmwareVersion, Frame, InputMode, Iq, decode_encoder_estimates, decode_iq,
                           decode_version, encode_request, encode_set_axis_state,
                           encode_set_controller_mode, encode_set_input_torque, heartbeat_axis_state)
from .odrive_codec06 import ErrorStatus, Heartbeat06, decode_error_status
from .odrive_dialect import (DIALECT_05, AnyHeartbeat, Dialect, can_dialect,
                             can_firmware_refusal)

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


def _state_text(hb: AnyHeartbeat) -> str:
    """``IDLE``; on 0.6 with the procedure result when it is not SUCCESS (``IDLE, DISARMED``)."""
    if isinstance(hb, Heartbeat06) and hb.procedure_result:
        return f"{hb.axis_state.name}, {hb.procedure_text()}"
    return hb.axis_state.name


def _to_message(frame: Frame) -> can.Message:
    return can.Message(arbitration_id=frame.arbitration_id, data=frame.data, dlc=len(frame.data),
                       is_remote_frame=frame.rtr, is_extended_id=False)


class ODriveCanBackend(Backend):
    """One ODrive axis (node id) in torque control over CAN Simple (firmware 0.5.x or 0.6.x)."""

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
        watchdog check) beyond the heartbeat period, and for the Get_Version reply that tells
        0.6 from 0.5.6 (silence that long means 0.5.x) [s]; ``allow_unprotected``: enable even when
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
        self._heartbeat: AnyHeartbeat | None = None  # decoded: only once the dialect is settled
        self._raw_heartbeat: Frame | None = None  # the last one, held while it is not
        self._heartbeat_at = -math.inf  # link time of the last heartbeat [s]
        self._heartbeat_seq = 0
        self._dialect: Dialect | None = None  # the firmware's layouts; None: not settled yet
        self._version_asked_at = -math.inf  # link time of the last Get_Version request [s]
        self._version_asked_heard = False  # the node had been heard when it was sent
        self._error_asked_for: int | None = None  # 0.6: the axis error a Get_Error was sent for
        self._error_status: ErrorStatus | None = None  # 0.6: its reply
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
        self._firmware_fault = ""  # a refused firmware, or a Get_Version reply after settling
        self.watchdog_confirmed_s = NAN  # silence after which the drive watchdog was seen expired [s]
        self.unprotected = ""  # why the drive watchdog is not confirmed ("" = it is, or unchecked)
        self._closed_loop_requested = False  # since the last confirmed IDLE

    @property
    def last_heartbeat(self) -> AnyHeartbeat | None:
        """The last heartbeat, decoded in the firmware's layout; None until the layout is settled."""
        return self._heartbeat

    @property
    def dialect(self) -> Dialect | None:
        """The firmware line's layouts (None: not settled yet)."""
        return self._dialect

    # --- hooks -----------------------------------------------------------------------------------
    def identity(self) -> dict[str, str]:
        """Protocol, node, firmware (0.5.6 has no Get_Version: not reported) and the watchdog
        check's outcome (after the first enable)."""
        if self.firmware is not None:
            firmware = str(self.firmware)
        else:
            firmware = "not reported (0.5.x)" if self._dialect else "not known (node not heard)"
        out = {"protocol": self.name, "node_id": str(self.node_id), "firmware": firmware}
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
        try:
            self._ask_version()  # firmware 0.6+ answers; 0.5.6 has no Get_Version and is silent
            self._settle_firmware(self._link_time() + self.heartbeat_timeout_s)
            if self._firmware_fault:  # the drive answered with a firmware this driver refuses
                raise BackendError(f"{self.name}: node {self.node_id}: {self._firmware_fault}")
        except BaseException:
            self._close()
            raise

    # --- the firmware: settled before a heartbeat is interpreted -------------------------------
    def _ask_version(self) -> None:
        self._send(encode_request(self.node_id, Cmd.GET_VERSION, rtr=True))
        self._version_asked_at = self._link_time()
        self._version_asked_heard = self._heartbeat_seq > 0

    def _version_settled(self) -> bool:
        return self._dialect is not None or bool(self._firmware_fault)

    def _settle_firmware(self, heard_by: float) -> None:
        """Settle the layout (see the module docstring): wait until link time ``heard_by`` for a
        Get_Version reply or a first heartbeat; once the node is heard, make sure a Get_Version
        was sent after that and give it ``state_timeout_s`` to be answered; silence means 0.5.x.
        Returns unsettled only when the node was not heard by ``heard_by``."""
        if self._version_settled():
            return
        if not self._wait_until(lambda: self._version_settled() or self._heartbeat_seq > 0, heard_by):
            return
        if not self._version_settled() and not self._version_asked_heard:
            self._ask_version()  # the first may have gone out before the drive listened
        if not self._wait_until(self._version_settled, self._version_asked_at + self.state_timeout_s):
            self._settle(DIALECT_05)
            log.info("%s: node %d: no Get_Version reply within drive.state_timeout_s %g s: "
                     "firmware 0.5.x (0.5.6 has no Get_Version)", self.name, self.node_id,
                     self.state_timeout_s)

    def _settle(self, dialect: Dialect) -> None:
        """From here on heartbeats are read in ``dialect``'s layout, the held one first."""
        self._dialect = dialect
        raw, self._raw_heartbeat = self._raw_heartbeat, None
        if raw is not None:
            self._heartbeat = dialect.decode_heartbeat(raw)  # already checked: cannot fail

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
        self._settle_firmware(self._link_time())  # heard now: within state_timeout_s
        if self._firmware_fault:
            raise self._firmware_error()
        hb = self._heartbeat
        assert hb is not None and self._dialect is not None  # heard, so settled
        if hb.axis_error:
            if self._ask_error_status(hb.axis_error):
                self._wait_until(lambda: self._error_status is not None,
                                 self._link_time() + self.timeout_s)
            raise EnableError(f"{self.name}: node {self.node_id} reports axis error "
                              f"0x{hb.axis_error:X}: {self._fault_text(hb)}; fix the cause, then "
                              f"reset_fault()")
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

    def _firmware_error(self) -> EnableError:
        """Enable refused: a firmware this driver does not speak, or a late Get_Version reply
        (latched while enable ran: the wait that saw it ends, the axis is put back to IDLE)."""
        return EnableError(f"{self.name}: node {self.node_id}: {self._firmware_fault}")

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
        """This driver neither sets nor reads ``axis.config.watchdog_timeout`` /
        ``enable_watchdog`` (0.5.6 CAN Simple cannot): the check is timed instead.
        CLOSED_LOOP_CONTROL at zero torque, then nothing sent; a heartbeat must report
        WATCHDOG_TIMER_EXPIRED (the firmware's bit: 0x800 on 0.5.x, 0x1000000 on 0.6.x) within
        ``watchdog_timeout_s`` + ``state_timeout_s``; then Clear_Errors. Otherwise ``unprotected``
        says why (and the axis is put back to IDLE)."""
        if not math.isfinite(self.watchdog_timeout_s):
            self.unprotected = ("drive.watchdog_timeout_s is .inf: the drive watchdog is not checked "
                                "(this driver cannot read it over CAN)")
            return
        assert self._dialect is not None
        bit = self._dialect.watchdog_expired
        seq0 = self._request_closed_loop()
        t0 = self._link_time()

        def expired() -> bool:
            hb = self._heartbeat
            return self._heartbeat_seq > seq0 and hb is not None and bool(hb.axis_error & bit)

        seen = self._wait_until(lambda: expired() or bool(self._firmware_fault),
                                t0 + self.watchdog_timeout_s + self.state_timeout_s)
        silence = self._link_time() - t0
        if not seen or self._firmware_fault:
            self._send(encode_set_axis_state(self.node_id, AxisState.IDLE))
            self._confirm_idle()  # axis state @4: read alike in every layout
            if self._firmware_fault:
                raise self._firmware_error()
            self.unprotected = (f"the drive watchdog did not expire within {silence:.3f} s of silence "
                                f"in CLOSED_LOOP_CONTROL (axis.config.enable_watchdog off, or "
                                f"watchdog_timeout above drive.watchdog_timeout_s "
                                f"{self.watchdog_timeout_s:g} s? set them with odrivetool)")
            return
        seq1 = self._heartbeat_seq
        self._send(self._dialect.encode_clear_errors(self.node_id))
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
            if self._firmware_fault:
                raise self._firmware_error()
            hb = self._heartbeat
            if self._heartbeat_seq > seq0 and hb is not None:
                if hb.axis_error:
                    raise EnableError(f"{self.name}: node {self.node_id} faulted while enabling: "
                                      f"axis error 0x{hb.axis_error:X}: {hb.fault_text()}")
                if hb.axis_state == AxisState.CLOSED_LOOP_CONTROL:
                    return
            now = self._link_time()
            if now >= deadline:
                state = _state_text(hb) if hb is not None else "unknown"
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
        """Clear_Errors in the firmware's form (0.5.x DLC 0, 0.6.x DLC 1, Identify 0)."""
        if self._dialect is None:
            raise CommunicationError(f"{self.name}: node {self.node_id} not heard since open: its "
                                     f"firmware (and so the Clear_Errors frame) is not known")
        self._send(self._dialect.encode_clear_errors(self.node_id))

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
        hb = self._heartbeat
        # a new axis error on 0.6: one Get_Error, on this tick only, answered within the same wait
        explain = (hb is not None and hb.axis_error not in (0, self._error_asked_for)
                   and self._ask_error_status(hb.axis_error, deadline))
        self._wait_until(lambda: (self._encoder_seq > enc0 and self._iq_seq > iq0
                                  and (not explain or self._error_status is not None)), deadline)
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
        if self._firmware_fault:
            return DriveState.FAULT, 0, self._firmware_fault
        if self._heartbeat_seq == 0:
            waited = self._link_time() - self._opened_at
            if waited > self.heartbeat_timeout_s:
                return DriveState.FAULT, 0, f"no heartbeat from node {self.node_id} for {waited:.3f} s"
            return DriveState.DISABLED, 0, ""
        hb = self._heartbeat
        age = self._link_time() - self._heartbeat_at
        if age > self.heartbeat_timeout_s:
            return (DriveState.FAULT, hb.axis_error if hb is not None else 0,
                    f"heartbeat lost: none for {age:.3f} s (timeout {self.heartbeat_timeout_s:g} s)")
        if hb is None:  # heard, layout not settled: nothing is read from it (not enabled either)
            return DriveState.DISABLED, 0, ""
        text = self._fault_text(hb)
        if text:
            return DriveState.FAULT, hb.axis_error, text
        closed = hb.axis_state == AxisState.CLOSED_LOOP_CONTROL
        if self.enabled and not closed:
            return (DriveState.FAULT, 0,
                    f"axis state {_state_text(hb)} while enabled (expected CLOSED_LOOP_CONTROL)")
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
                if self._dialect is None:  # a sign of life only: its error fields are not read
                    heartbeat_axis_state(frame)
                    self._raw_heartbeat = frame
                else:
                    self._heartbeat = self._dialect.decode_heartbeat(frame)
                    if self._heartbeat.axis_error == 0:
                        self._error_asked_for = self._error_status = None
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
                # garbage on this id is refused by the decoder (its unreleased flag is not a bool)
                self._on_version(decode_version(frame))
            elif cmd == Cmd.GET_MOTOR_ERROR and self._error_asked_for is not None:
                if self._dialect is not None and self._dialect.line >= (0, 6):  # 0.6's Get_Error
                    self._error_status = decode_error_status(frame)
        except ProtocolError as err:
            self.rejected_frames += 1
            log.warning("%s: %s", self.name, err)

    def _on_version(self, version: FirmwareVersion) -> None:
        """A Get_Version reply (firmware 0.6+). Unsettled: a firmware this driver speaks settles
        the layout, another latches a refusal. Settled: the same version again is the answer to
        a repeated request; any other (a reply after silence settled 0.5.x, or a second version)
        never switches layouts mid-run: it latches a fault."""
        if self._firmware_fault:
            return
        if not self._version_settled():
            log.info("%s: node %d: firmware %s", self.name, self.node_id, version)
            self.firmware = version
            dialect = can_dialect(version)
            if dialect is None:  # refused where it is read: open() raises, enable() too
                self._firmware_fault = can_firmware_refusal(version) or ""
            else:
                self._settle(dialect)
            return
        if version == self.firmware:
            return
        assert self._dialect is not None
        settled = (f"firmware {self.firmware}" if self.firmware is not None else
                   f"no reply within drive.state_timeout_s {self.state_timeout_s:g} s")
        self._firmware_fault = (f"Get_Version answered firmware {version} after the frame layout was "
                                f"settled as {self._dialect.name} ({settled}): layouts are not "
                                f"switched mid-run; reopen the link")
        log.error("%s: node %d: %s", self.name, self.node_id, self._firmware_fault)

    # --- 0.6: what Get_Error adds to a fault ---------------------------------------------------------
    def _ask_error_status(self, axis_error: int, deadline: float | None = None) -> bool:
        """0.6: request Get_Error for this axis error (its reply explains it) and return True;
        0.5.x: nothing (False)."""
        if self._dialect is None or self._dialect.line < (0, 6):
            return False
        self._error_asked_for, self._error_status = axis_error, None
        self._send(encode_request(self.node_id, Cmd.GET_MOTOR_ERROR, self.rtr_requests), deadline)
        return True

    def _fault_text(self, hb: AnyHeartbeat) -> str:
        """The heartbeat's fault text; on 0.6 with the Get_Error reply for this error appended."""
        text = hb.fault_text()
        status = self._error_status
        if text and status is not None and self._error_asked_for == hb.axis_error:
            text += f"; Get_Error: {status.text()}"
        return text

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
