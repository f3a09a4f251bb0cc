"""A CiA 402 servo drive over CANopen in cyclic synchronous torque mode (CST, 0x6060 = 10).

Two paths, deliberately different:

- **Configuration** (``open``) uses the ``canopen`` library: a Network on the configured
  python-can interface/channel, a RemoteNode (object dictionary from ``eds_path``, or the minimal
  one built in :func:`minimal_object_dictionary`), NMT pre-operational, SDO reads of rated torque
  0x6076, rated current 0x6075 and supported modes 0x6502, SDO writes of mode 0x6060 = 10 and the
  heartbeats (producer 0x1017; consumer 0x1016, read back), the PDO mapping of
  :class:`~drivers.cia402_pdo.PdoMapping` (``drive.tpdo`` / ``drive.rpdo``; by default TPDO1
  position + statusword, TPDO2 current + torque, RPDO1 target torque + controlword) through the
  canopen PDO API with transmission type 1, each PDO read back over SDO, NMT operational, and a
  heartbeat in OPERATIONAL before ``open`` returns — a node that sends no heartbeat cannot be
  supervised and is refused.
- **The tick** (``read``/``write``) uses raw python-can frames: ``read`` sends SYNC (0x080) and
  waits at most ``timeout_s`` for every mapped TPDO, filed by a listener attached to the
  network's own Notifier (python-can ≥ 4.6 allows one Notifier per bus); ``write`` sends the
  RPDOs (target torque ‰, controlword), which the drive applies at the next SYNC. Frames that
  arrive outside the wait for them are counted as late and dropped; ``sequence`` advances only on
  a complete fresh set of TPDOs.

The master heartbeat the drive consumes (0x1016) is sent from the tick, not from a background
timer: a loop that stops ticking must let the drive's heartbeat consumer expire. A drive that
refuses 0x1016 or reads back another value is protected by life guarding instead where it has
it (CiA 301 node guarding: guard time 0x100C = ``heartbeat_period_s``, life time factor 0x100D
= ⌈``heartbeat_timeout_s``/``heartbeat_period_s``⌉, both read back; then, once NMT operational is
confirmed by its heartbeat, its heartbeat producer 0x1017 is set to 0, since CiA 301 runs node
guarding only without one). The master's guard request (a remote frame on 0x700 + node id) then
rides on the tick like the master heartbeat, and the drive's answer (its NMT state; one whose
bit 7 does not toggle is not taken) is what supervises the link in place of its heartbeat. A drive with neither is refused at ``enable``
(``unprotected`` says why) unless ``allow_unprotected``, then warned at every enable;
``protection`` names the mechanism in use. A clean ``close`` (the drive confirmed disabled)
turns that watch off before leaving (0x1016:01 = 0, or 0x100D = 0), so the master's silence
afterwards is no logged lapse on the drive; a drive still enabled keeps it.

Faults: an EMCY latches FAULT in the feedback (code and decoded text); only :meth:`reset_fault`
sends the rising edge of controlword bit 7, and it disables first. ``enable`` never resets a
fault. A disable is confirmed by the statusword within ``state_timeout_s`` or raises. Bus-off
(an error frame) is a CommunicationError at the next read. Units at this interface are SI (rad,
A, N·m, s); ‰ and counts stay inside this module.
"""

from __future__ import annotations

import collections
import configparser
import contextlib
import functools
import logging
import math
import struct
import threading
import time
from dataclasses import dataclass
from typing import Callable, Iterator, Optional

import can
import canopen
from canopen.objectdictionary import ODArray, ODRecord, ODVariable, ObjectDictionary
from canopen.objectdictionary import datatypes as dt
from canopen.sdo import SdoAbortedError, SdoCommunicationError

from controller.config import Config

from .backend import Backend, Clock, DriveState, Feedback, refuse_or_warn_unprotected
from .cia402_pdo import (DEFAULT_RPDO, DEFAULT_TPDO, PdoMapping, eds_problem, readback_mismatch,
                         validate_mapping)
from .cia402_protocol import (
    CAN_ERR_BUSOFF, CAN_ERR_RESTARTED, CW_DISABLE_VOLTAGE, CW_ENABLE_OPERATION, CW_FAULT_RESET_BIT,
    ENABLE_STEPS, HB_OPERATIONAL, HB_STATE_NAMES, HEARTBEAT_BASE, MODE_CST, NMT_COB_ID,
    NMT_PRE_OPERATIONAL, OD_CONSUMER_HEARTBEAT, OD_GUARD_TIME, OD_LIFE_TIME_FACTOR,
    OD_MODES_OF_OPERATION,
    OD_MODES_OF_OPERATION_DISPLAY, OD_PRODUCER_HEARTBEAT, OD_RATED_CURRENT, OD_RATED_TORQUE,
    OD_SUPPORTED_DRIVE_MODES, PDO_COB_ID_INVALID, PDO_TRANSMISSION_SYNC, SYNC_COB_ID, CobIds, Emcy,
    PowerState, counts_to_rad, decode_emcy, decode_statusword, describe_error_frame,
    from_permille, i32_delta, permille_limit, supports_cst, to_permille,
)
from .errors import BackendError, CommunicationError, DriveFaultError, EnableError, ProtocolError

log = logging.getLogger(__name__)

NAN = float("nan")
NOTIFIER_CYCLE_S = 0.05  # receive-thread wake-up; bounds how long close() waits for it [s]


# States with the power stage on (torque possible or about to be).
_POWERED = (PowerState.OPERATION_ENABLED, PowerState.QUICK_STOP_ACTIVE, PowerState.SWITCHED_ON,
            PowerState.READY_TO_SWITCH_ON)


@dataclass(frozen=True)
class Cia402Settings:
    """Everything the CiA 402 backend needs, with units."""

    interface: str = "virtual"  # python-can interface
    channel: str = "vcan0"  # python-can channel
    bitrate: int = 1_000_000  # [bit/s]
    node_id: int = 1  # CANopen node id of the drive, 1..127
    timeout_s: float = 0.002  # wait for the TPDOs after SYNC [s]
    heartbeat_timeout_s: float = 0.5  # drive heartbeat older than this ⇒ link lost; drive-side consumer time [s]
    heartbeat_period_s: float = 0.1  # drive producer time 0x1017, and the master heartbeat period [s]
    master_node_id: int = 127  # node id the master's heartbeat is sent under (0x700 + id)
    counts_per_rev: int = 2**24  # position actual 0x6064 [counts/rev]
    eds_path: str = ""  # EDS of the drive; "" = the minimal object dictionary built in code
    state_timeout_s: float = 0.5  # bound for disable and fault-reset confirmations [s]
    allow_unprotected: bool = False  # enable without a confirmed heartbeat consumer 0x1016 (warned)
    tpdo: tuple[tuple[str, ...], ...] = DEFAULT_TPDO  # PDO mapping by object name (cia402_pdo)
    rpdo: tuple[tuple[str, ...], ...] = DEFAULT_RPDO

    def __post_init__(self) -> None:
        checks = (
            (1 <= self.node_id <= 127, "node_id", f"must be 1..127, got {self.node_id}"),
            (1 <= self.master_node_id <= 127, "master_node_id", f"must be 1..127, got {self.master_node_id}"),
            (self.master_node_id != self.node_id, "master_node_id", "must differ from node_id"),
            (self.timeout_s > 0, "timeout_s", f"must be > 0, got {self.timeout_s}"),
            (0 < self.heartbeat_period_s < self.heartbeat_timeout_s, "heartbeat_period_s",
             f"must be in (0, heartbeat_timeout_s = {self.heartbeat_timeout_s}), got {self.heartbeat_period_s}"),
            (self.heartbeat_period_s * 1000 <= 0xFFFF, "heartbeat_period_s", "must fit 0x1017 (≤ 65.535 s)"),
            (self.counts_per_rev >= 4, "counts_per_rev", f"must be >= 4, got {self.counts_per_rev}"),
            (self.state_timeout_s > 0, "state_timeout_s", f"must be > 0, got {self.state_timeout_s}"),
        )
        for ok, name, message in checks:
            if not ok:
                raise ValueError(f"drive.{name}: {message}")
        try:
            validate_mapping(self.tpdo, self.rpdo)
        except ValueError as err:
            raise ValueError(f"drive.{err}") from None

    @classmethod
    def from_config(cls, cfg: Config) -> "Cia402Settings":
        """From ``cfg.drive``."""
        d = cfg.drive
        return cls(
            interface=d.interface, channel=d.channel, bitrate=d.bitrate, node_id=d.node_id,
            timeout_s=d.timeout_s, heartbeat_timeout_s=d.heartbeat_timeout_s,
            heartbeat_period_s=d.heartbeat_period_s,
            master_node_id=d.master_node_id,
            counts_per_rev=d.counts_per_rev,
            eds_path=d.eds_path,
            state_timeout_s=d.state_timeout_s,
            allow_unprotected=d.allow_unprotected,
            tpdo=d.tpdo,
            rpdo=d.rpdo,
        )


# --- the minimal object dictionary ----------------------------------------------------------------


def _var(name: str, index: int, subindex: int, data_type: int, access: str,
         default: Optional[int] = None, pdo: bool = False) -> ODVariable:
    v = ODVariable(name, index, subindex)
    v.data_type, v.access_type, v.default, v.pdo_mappable = data_type, access, default, pdo
    return v


def _record(name: str, index: int, members: list[ODVariable], array: bool = False) -> ODRecord | ODArray:
    r = ODArray(name, index) if array else ODRecord(name, index)
    for m in members:
        r.add_member(m)
    return r


def minimal_object_dictionary(node_id: int) -> ObjectDictionary:
    """The objects this project touches on a CiA 402 CST drive, typed as CiA 301/402 define
    them. Defaults: every PDO invalid and unmapped (the master configures them), heartbeats off,
    rated current 3 A, rated torque 1 N·m, only CST supported."""
    od = ObjectDictionary()
    od.node_id = node_id
    add = od.add_object
    add(_var("Device type", 0x1000, 0, dt.UNSIGNED32, "ro", 0x00020192))  # profile 402, servo
    add(_var("Error register", 0x1001, 0, dt.UNSIGNED8, "ro", 0))
    add(_var("COB-ID SYNC", 0x1005, 0, dt.UNSIGNED32, "rw", SYNC_COB_ID))
    add(_var("COB-ID EMCY", 0x1014, 0, dt.UNSIGNED32, "rw", 0x80 + node_id))
    add(_record("Consumer heartbeat time", OD_CONSUMER_HEARTBEAT, [
        _var("Number of entries", OD_CONSUMER_HEARTBEAT, 0, dt.UNSIGNED8, "ro", 1),
        _var("Consumer heartbeat time 1", OD_CONSUMER_HEARTBEAT, 1, dt.UNSIGNED32, "rw", 0),
    ], array=True))
    add(_var("Producer heartbeat time", OD_PRODUCER_HEARTBEAT, 0, dt.UNSIGNED16, "rw", 0))
    add(_record("Identity object", 0x1018, [
        _var("Number of entries", 0x1018, 0, dt.UNSIGNED8, "ro", 1),
        _var("Vendor-ID", 0x1018, 1, dt.UNSIGNED32, "ro", 0),
    ]))
    for n in range(4):
        for kind, comm, mapping, base in (("RPDO", 0x1400, 0x1600, 0x200), ("TPDO", 0x1800, 0x1A00, 0x180)):
            cob = (1 << 31) | (base + 0x100 * n + node_id)
            comm_members = [
                _var("Highest sub-index supported", comm + n, 0, dt.UNSIGNED8, "ro", 5),
                _var("COB-ID used by PDO", comm + n, 1, dt.UNSIGNED32, "rw", cob),
                _var("Transmission type", comm + n, 2, dt.UNSIGNED8, "rw", 0xFF),
                _var("Inhibit time", comm + n, 3, dt.UNSIGNED16, "rw", 0),
                _var("Event timer", comm + n, 5, dt.UNSIGNED16, "rw", 0),
            ]
            add(_record(f"{kind} {n + 1} communication parameter", comm + n, comm_members))
            map_members = [_var("Number of mapped objects", mapping + n, 0, dt.UNSIGNED8, "rw", 0)]
            map_members += [_var(f"Mapped object {k}", mapping + n, k, dt.UNSIGNED32, "rw", 0)
                            for k in range(1, 9)]
            add(_record(f"{kind} {n + 1} mapping parameter", mapping + n, map_members))
    add(_var("Controlword", 0x6040, 0, dt.UNSIGNED16, "rw", 0, pdo=True))
    add(_var("Statusword", 0x6041, 0, dt.UNSIGNED16, "ro", 0, pdo=True))
    add(_var("Modes of operation", OD_MODES_OF_OPERATION, 0, dt.INTEGER8, "rw", 0, pdo=True))
    add(_var("Modes of operation display", OD_MODES_OF_OPERATION_DISPLAY, 0, dt.INTEGER8, "ro", 0, pdo=True))
    add(_var("Position actual value", 0x6064, 0, dt.INTEGER32, "ro", 0, pdo=True))
    add(_var("Target torque", 0x6071, 0, dt.INTEGER16, "rw", 0, pdo=True))
    add(_var("Motor rated current", OD_RATED_CURRENT, 0, dt.UNSIGNED32, "rw", 3000))  # [mA]
    add(_var("Motor rated torque", OD_RATED_TORQUE, 0, dt.UNSIGNED32, "rw", 1000))  # [mN·m]
    add(_var("Torque actual value", 0x6077, 0, dt.INTEGER16, "ro", 0, pdo=True))
    add(_var("Current actual value", 0x6078, 0, dt.INTEGER16, "ro", 0, pdo=True))
    add(_var("Supported drive modes", OD_SUPPORTED_DRIVE_MODES, 0, dt.UNSIGNED32, "ro", 1 << 9))
    return od


# --- the receive side of the tick -----------------------------------------------------------------


class _Inbox(can.Listener):
    """Files the drive's cyclic frames; runs in the network's Notifier thread.

    TPDOs count only while the tick waits for them (``arm`` … ``wait_set``); others are late.
    EMCY payloads queue for the tick; heartbeats update state and arrival time (monotonic).
    ``on_error`` is deliberately not implemented: a dying receive thread must stay dead and be
    reported (``Notifier.exception``), not spin.
    """

    def __init__(self, ids: CobIds, tpdo_ids: tuple[int, ...]) -> None:
        self._tpdo_slot = {cid: k for k, cid in enumerate(tpdo_ids)}
        self._emcy_id, self._hb_id = ids.emcy, ids.heartbeat
        self._cond = threading.Condition()
        self._armed = False
        self._tpdos: list[Optional[bytes]] = [None] * len(tpdo_ids)
        self.late_frames = 0
        self.emcy: collections.deque[bytes] = collections.deque(maxlen=64)
        self.heartbeats = 0
        self.hb_state: Optional[int] = None
        self.hb_monotonic_s = -math.inf
        self.guarding = False  # 0x700 + id carries answers to node guarding: bit 7 must toggle
        self._toggle: Optional[int] = None  # bit 7 of the last answer taken
        self.toggle_errors = 0  # answers whose bit 7 repeated the last one: not taken
        self.error_frames = 0
        self.remote_frames = 0
        self.last_error_frame = ""
        self.bus_off = False

    def _complete(self) -> bool:
        return all(t is not None for t in self._tpdos)

    def on_message_received(self, msg: can.Message) -> None:
        if msg.is_error_frame:
            self.error_frames += 1
            self.last_error_frame = describe_error_frame(msg.arbitration_id)
            if msg.arbitration_id & CAN_ERR_BUSOFF:
                self.bus_off = True
            elif msg.arbitration_id & CAN_ERR_RESTARTED:
                self.bus_off = False
            return
        if msg.is_remote_frame:  # e.g. node guarding on 0x700+id: asks, carries nothing to file
            self.remote_frames += 1
            return
        cid = msg.arbitration_id
        slot = self._tpdo_slot.get(cid)
        if slot is not None:
            with self._cond:
                if not self._armed:
                    self.late_frames += 1
                    return
                self._tpdos[slot] = bytes(msg.data)
                if self._complete():
                    self._cond.notify_all()
        elif cid == self._emcy_id:
            self.emcy.append(bytes(msg.data))
        elif cid == self._hb_id and len(msg.data) >= 1:
            with self._cond:
                if self.guarding:  # CiA 301: an answer that does not toggle is not received
                    toggle = msg.data[0] >> 7
                    if toggle == self._toggle:
                        self.toggle_errors += 1
                        return
                    self._toggle = toggle
                self.hb_state = msg.data[0] & 0x7F
                self.hb_monotonic_s = time.monotonic()
                self.heartbeats += 1
                self._cond.notify_all()

    def expect_guarding(self, on: bool) -> None:
        """From now on the frames on 0x700 + id are answers to node guarding (``on``) or
        heartbeats; the toggle check starts afresh."""
        with self._cond:
            self.guarding, self._toggle = on, None

    def arm(self) -> None:
        with self._cond:
            self._armed = True
            self._tpdos = [None] * len(self._tpdos)

    def wait_set(self, timeout_s: float) -> Optional[tuple[bytes, ...]]:
        """Every mapped TPDO received since ``arm`` (in TPDO order), or None after ``timeout_s``."""
        with self._cond:
            self._cond.wait_for(self._complete, timeout_s)
            self._armed = False
            if not self._complete():
                if any(t is not None for t in self._tpdos):
                    self.late_frames += 1  # part of a set is as good as none
                return None
            return tuple(self._tpdos)  # type: ignore[arg-type]

    def wait_heartbeat(self, accept: Callable[[int], bool], timeout_s: float) -> bool:
        """Wait for a heartbeat received from now on whose state ``accept`` takes."""
        with self._cond:
            n0 = self.heartbeats
            return self._cond.wait_for(
                lambda: self.heartbeats > n0 and self.hb_state is not None and accept(self.hb_state),
                timeout_s)


# --- the backend ----------------------------------------------------------------------------------


def _left(before: Optional[PowerState], state: Optional[PowerState]) -> bool:
    """A state was seen and it is no longer ``before`` (a transition happened)."""
    return state is not None and state is not before


class Cia402Backend(Backend):
    """CiA 402 drive in CST. ``network`` (a canopen Network, connected or not) or ``bus`` (a
    python-can bus with no Notifier yet) may be injected; what this object connects it also
    disconnects, what it was given it leaves open."""

    name = "cia402"

    def __init__(self, settings: Cia402Settings, clock: Clock, *,
                 network: Optional[canopen.Network] = None, bus: Optional[can.BusABC] = None) -> None:
        super().__init__()
        if network is not None and bus is not None:
            raise ValueError("pass network or bus, not both")
        self.settings = settings
        self._clock = clock
        self._ids = CobIds(settings.node_id)
        self._where = f"cia402 node {settings.node_id}"
        self._given_network, self._given_bus = network, bus
        self._network: Optional[canopen.Network] = None
        self._bus: Optional[can.BusABC] = None
        self._node: Optional[canopen.RemoteNode] = None
        self._owns_connection = False  # we connected the network: we disconnect it
        self._owns_notifier = False  # we started a Notifier on a given bus: we stop it
        self.mapping = PdoMapping(settings.tpdo, settings.rpdo)
        self._inbox = _Inbox(self._ids, self.mapping.tpdo_ids(settings.node_id))
        self._sync_msg = can.Message(arbitration_id=SYNC_COB_ID, data=b"", is_extended_id=False)
        self._hb_msg = can.Message(arbitration_id=HEARTBEAT_BASE + settings.master_node_id,
                                   data=bytes([HB_OPERATIONAL]), is_extended_id=False)
        self._master_heartbeat = False  # the drive consumes our heartbeat (0x1016 confirmed)
        self._guarding = False  # life guarding instead (0x100C/0x100D confirmed, 0x1017 = 0)
        self._guard_msg = can.Message(arbitration_id=HEARTBEAT_BASE + settings.node_id,
                                      is_remote_frame=True, dlc=1, is_extended_id=False)
        self._guard_since_s = -math.inf  # monotonic: guarding (re)started, the answer age's floor
        self._last_guard_s = -math.inf  # monotonic: the last guard request sent
        self.unprotected = ""  # why the drive does not watch the master ("" = it does)
        self.protection = ""  # what watches the master: heartbeat consumer | life guarding | ""
        self._next_master_hb_s = 0.0  # monotonic
        self._cw = CW_DISABLE_VOLTAGE  # controlword sent with every RPDO
        self.rated_torque_nm = NAN  # 0x6076, read at open
        self.rated_current_a = NAN  # 0x6075, read at open
        # feedback state
        self._power: Optional[PowerState] = None
        self._statusword = 0
        self._raw_position: Optional[int] = None
        self._position_counts = 0  # unwrapped
        self._current_a = NAN
        self._torque_nm = NAN
        self._sequence = 0
        self._t_sample_s = NAN  # loop-clock time of the last fresh sample
        self._fault: Optional[Emcy] = None  # latched until reset_fault()
        # counters
        self.missed_samples = 0  # ticks whose TPDO pair did not arrive within timeout_s
        self.saturated_writes = 0  # torque commands clipped to the i16 ‰ range

    @classmethod
    def from_config(cls, cfg: Config, clock: Clock, *, network: Optional[canopen.Network] = None,
                    bus: Optional[can.BusABC] = None) -> "Cia402Backend":
        """From ``cfg.drive``; with ``drive.eds_path`` the PDO mapping is checked against the EDS
        (ConfigError naming ``drive.tpdo[i][j]`` / ``drive.eds_path``)."""
        settings = Cia402Settings.from_config(cfg)
        if settings.eds_path:
            from canopen.objectdictionary import import_od

            from controller.schema import ConfigError

            try:
                od = import_od(settings.eds_path, settings.node_id)
            except (OSError, ValueError, KeyError, configparser.Error) as err:
                raise ConfigError("drive.eds_path", f"{settings.eds_path!r}: {err}") from None
            problem = eds_problem(PdoMapping(settings.tpdo, settings.rpdo), od)
            if problem:
                raise ConfigError(problem[0], f"{problem[1]} ({settings.eds_path})")
        return cls(settings, clock, network=network, bus=bus)

    # --- facts -----------------------------------------------------------------------------------
    @property
    def power_state(self) -> Optional[PowerState]:
        """The drive's power state from the last statusword (None before the first sample)."""
        return self._power

    @property
    def late_frames(self) -> int:
        return self._inbox.late_frames

    @property
    def error_frames(self) -> int:
        return self._inbox.error_frames

    def wait_heartbeat(self, timeout_s: float, state: Optional[int] = None) -> bool:
        """Block until the drive's next heartbeat (with NMT ``state``, if given) is filed (frames
        received before it have been filed too: one receive thread, in order). For diagnostics
        and tests, never in the tick. Under life guarding the drive reports only when asked: a
        guard request is sent every ``heartbeat_period_s`` meanwhile (feeding its life guarding
        as the tick does)."""
        accept: Callable[[int], bool] = lambda st: state is None or st == state  # noqa: E731
        if not self._guarding:
            return self._inbox.wait_heartbeat(accept, timeout_s)
        deadline = time.monotonic() + timeout_s
        while True:
            now = time.monotonic()
            if now >= deadline:
                return False
            self._send_msg(self._guard_msg)
            self._last_guard_s = now
            if self._inbox.wait_heartbeat(accept, min(self.settings.heartbeat_period_s, deadline - now)):
                return True

    @property
    def receive_thread_error(self) -> Optional[BaseException]:
        """What stopped the network's receive thread (None while it runs)."""
        net = self._network
        return net.notifier.exception if net is not None and net.notifier is not None else None

    def max_rate_hz(self) -> float:
        """The cycle's worst-case bus time at 100 % load: SYNC + the mapped TPDOs and RPDOs [Hz]."""
        return self.settings.bitrate / self.mapping.cycle_bits()

    def identity(self) -> dict[str, str]:
        """Protocol, node, ratings read at open and the protection confirmed there (heartbeat
        consumer, life guarding, or none and why)."""
        out = {"protocol": self.name, "node_id": str(self.settings.node_id)}
        if self.rated_torque_nm == self.rated_torque_nm:  # read at open
            out["rated_torque_nm"] = f"{self.rated_torque_nm:g}"
            out["rated_current_a"] = f"{self.rated_current_a:g}"
            out["protection"] = self.protection or f"none ({self.unprotected})"
        return out

    # --- lifecycle hooks -------------------------------------------------------------------------
    def _open(self) -> None:
        try:
            self._connect()
            self._configure()
        except BaseException:
            self._release()
            raise

    def _close(self) -> None:
        if self._node is not None:
            if not self.enabled:  # confirmed disabled: the link's watch is no longer needed
                self._disarm_supervision()
            try:
                self._send(NMT_COB_ID, bytes([NMT_PRE_OPERATIONAL, self.settings.node_id]))
            except BackendError as err:
                log.warning("%s: close: NMT pre-operational not sent: %s", self._where, err)
        self._release()

    def _disarm_supervision(self) -> None:
        """At a clean close, with the drive confirmed disabled: turn off what watches the master
        (heartbeat consumer 0x1016:01 = 0, or life time factor 0x100D = 0, CiA 301's "not used"),
        so the master's silence from here on is not logged by the drive as a heartbeat or life
        guarding error (EMCY 0x8130). A drive still enabled keeps it: its lapse is the stop. A
        failed write is only logged: the lapse then shows on the drive, disabled all the same."""
        writes = []
        if self._master_heartbeat:
            writes.append((OD_CONSUMER_HEARTBEAT, 1, struct.pack("<I", 0), "consumer heartbeat"))
        if self._guarding:
            writes.append((OD_LIFE_TIME_FACTOR, 0, bytes([0]), "life time factor"))
        self._master_heartbeat = self._guarding = False
        for index, sub, data, what in writes:
            try:
                self._sdo_write(index, sub, data, what)
            except BackendError as err:
                log.warning("%s: close: %s not turned off (the drive may log a lapse of the "
                            "master): %s", self._where, what, err)

    def _enable(self, timeout_s: float) -> None:
        if self.unprotected:
            refuse_or_warn_unprotected(self._where, self.unprotected, self.settings.allow_unprotected,
                                       "it would not notice a dead loop")
        try:
            self._enable_steps(timeout_s)
        except BaseException:
            try:
                self._disable()
            except BackendError as err:
                log.error("%s: enable failed and so did the disable after it: %s", self._where, err)
            raise

    def _disable(self) -> None:
        """Target torque 0 with disable voltage (transitions 7/9/10/12 → SWITCH ON DISABLED),
        confirmed by the statusword within ``state_timeout_s``."""
        self._cw = CW_DISABLE_VOLTAGE
        state = self._drive_until(CW_DISABLE_VOLTAGE, lambda s: s is not None and s not in _POWERED,
                                  self.settings.state_timeout_s, fault_ok=True)
        if state is None or state in _POWERED:
            seen = state.value if state else "no statusword"
            raise CommunicationError(f"{self._where}: disable not confirmed within "
                                     f"{self.settings.state_timeout_s} s (last: {seen})")

    def _reset_fault(self) -> None:
        """Disable, let the fault reaction finish, then one rising edge of controlword bit 7
        (transition 15). Raises DriveFaultError if the drive stays in FAULT."""
        self.disable()
        t = self.settings.state_timeout_s
        state = self._drive_until(CW_DISABLE_VOLTAGE,  # bit 7 low, and FAULT REACTION over
                                  lambda s: s is not None and s is not PowerState.FAULT_REACTION_ACTIVE,
                                  t, fault_ok=True)
        if state is PowerState.FAULT or self._fault is not None:
            state = self._drive_until(CW_FAULT_RESET_BIT, lambda s: s is not None and not s.is_fault,
                                      t, fault_ok=True)
        self._cw = CW_DISABLE_VOLTAGE
        self._poll(CW_DISABLE_VOLTAGE)  # bit 7 low again: the next reset is a new edge
        if state is None or state.is_fault:
            raise DriveFaultError(f"{self._where}: fault persists after reset ({self._fault_text()})",
                                  self._fault.code if self._fault else 0)
        if self._fault is not None:
            log.info("%s: fault reset (%s)", self._where, self._fault.text)
        self._fault = None

    def _read(self) -> Feedback:
        self._check_link()
        payloads = self._exchange()
        self._drain_emcy()
        if payloads is not None:
            self._ingest(payloads)
        else:
            self.missed_samples += 1
        return self._feedback()

    def _write(self, torque_nm: float) -> None:
        rated = self.rated_torque_nm
        if abs(torque_nm) > permille_limit(rated):
            self.saturated_writes += 1
        permille = 0 if self._fault is not None else to_permille(torque_nm, rated)
        self._send_rpdos(permille, self._cw)

    def _send_rpdos(self, target_torque_permille: int, controlword: int) -> None:
        for cob_id, data in zip(self.mapping.rpdo_ids(self.settings.node_id),
                                self.mapping.pack(target_torque_permille, controlword)):
            self._send(cob_id, data)

    # --- open: connect and configure -------------------------------------------------------------
    def _connect(self) -> None:
        s = self.settings
        try:
            if self._given_network is not None:
                net = self._given_network
                if net.bus is None:
                    net.connect(interface=s.interface, channel=s.channel, bitrate=s.bitrate)
                    self._owns_connection = True
            elif self._given_bus is not None:
                net = canopen.Network(self._given_bus)
                net.NOTIFIER_CYCLE = NOTIFIER_CYCLE_S
                net.connect()
                self._owns_notifier = True
            else:
                net = canopen.Network()
                net.NOTIFIER_CYCLE = NOTIFIER_CYCLE_S
                net.connect(interface=s.interface, channel=s.channel, bitrate=s.bitrate)
                self._owns_connection = True
        except (can.CanError, OSError, ValueError) as err:
            raise CommunicationError(f"{self._where}: cannot connect to {s.interface}:{s.channel}: {err}") from err
        self._network, self._bus = net, net.bus
        if net.notifier is None:
            raise BackendError(f"{self._where}: the given network has no Notifier")
        net.notifier.add_listener(self._inbox)
        try:
            od = s.eds_path or minimal_object_dictionary(s.node_id)
            self._node = canopen.RemoteNode(s.node_id, od)
        except (OSError, ValueError, KeyError, configparser.Error) as err:
            raise BackendError(f"{self._where}: drive.eds_path {s.eds_path!r}: {err}") from err
        net.add_node(self._node)

    def _configure(self) -> None:
        s, node = self.settings, self._node
        assert node is not None
        with self._translating("NMT pre-operational"):
            node.nmt.state = "PRE-OPERATIONAL"
        rated_torque_mnm = self._sdo_read(OD_RATED_TORQUE, 0, "<I", "rated torque")
        rated_current_ma = self._sdo_read(OD_RATED_CURRENT, 0, "<I", "rated current")
        modes = self._sdo_read(OD_SUPPORTED_DRIVE_MODES, 0, "<I", "supported drive modes")
        if rated_torque_mnm == 0 or rated_current_ma == 0:
            raise EnableError(f"{self._where}: rated torque 0x6076 = {rated_torque_mnm} mN·m, rated "
                              f"current 0x6075 = {rated_current_ma} mA: both must be > 0")
        if not supports_cst(modes):
            raise EnableError(f"{self._where}: supported modes 0x6502 = 0x{modes:08X} lacks CST (bit 9)")
        self.rated_torque_nm = rated_torque_mnm / 1000.0
        self.rated_current_a = rated_current_ma / 1000.0
        self._sdo_write(OD_MODES_OF_OPERATION, 0, struct.pack("<b", MODE_CST), "modes of operation")
        self._confirm_mode()
        period_ms = round(s.heartbeat_period_s * 1000)
        self._sdo_write(OD_PRODUCER_HEARTBEAT, 0, struct.pack("<H", period_ms), "producer heartbeat")
        self._configure_consumer_heartbeat()
        if self.unprotected:
            self._configure_life_guarding()
        self._configure_pdos()
        with self._translating("NMT start"):
            node.nmt.state = "OPERATIONAL"
        self._confirm_operational()
        if self._guarding:  # CiA 301: node guarding runs only with the heartbeat producer off
            self._sdo_write(OD_PRODUCER_HEARTBEAT, 0, struct.pack("<H", 0), "producer heartbeat")
            self._guard_since_s = self._last_guard_s = -math.inf
            self._inbox.expect_guarding(True)

    def _confirm_mode(self) -> None:
        deadline = time.monotonic() + self.settings.state_timeout_s
        while True:
            shown = self._sdo_read(OD_MODES_OF_OPERATION_DISPLAY, 0, "<b", "modes of operation display")
            if shown == MODE_CST:
                return
            if time.monotonic() > deadline:
                raise EnableError(f"{self._where}: modes of operation display 0x6061 = {shown} "
                                  f"after writing {MODE_CST} (CST) to 0x6060")

    def _configure_consumer_heartbeat(self) -> None:
        """Write the heartbeat consumer 0x1016:01 (the master's node id and the time after which
        the drive faults without its heartbeat) and read it back. A refusal or a different value
        read back leaves the drive unprotected: recorded in ``unprotected`` and refused at enable
        (unless ``allow_unprotected``). The master heartbeat is sent only when confirmed."""
        s = self.settings
        entry = s.master_node_id << 16 | round(s.heartbeat_timeout_s * 1000)
        self._master_heartbeat = self._guarding = False
        self.unprotected = self.protection = ""
        self._inbox.expect_guarding(False)
        try:
            self._sdo_write(OD_CONSUMER_HEARTBEAT, 1, struct.pack("<I", entry), "consumer heartbeat")
            read_back = self._sdo_read(OD_CONSUMER_HEARTBEAT, 1, "<I", "consumer heartbeat")
        except CommunicationError:
            raise
        except BackendError as err:
            self.unprotected = f"the drive refused the heartbeat consumer ({str(err).removeprefix(self._where + ': ')})"
            return
        if read_back != entry:
            self.unprotected = (f"heartbeat consumer 0x1016:01 reads back 0x{read_back:08X} after "
                                f"writing 0x{entry:08X} (master node {s.master_node_id}, "
                                f"{round(s.heartbeat_timeout_s * 1000)} ms)")
            return
        self._master_heartbeat = True
        self.protection = "heartbeat consumer"

    def _configure_life_guarding(self) -> None:
        """Without a heartbeat consumer: guard time 0x100C = heartbeat_period_s and life time
        factor 0x100D = ⌈heartbeat_timeout_s/heartbeat_period_s⌉ (the drive faults when no guard
        request came for their product, at least heartbeat_timeout_s), each written and read
        back. A refusal or another value read back keeps the drive unprotected, both reasons
        in ``unprotected``."""
        s = self.settings
        guard_ms = round(s.heartbeat_period_s * 1000)
        factor = math.ceil(s.heartbeat_timeout_s * 1000 / guard_ms - 1e-9)
        if not 0 < guard_ms <= 0xFFFF or not 0 < factor <= 0xFF:
            self.unprotected += (f"; life guarding: guard time {guard_ms} ms × factor {factor} "
                                 f"does not fit 0x100C (u16) / 0x100D (u8)")
            return
        try:
            self._sdo_write(OD_GUARD_TIME, 0, struct.pack("<H", guard_ms), "guard time")
            self._sdo_write(OD_LIFE_TIME_FACTOR, 0, struct.pack("<B", factor), "life time factor")
            read_back = (self._sdo_read(OD_GUARD_TIME, 0, "<H", "guard time"),
                         self._sdo_read(OD_LIFE_TIME_FACTOR, 0, "<B", "life time factor"))
        except CommunicationError:
            raise
        except BackendError as err:
            self.unprotected += f"; life guarding refused ({str(err).removeprefix(self._where + ': ')})"
            return
        if read_back != (guard_ms, factor):
            self.unprotected += (f"; life guarding 0x100C/0x100D read back {read_back[0]} ms × "
                                 f"{read_back[1]} after writing {guard_ms} ms × {factor}")
            return
        self._guarding = True
        self.unprotected = ""
        self.protection = "life guarding"

    def _configure_pdos(self) -> None:
        """The PDOs of ``mapping`` (``drive.tpdo`` / ``drive.rpdo``), transmission type 1; the
        other pre-defined PDOs invalid; then each mapped PDO read back (:meth:`_check_pdos`). The
        cyclic frames then bypass the canopen PDO objects (unsubscribed)."""
        node, net = self._node, self._network
        assert node is not None and net is not None
        for kind, maps in (("tpdo", node.tpdo), ("rpdo", node.rpdo)):
            pdo_maps = maps.map
            assert pdo_maps is not None  # canopen builds the maps with the node
            for n, pdo in pdo_maps.items():
                if pdo.predefined_cob_id is None:
                    continue  # beyond the pre-defined set: leave as is
                layout = self.mapping.layout(kind, n)
                pdo.clear()
                pdo.cob_id = pdo.predefined_cob_id
                pdo.rtr_allowed = False
                pdo.enabled = layout is not None
                pdo.trans_type = PDO_TRANSMISSION_SYNC if layout else None
                fields = layout.fields if layout is not None else ()
                for f in fields:
                    if pdo.add_variable(f.index, f.subindex, f.bits) is None:
                        raise BackendError(f"{self._where}: {kind.upper()}{n}: object 0x{f.index:04X} "
                                           f"is not in the object dictionary")
                with self._translating(f"{kind.upper()}{n} configuration"):
                    pdo.save()
                if pdo.enabled:
                    net.unsubscribe(pdo.cob_id, pdo.on_message)
        self._check_pdos()

    def _check_pdos(self) -> None:
        """Read back every mapped PDO (COB-ID valid, transmission type, mapping entries) over
        SDO; a drive that kept another mapping is refused with one line naming PDO and entry."""
        for kind, comm, mapping_base, layouts in (("tpdo", 0x1800, 0x1A00, self.mapping.tpdos),
                                                  ("rpdo", 0x1400, 0x1600, self.mapping.rpdos)):
            for n, layout in enumerate(layouts):
                cob_id = self._sdo_read(comm + n, 1, "<I", f"{layout.name} COB-ID")
                if cob_id & PDO_COB_ID_INVALID:
                    raise BackendError(f"{self._where}: {layout.name} reads back invalid "
                                       f"(COB-ID 0x{cob_id:08X}) after enabling it")
                trans = self._sdo_read(comm + n, 2, "<B", f"{layout.name} transmission type")
                if trans != PDO_TRANSMISSION_SYNC:
                    raise BackendError(f"{self._where}: {layout.name} transmission type reads back "
                                       f"{trans}, configured {PDO_TRANSMISSION_SYNC} (every SYNC)")
                count = self._sdo_read(mapping_base + n, 0, "<B", f"{layout.name} mapping count")
                entries = tuple(self._sdo_read(mapping_base + n, k, "<I", f"{layout.name} entry {k}")
                                for k in range(1, min(count, 8) + 1))
                mismatch = readback_mismatch(layout, entries)
                if mismatch:
                    raise BackendError(f"{self._where}: PDO mapping not as configured: {mismatch}")

    def _confirm_operational(self) -> None:
        s = self.settings
        if self._inbox.wait_heartbeat(lambda st: st == HB_OPERATIONAL, s.heartbeat_timeout_s):
            return
        if self._inbox.heartbeats == 0:
            raise CommunicationError(
                f"{self._where}: no heartbeat within {s.heartbeat_timeout_s} s after setting its "
                f"producer time 0x1017 to {round(s.heartbeat_period_s * 1000)} ms: refused "
                f"(a node that sends no heartbeat cannot be supervised)")
        state = HB_STATE_NAMES.get(self._inbox.hb_state or 0, f"0x{self._inbox.hb_state:02X}")
        raise CommunicationError(f"{self._where}: still {state} {s.heartbeat_timeout_s} s after NMT start")

    def _release(self) -> None:
        net = self._network
        if net is not None:
            if net.notifier is not None:
                with contextlib.suppress(ValueError):
                    net.notifier.remove_listener(self._inbox)
            node_id = self._node.id if self._node is not None else None
            if node_id is not None and net.nodes.get(node_id) is self._node:
                del net[node_id]
            try:
                if self._owns_connection:
                    net.disconnect()
                elif self._owns_notifier and net.notifier is not None:
                    net.notifier.stop()
            except (can.CanError, OSError) as err:
                log.warning("%s: releasing the bus: %s", self._where, err)
        self._network = self._bus = self._node = None
        self._owns_connection = self._owns_notifier = False

    # --- SDO helpers (configuration only) --------------------------------------------------------
    @contextlib.contextmanager
    def _translating(self, what: str) -> Iterator[None]:
        try:
            yield
        except SdoCommunicationError as err:
            raise CommunicationError(f"{self._where}: {what}: no SDO response ({err})") from err
        except SdoAbortedError as err:
            raise BackendError(f"{self._where}: {what}: SDO abort {err}") from err
        except (can.CanError, OSError) as err:
            raise CommunicationError(f"{self._where}: {what}: {err}") from err

    def _sdo_read(self, index: int, subindex: int, fmt: str, what: str) -> int:
        assert self._node is not None
        with self._translating(f"reading {what} 0x{index:04X}:{subindex:02X}"):
            data = self._node.sdo.upload(index, subindex)
        size = struct.calcsize(fmt)
        if len(data) < size:
            raise ProtocolError(f"{self._where}: SDO 0x{self._ids.sdo_tx:03X}: {what} 0x{index:04X}:"
                                f"{subindex:02X}: {len(data)} bytes, byte {len(data)} of {size} missing")
        return struct.unpack_from(fmt, data)[0]

    def _sdo_write(self, index: int, subindex: int, data: bytes, what: str) -> None:
        assert self._node is not None
        with self._translating(f"writing {what} 0x{index:04X}:{subindex:02X}"):
            self._node.sdo.download(index, subindex, data)

    # --- the cyclic exchange ---------------------------------------------------------------------
    def _send(self, cob_id: int, data: bytes) -> None:
        self._send_msg(can.Message(arbitration_id=cob_id, data=data, is_extended_id=False))

    def _send_msg(self, msg: can.Message) -> None:
        if self._bus is None:
            raise CommunicationError(f"{self._where}: not connected")
        try:
            self._bus.send(msg)
        except (can.CanError, OSError) as err:
            raise CommunicationError(f"{self._where}: send 0x{msg.arbitration_id:03X}: {err}") from err

    def _exchange(self) -> Optional[tuple[bytes, ...]]:
        """SYNC, then the mapped TPDOs or None after ``timeout_s``. The master heartbeat rides on
        the tick so that a stopped loop stops it."""
        self._inbox.arm()
        if self._guarding:  # before SYNC: the answer is usually filed before the TPDOs
            now = time.monotonic()
            if now >= self._next_master_hb_s:
                if now - self._last_guard_s > self.settings.heartbeat_timeout_s:
                    self._guard_since_s = now  # (re)started: the answer is due from now on
                self._send_msg(self._guard_msg)
                self._last_guard_s = now
                self._next_master_hb_s = now + self.settings.heartbeat_period_s
        self._send_msg(self._sync_msg)
        if self._master_heartbeat:
            now = time.monotonic()
            if now >= self._next_master_hb_s:
                self._send_msg(self._hb_msg)
                self._next_master_hb_s = now + self.settings.heartbeat_period_s
        return self._inbox.wait_set(self.settings.timeout_s)

    def _poll(self, controlword: int) -> Optional[PowerState]:
        """One exchange outside the tick: RPDO (zero torque, ``controlword``), SYNC, TPDOs."""
        self._send_rpdos(0, controlword)
        payloads = self._exchange()
        self._drain_emcy()
        if payloads is not None:
            self._ingest(payloads)
            return self._power
        return None

    def _drive_until(self, controlword: int, done: Callable[[Optional[PowerState]], bool],
                     timeout_s: float, fault_ok: bool = False) -> Optional[PowerState]:
        """Exchange with ``controlword`` until ``done(state)`` or ``timeout_s`` (real time);
        returns the last state seen. Raises DriveFaultError on a fault unless ``fault_ok``."""
        deadline = time.monotonic() + timeout_s
        last: Optional[PowerState] = None
        while True:
            state = self._poll(controlword)
            if state is not None:
                last = state
            if done(state):
                return state
            if not fault_ok:
                self._raise_if_fault()
            if time.monotonic() >= deadline:
                return last

    def _enable_steps(self, timeout_s: float) -> None:
        """Walk :data:`ENABLE_STEPS` one transition at a time, each confirmed by the statusword
        within ``timeout_s``."""
        self._check_link()
        self._raise_if_fault()
        state = self._drive_until(self._cw, lambda s: s is not None, timeout_s)
        if state is None:
            raise EnableError(f"{self._where}: no TPDO within {timeout_s} s of SYNC")
        for _ in range(4 * len(ENABLE_STEPS)):  # bounded even if the drive bounces between states
            if state is PowerState.OPERATION_ENABLED:
                self._cw = CW_ENABLE_OPERATION
                return
            step = ENABLE_STEPS[state]
            if step.explicit_only:
                self._raise_if_fault()
                raise DriveFaultError(f"{self._where}: drive in {state.value}; reset_fault() first")
            self._cw = step.controlword
            before = state
            seen = self._drive_until(step.controlword, functools.partial(_left, before),
                                     timeout_s)
            if seen is None or seen is before:
                what = f"transition {step.transition}" if step.transition else "the drive's own transition"
                raise EnableError(f"{self._where}: stuck in {before.value} for {timeout_s} s with "
                                  f"controlword 0x{step.controlword:04X} (waiting for {what})")
            state = seen
        raise EnableError(f"{self._where}: no OPERATION ENABLED after {4 * len(ENABLE_STEPS)} transitions")

    # --- feedback --------------------------------------------------------------------------------
    def _check_link(self) -> None:
        net = self._network
        if net is None:
            raise CommunicationError(f"{self._where}: not connected")
        if net.notifier is not None and net.notifier.exception is not None:
            err = net.notifier.exception
            raise CommunicationError(f"{self._where}: CAN receive thread stopped: {err}") from err
        inbox = self._inbox
        if inbox.bus_off:
            raise CommunicationError(f"{self._where}: bus off (error frame: {inbox.last_error_frame})")
        now = time.monotonic()
        seen = inbox.hb_monotonic_s
        if self._guarding:  # the drive answers when asked: due only after a recent request
            if now - self._last_guard_s > self.settings.heartbeat_timeout_s:
                seen = now  # not asked lately (ticks paused): this tick's request restarts it
            elif self._guard_since_s > seen:  # asked since guarding resumed, not answered yet
                seen = self._guard_since_s
        age = now - seen
        if age > self.settings.heartbeat_timeout_s:
            what = "answer to node guarding" if self._guarding else "heartbeat"
            raise CommunicationError(f"{self._where}: no {what} for {age:.3f} s "
                                     f"(limit {self.settings.heartbeat_timeout_s} s)")
        if inbox.hb_state != HB_OPERATIONAL:
            state = HB_STATE_NAMES.get(inbox.hb_state or 0, f"0x{inbox.hb_state:02X}")
            raise CommunicationError(f"{self._where}: node left OPERATIONAL (heartbeat: {state})")

    def _drain_emcy(self) -> None:
        while self._inbox.emcy:
            data = self._inbox.emcy.popleft()
            try:
                emcy = decode_emcy(data, self._ids.emcy)
            except ProtocolError as err:
                log.error("%s: %s", self._where, err)
                continue
            if emcy.is_reset:
                log.info("%s: drive reports error reset", self._where)
            elif self._fault is None:
                log.error("%s: %s", self._where, emcy.text)
                self._fault = emcy  # the first is the cause; later ones are logged only
            else:
                log.error("%s: further %s", self._where, emcy.text)

    def _ingest(self, payloads: tuple[bytes, ...]) -> None:
        values = self.mapping.decode(payloads, self.settings.node_id)
        position, statusword = values["position_actual"], values["statusword"]
        try:
            self._power = decode_statusword(statusword)
        except ProtocolError as err:
            raise ProtocolError(f"{self.mapping.where('statusword', self.settings.node_id)}: {err}") from err
        self._statusword = statusword
        if self._raw_position is None:
            self._position_counts = position
        else:
            self._position_counts += i32_delta(self._raw_position, position)
        self._raw_position = position
        if "current_actual" in values:
            self._current_a = from_permille(values["current_actual"], self.rated_current_a)
        if "torque_actual" in values:
            self._torque_nm = from_permille(values["torque_actual"], self.rated_torque_nm)
        self._sequence += 1
        self._t_sample_s = self._clock.now()

    def _raise_if_fault(self) -> None:
        if self._fault is not None or (self._power is not None and self._power.is_fault):
            raise DriveFaultError(f"{self._where}: {self._fault_text()}",
                                  self._fault.code if self._fault else 0)

    def _fault_text(self) -> str:
        if self._fault is not None:
            return self._fault.text
        if self._power is not None and self._power.is_fault:
            return f"{self._power.value} (statusword 0x{self._statusword:04X}) without EMCY"
        return ""

    def _drive_state(self) -> DriveState:
        if self._fault is not None or (self._power is not None and self._power.is_fault):
            return DriveState.FAULT
        if self._power is PowerState.OPERATION_ENABLED:
            return DriveState.ENABLED if self.enabled else DriveState.ENABLING
        return DriveState.DISABLED

    def _feedback(self) -> Feedback:
        now = self._clock.now()
        state = self._drive_state()
        fault_code = self._fault.code if self._fault else 0
        if self._sequence == 0:
            return Feedback(now, NAN, NAN, NAN, NAN, state, fault_code, self._fault_text(),
                            sequence=0, age_s=math.inf)
        return Feedback(
            t_s=now,
            position_rad=counts_to_rad(self._position_counts, self.settings.counts_per_rev),
            velocity_rad_s=NAN,  # not mapped: 0x606C units depend on the drive's factor group
            current_a=self._current_a,
            torque_nm=self._torque_nm,
            state=state,
            fault_code=fault_code,
            fault_text=self._fault_text(),
            sequence=self._sequence,
            age_s=now - self._t_sample_s,
        )
