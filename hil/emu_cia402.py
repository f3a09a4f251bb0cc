"""An emulated CiA 402 servo drive on a python-can bus, with the simulated turntable behind it.

The drive is a canopen LocalNode (object dictionary from an EDS, or the driver's minimal one):
the library gives the SDO server, NMT slave, heartbeat producer and EMCY producer. What a
LocalNode does not do, this module does, as a real drive would:

- answers SYNC with the TPDOs the master mapped (read from 0x1800+n / 0x1A00+n at NMT start),
- applies received RPDOs (0x1400+n / 0x1600+n) at the next SYNC (transmission type 1..240) or at
  once (254/255); a too-short RPDO is refused with EMCY 0x8210,
- runs the CiA 402 power state machine (``drive_step``) on the controlword, refuses
  mapping entries that are not mappable (SDO abort 0x06040041 / 0x06040042),
- turns target torque (‰ of rated torque 0x6076) into a current command for the plant while
  OPERATION ENABLED in CST, and reports position 0x6064 [counts, i32 wrapping], current 0x6078
  and torque 0x6077 [‰],
- watches the master heartbeat when 0x1016 is configured (after the first one arrives): a lapse
  is EMCY 0x8130 in any state, and FAULT while the power stage is on (``supervision_lapses``
  counts them; 0x1016:01 written 0 stops the watch); leaving NMT OPERATIONAL while powered
  disables the voltage. ``heartbeat_consumer`` makes it a drive that refuses 0x1016 (SDO abort)
  or one that acknowledges the write but ignores it (0 reads back), to test the driver's refusal,
- answers node guarding (a remote frame on 0x700 + node id: its NMT state, bit 7 toggling) while
  its heartbeat producer 0x1017 is 0, as CiA 301 has it, and runs life guarding once the first
  guard request came with guard time 0x100C and life time factor 0x100D both set: no request
  for their product is a lapse as above (0x100D written 0 stops it). ``node_guarding="refused"`` aborts
  writes of 0x100C/0x100D (a drive without it).

Modes: ``lockstep`` — the plant advances exactly one ``period_s`` per SYNC (after the TPDOs of
that SYNC are sent: the sample is taken at SYNC, the torque applied at SYNC acts over the next
period; the heartbeat consumer still runs on the monotonic clock, as on a drive); ``realtime`` — a thread advances the plant every ``period_s`` of real time and SYNC
only samples it.

Fault injection: :meth:`drop_next`, :meth:`delay_next`, :meth:`inject_fault`,
:meth:`send_error_frame`, :meth:`send_remote_frame`, :meth:`ignore_disable`,
:meth:`stop_heartbeat` (and ``silent=True``: never a heartbeat); :meth:`coast` runs the plant
on after the host went quiet.
``capture_path`` records every frame on the channel through ``can.Logger`` (format by extension:
``.log`` candump, ``.asc``, ...).
"""

from __future__ import annotations

import collections
import enum
import logging
import struct
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Optional

import can
import canopen
from canopen.nmt import NMT_STATES
from canopen.objectdictionary import ODVariable, import_od
from canopen.sdo import SdoAbortedError

from controller.config import PlantConfig
from drivers.errors import ProtocolError
from drivers.cia402 import minimal_object_dictionary
from drivers.cia402_protocol import (
    AUTOMATIC_TRANSITIONS, CAN_ERR_PROT, MODE_CST, OD_CONSUMER_HEARTBEAT, OD_CONTROLWORD, OD_CURRENT_ACTUAL,
    OD_ERROR_REGISTER, OD_GUARD_TIME, OD_LIFE_TIME_FACTOR, OD_MODES_OF_OPERATION, OD_MODES_OF_OPERATION_DISPLAY, OD_POSITION_ACTUAL,
    OD_PRODUCER_HEARTBEAT, OD_RATED_CURRENT, OD_RATED_TORQUE, OD_STATUSWORD, OD_TARGET_TORQUE,
    OD_TORQUE_ACTUAL, PDO_COB_ID_INVALID, SW_INTERNAL_LIMIT, SW_REMOTE, SW_VOLTAGE_ENABLED,
    SYNC_COB_ID, NMT_COB_ID, HEARTBEAT_BASE, CobIds, PowerState, decode_mapping_entry, drive_step,
    encode_emcy, encode_statusword, error_register_for, from_permille, to_permille, wrap_i32,
)
from hil.plant import PlantMeasurement, Turntable

log = logging.getLogger(__name__)

_POWERED = (PowerState.OPERATION_ENABLED, PowerState.QUICK_STOP_ACTIVE, PowerState.SWITCHED_ON)
_SDO_ABORT_NOT_MAPPABLE = 0x06040041
_SDO_ABORT_PDO_TOO_LONG = 0x06040042
_EMCY_PDO_LENGTH = 0x8210
_EMCY_HEARTBEAT = 0x8130
_NOTIFIER_CYCLE_S = 0.05  # receive-thread wake-up: bounds how long close() waits for it [s]
_SDO_ABORT_READ_ONLY = 0x06010002
_CONSUMER_POLL_S = 0.01  # LOCKSTEP: heartbeat consumer check period [s]
_CONSUMER_MODES = ("supported", "refused", "ignored")
_GUARDING_MODES = ("supported", "refused")
_NMT_CODES = {name: code for code, name in NMT_STATES.items()}  # "OPERATIONAL" → 5, ...


class _GuardListener(can.Listener):
    """Remote frames on the node's own 0x700 + id (the Network's listener drops remote
    frames): node guarding requests, handed to the emulator."""

    def __init__(self, cob_id: int, on_request: Callable[[], None]) -> None:
        self._cob_id, self._on_request = cob_id, on_request

    def on_message_received(self, msg: can.Message) -> None:
        if msg.is_remote_frame and msg.arbitration_id == self._cob_id and not msg.is_extended_id:
            self._on_request()


class _NullTask:
    """Stands in for a periodic send that a silenced emulator must not make."""

    def stop(self) -> None:
        pass

    def update(self, data: bytes) -> None:
        pass


class _EmulatorNetwork(canopen.Network):
    """A Network whose periodic sends (the NMT slave's heartbeat) can be silenced by COB-ID:
    a silenced node never sends a heartbeat, not even the first one."""

    def __init__(self, bus: can.BusABC) -> None:
        super().__init__(bus)
        self.silenced: set[int] = set()

    def send_periodic(self, can_id: int, data: bytes, period: float, remote: bool = False):
        if can_id in self.silenced:
            return _NullTask()
        return super().send_periodic(can_id, data, period, remote)


class EmulatorMode(enum.Enum):
    LOCKSTEP = "lockstep"  # one plant period per SYNC
    REALTIME = "realtime"  # the plant runs on the real clock


@dataclass(frozen=True, slots=True)
class _PdoChannel:
    """One valid PDO as the master configured it: COB-ID, transmission type, mapped objects."""

    cob_id: int
    trans_type: int
    entries: tuple[tuple[int, int, struct.Struct], ...]  # (index, subindex, codec)

    @property
    def size(self) -> int:
        return sum(codec.size for _, _, codec in self.entries)


class Cia402Emulator:
    """A CiA 402 drive in CST on ``interface``/``channel`` (virtual by default), node ``node_id``.

    Rated current [A] and rated torque [N·m] override the object dictionary's 0x6075/0x6076.
    Use as a context manager, or ``start()`` / ``close()``.
    """

    def __init__(self, plant: PlantConfig, *, channel: str, interface: str = "virtual",
                 node_id: int = 32, eds_path: Optional[str | Path] = None,
                 mode: EmulatorMode | str = EmulatorMode.LOCKSTEP, period_s: float = 0.001,
                 rated_current_a: Optional[float] = None, rated_torque_nm: Optional[float] = None,
                 silent: bool = False, capture_path: Optional[str | Path] = None, seed: int = 0,
                 heartbeat_consumer: str = "supported", node_guarding: str = "supported",
                 fixed_pdo_mapping: Optional[dict[int, tuple[int, ...]]] = None) -> None:
        """``heartbeat_consumer``: ``supported`` (0x1016 as the object dictionary has it),
        ``refused`` (a write of 0x1016 is aborted, as by a drive without a consumer) or
        ``ignored`` (the write is acknowledged but nothing is stored or watched: 0 reads back).
        ``node_guarding``: ``supported`` (0x100C/0x100D as the object dictionary has them) or
        ``refused`` (their writes are aborted).
        ``fixed_pdo_mapping``: mapping index (0x1600+n / 0x1A00+n) → entries the drive keeps
        whatever the master writes (writes acknowledged; reads and the PDOs it sends use these)."""
        if period_s <= 0:
            raise ValueError(f"period_s: must be > 0, got {period_s}")
        if heartbeat_consumer not in _CONSUMER_MODES:
            raise ValueError(f"heartbeat_consumer: one of {', '.join(_CONSUMER_MODES)}, got {heartbeat_consumer!r}")
        self._consumer_mode = heartbeat_consumer
        if node_guarding not in _GUARDING_MODES:
            raise ValueError(f"node_guarding: one of {', '.join(_GUARDING_MODES)}, got {node_guarding!r}")
        self._guarding_mode = node_guarding
        self._fixed_mapping = dict(fixed_pdo_mapping or {})
        self.mode = EmulatorMode(mode)
        self.period_s = period_s
        self.ids = CobIds(node_id)
        self.plant = Turntable(plant, seed=seed)
        self._interface, self._channel = interface, channel
        self._eds_path = eds_path
        self._rated_overrides = (rated_current_a, rated_torque_nm)
        self._silent = silent
        self._capture_path = capture_path
        self._lock = threading.RLock()
        self._changed = threading.Condition(self._lock)
        self._started = False
        self._network: Optional[_EmulatorNetwork] = None
        self.node: Optional[canopen.LocalNode] = None
        self._capture: Optional[tuple[can.BusABC, can.Notifier]] = None
        self._stop = threading.Event()
        self._plant_thread: Optional[threading.Thread] = None
        self._timers: list[threading.Timer] = []
        # drive state (guarded by _lock)
        self._state = PowerState.NOT_READY_TO_SWITCH_ON
        self._cw = 0  # controlword in force
        self._cw_prev = 0  # controlword at the previous evaluation (for the bit-7 edge)
        self._target_pm = 0  # target torque [‰ of rated torque]
        self._op_mode = 0  # 0x6060
        self.error_register = 0
        self._rated_current_a = 1.0
        self._rated_torque_nm = 1.0
        self._sample = PlantMeasurement(0.0, 0, 0.0)
        self._sample_friction_nm = 0.0  # the plant's true friction when _sample was taken
        self._limited = False
        self._operational = False
        self._pdo_dirty = True
        self._tpdos: tuple[_PdoChannel, ...] = ()
        self._rpdos: dict[int, _PdoChannel] = {}
        self._pending_rpdo: dict[int, bytes] = {}
        self._drop = 0
        self._delays: collections.deque[float] = collections.deque()
        self._consumer: Optional[tuple[int, float]] = None  # (master node id, time [s])
        self._master_hb_s: Optional[float] = None  # monotonic time of the last master heartbeat
        self._consumer_expired = False
        self._guard_time_ms = 0  # 0x100C
        self._life_factor = 0  # 0x100D
        self._producer_ms = 0  # 0x1017 (node guarding is answered only while it is 0)
        self._guard_s: Optional[float] = None  # monotonic time of the last guard request
        self._life_expired = False
        self._toggle = 0  # bit 7 of the next guarding answer
        self._ignore_disable = False  # fault injection: OPERATION ENABLED is never left on command
        self._live: dict[int, Callable[[], int]] = {
            OD_STATUSWORD: lambda: self.statusword,
            OD_CONTROLWORD: lambda: self._cw,
            OD_POSITION_ACTUAL: lambda: wrap_i32(self._sample.position_counts),
            OD_CURRENT_ACTUAL: self._current_permille,
            OD_TORQUE_ACTUAL: self._torque_permille,
            OD_TARGET_TORQUE: lambda: self._target_pm,
            OD_MODES_OF_OPERATION: lambda: self._op_mode,
            OD_MODES_OF_OPERATION_DISPLAY: lambda: self._op_mode,
            OD_ERROR_REGISTER: lambda: self.error_register,
        }
        # counters
        self.sync_count = 0
        self.tpdo_sent = 0
        self.tpdo_dropped = 0
        self.master_heartbeats = 0
        self.guard_requests = 0
        self.supervision_lapses = 0  # heartbeat-consumer or life-guarding lapses (EMCY 0x8130)
        self.overruns = 0  # realtime: plant periods started late

    # --- lifecycle -------------------------------------------------------------------------------
    def __enter__(self) -> "Cia402Emulator":
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def start(self) -> None:
        if self._started:
            return
        self._started = True
        self._stop.clear()
        try:
            self._start()
        except BaseException:
            self.close()
            raise

    def _start(self) -> None:
        if self._capture_path is not None:
            cap_bus = can.Bus(interface=self._interface, channel=self._channel)
            logger = can.Logger(str(self._capture_path))
            self._capture = (cap_bus, can.Notifier(cap_bus, [logger], timeout=_NOTIFIER_CYCLE_S))
        net = _EmulatorNetwork(can.Bus(interface=self._interface, channel=self._channel))
        if self._silent:
            net.silenced.add(self.ids.heartbeat)
        net.NOTIFIER_CYCLE = _NOTIFIER_CYCLE_S
        self._network = net
        net.connect()
        assert net.notifier is not None
        net.notifier.add_listener(_GuardListener(self.ids.heartbeat, self._on_guard_request))
        node_id = self.ids.node_id
        od = import_od(str(self._eds_path), node_id) if self._eds_path else minimal_object_dictionary(node_id)
        node = net.create_node(node_id, od)
        self.node = node
        node.add_read_callback(self._on_sdo_read)
        node.add_write_callback(self._on_sdo_write)
        current_a, torque_nm = self._rated_overrides
        if current_a is not None:
            node.sdo.download(OD_RATED_CURRENT, 0, struct.pack("<I", round(current_a * 1000)))
        if torque_nm is not None:
            node.sdo.download(OD_RATED_TORQUE, 0, struct.pack("<I", round(torque_nm * 1000)))
        self._rated_current_a = self._read_u(OD_RATED_CURRENT, 0) / 1000.0
        self._rated_torque_nm = self._read_u(OD_RATED_TORQUE, 0) / 1000.0
        self._guard_time_ms = self._read_u(OD_GUARD_TIME, 0)
        self._life_factor = self._read_u(OD_LIFE_TIME_FACTOR, 0)
        self._producer_ms = self._read_u(OD_PRODUCER_HEARTBEAT, 0)
        mode = od.get_variable(OD_MODES_OF_OPERATION)
        self._op_mode = int(mode.value if mode.value is not None else mode.default or 0) if mode else 0
        net.subscribe(SYNC_COB_ID, self._on_sync)
        net.subscribe(NMT_COB_ID, self._on_nmt)  # after the NmtSlave's own subscription
        node.nmt.state = "INITIALISING"  # boot-up frame
        node.nmt.state = "PRE-OPERATIONAL"  # starts the heartbeat if 0x1017 is set
        # REALTIME: the plant thread also runs the drive's own timers; LOCKSTEP: a thread for the
        # heartbeat consumer alone (a real drive checks it on its own clock, SYNC or not)
        target = self._run_realtime if self.mode is EmulatorMode.REALTIME else self._run_consumer
        self._plant_thread = threading.Thread(target=target, name="cia402-emu-timers", daemon=True)
        self._plant_thread.start()

    def close(self) -> None:
        """Stop every thread and release the buses. Safe to call twice."""
        if not self._started:
            return
        self._started = False
        self._stop.set()
        if self._plant_thread is not None:
            self._plant_thread.join()
            self._plant_thread = None
        for timer in self._timers:
            timer.cancel()
        for timer in self._timers:
            timer.join()
        self._timers.clear()
        if self.node is not None:
            self.node.nmt.stop_heartbeat()
        if self._network is not None:
            self._network.disconnect()
            self._network = None
        if self._capture is not None:
            cap_bus, notifier = self._capture
            notifier.stop()
            cap_bus.shutdown()
            self._capture = None

    # --- observation -----------------------------------------------------------------------------
    @property
    def state(self) -> PowerState:
        return self._state

    @property
    def statusword(self) -> int:
        extra = SW_REMOTE
        if self._state in _POWERED or self._state is PowerState.READY_TO_SWITCH_ON:
            extra |= SW_VOLTAGE_ENABLED
        if self._limited:
            extra |= SW_INTERNAL_LIMIT
        return encode_statusword(self._state, extra)

    @property
    def controlword(self) -> int:
        return self._cw

    @property
    def target_torque_permille(self) -> int:
        return self._target_pm

    @property
    def operational(self) -> bool:
        """NMT OPERATIONAL (PDOs exchanged)."""
        return self._operational

    @property
    def silent(self) -> bool:
        return self._silent

    def sampled_friction_nm(self) -> float:
        """The plant's true friction at the last SYNC's sample: what the TPDO the driver holds
        describes (the plant goes on to advance over the next period in this thread)."""
        with self._lock:
            return self._sample_friction_nm

    def wait_until(self, predicate: Callable[["Cia402Emulator"], bool], timeout_s: float) -> bool:
        """Wait (without polling) until ``predicate(self)`` holds; checked after every SYNC and
        state change. False after ``timeout_s``."""
        with self._changed:
            return self._changed.wait_for(lambda: predicate(self), timeout_s)

    # --- fault injection -------------------------------------------------------------------------
    def drop_next(self, n: int = 1) -> None:
        """Answer the next ``n`` SYNCs with no TPDO."""
        with self._lock:
            self._drop += n

    def delay_next(self, n: int, delay_s: float) -> None:
        """Send the TPDOs of the next ``n`` SYNCs ``delay_s`` late."""
        with self._lock:
            self._delays.extend([delay_s] * n)

    def inject_fault(self, emcy_code: int = 0x2310, vendor: bytes = b"") -> None:
        """An internal fault: EMCY frame now, FAULT REACTION ACTIVE (13), FAULT at the next SYNC (14)."""
        with self._lock:
            self._fault(emcy_code, vendor)

    def send_error_frame(self, error_class: int = CAN_ERR_PROT, data: bytes = bytes(8)) -> None:
        """An error frame on the bus; ``error_class`` carries SocketCAN's class bits (CAN_ERR_*)."""
        self._send_message(can.Message(arbitration_id=error_class, data=data, is_error_frame=True,
                                       is_extended_id=False))

    def ignore_disable(self) -> None:
        """From now on OPERATION ENABLED is not left on a controlword (a drive that does not obey
        the disable: its statusword keeps saying so); faults still stop it."""
        with self._lock:
            self._ignore_disable = True

    def send_remote_frame(self, cob_id: int, dlc: int = 1) -> None:
        """A remote frame (RTR) on ``cob_id`` from another node on the bus, e.g. a node-guarding
        request on 0x700 + node id."""
        self._send_message(can.Message(arbitration_id=cob_id, is_remote_frame=True, dlc=dlc,
                                       is_extended_id=False))

    def coast(self, periods: int) -> tuple[float, float]:
        """Advance the plant ``periods`` periods as the drive now drives it, with no host traffic
        (after a run: the current it still applies, or none when disabled); (|speed| at the
        start, peak |speed| on the way) [rad/s]."""
        with self._changed:
            start = peak = abs(self.plant.omega_rad_s)
            for _ in range(periods):
                self.plant.advance(self._current_command_a(), self.period_s)
                peak = max(peak, abs(self.plant.omega_rad_s))
            self._changed.notify_all()
        return start, peak

    def stop_heartbeat(self) -> None:
        """Stop the heartbeat now and for good (a later 0x1017 write does not restart it)."""
        self._silent = True
        if self._network is not None:
            self._network.silenced.add(self.ids.heartbeat)
        if self.node is not None:
            self.node.nmt.stop_heartbeat()

    # --- state machine ---------------------------------------------------------------------------
    def _set_state(self, state: PowerState, transition: Optional[int]) -> None:
        if state is self._state:
            return
        log.debug("emulated drive %d: %s → %s (transition %s)", self.ids.node_id, self._state.value,
                  state.value, transition)
        self._state = state
        if transition == 15:
            self.error_register = 0
            self._send(self.ids.emcy, encode_emcy(0x0000, 0))
        self._changed.notify_all()

    def _step_state(self) -> None:
        state, transition = drive_step(self._state, self._cw_prev, self._cw)
        self._cw_prev = self._cw
        if (self._ignore_disable and self._state is PowerState.OPERATION_ENABLED
                and not state.is_fault):
            return  # injected: the disable is not obeyed
        if transition is not None:
            self._set_state(state, transition)

    def _emcy(self, code: int, vendor: bytes = b"") -> None:
        self.error_register = error_register_for(code)
        self._send(self.ids.emcy, encode_emcy(code, self.error_register, vendor))

    def _fault(self, code: int, vendor: bytes = b"") -> None:
        self._emcy(code, vendor)
        if not self._state.is_fault:
            self._set_state(PowerState.FAULT_REACTION_ACTIVE, 13)

    def _current_command_a(self) -> float:
        if self._state is PowerState.OPERATION_ENABLED and self._op_mode == MODE_CST:
            i_cmd = from_permille(self._target_pm, self._rated_torque_nm) / self.plant.Kt
            self._limited = abs(i_cmd) > self.plant.cfg.current_loop.limit_a
            return i_cmd
        self._limited = False
        return 0.0

    def _check_consumer(self) -> None:
        """Heartbeat consumer and life guarding: a lapse is EMCY 0x8130 in any state (counted in
        ``supervision_lapses``), and FAULT while powered (CiA 301: the event is signalled
        whatever the power stage; what it does to the drive is the device profile's)."""
        now = time.monotonic()
        if (self._consumer is not None and self._master_hb_s is not None
                and not self._consumer_expired and now - self._master_hb_s > self._consumer[1]):
            self._consumer_expired = True
            self._lapse()
        life_s = self._guard_time_ms * self._life_factor / 1000.0
        if (self._guard_s is not None and life_s > 0.0 and self._producer_ms == 0
                and not self._life_expired and now - self._guard_s > life_s):
            self._life_expired = True
            self._lapse()

    def _lapse(self) -> None:
        self.supervision_lapses += 1
        if self._state in _POWERED:
            self._fault(_EMCY_HEARTBEAT)
        else:
            self._emcy(_EMCY_HEARTBEAT)

    # --- bus callbacks (Notifier thread) ---------------------------------------------------------
    def _on_sync(self, can_id: int, data: bytearray, timestamp: float) -> None:
        frames: list[tuple[int, bytes]] = []
        delay_s = 0.0
        with self._lock:
            self.sync_count += 1
            if self._pdo_dirty:
                self._load_pdo_channels()
            if self._operational:
                for cob_id, payload in self._pending_rpdo.items():
                    self._apply_rpdo(self._rpdos[cob_id], payload)
                self._pending_rpdo.clear()
            self._step_state()
            self._check_consumer()
            self._sample = self.plant.measure()
            self._sample_friction_nm = self.plant.friction_nm
            i_cmd = self._current_command_a()
            if self._operational and self._tpdos:
                if self._drop > 0:
                    self._drop -= 1
                    self.tpdo_dropped += 1
                else:
                    frames = [(ch.cob_id, self._pack_tpdo(ch)) for ch in self._tpdos]
                    delay_s = self._delays.popleft() if self._delays else 0.0
        if frames:
            if delay_s > 0:
                timer = threading.Timer(delay_s, self._send_frames, (frames,))
                timer.daemon = True
                self._timers = [t for t in self._timers if t.is_alive()] + [timer]
                timer.start()
            else:
                self._send_frames(frames)
        with self._lock:
            if self.mode is EmulatorMode.LOCKSTEP:
                self.plant.advance(i_cmd, self.period_s)
            self._changed.notify_all()

    def _on_rpdo(self, can_id: int, data: bytearray, timestamp: float) -> None:
        with self._lock:
            channel = self._rpdos.get(can_id)
            if channel is None or not self._operational:
                return
            if channel.trans_type <= 240:  # synchronous: applied at the next SYNC
                self._pending_rpdo[can_id] = bytes(data)
            else:
                self._apply_rpdo(channel, bytes(data))
                self._step_state()

    def _on_nmt(self, can_id: int, data: bytearray, timestamp: float) -> None:
        assert self.node is not None
        with self._lock:
            was = self._operational
            self._operational = self.node.nmt.state == "OPERATIONAL"
            if self._operational and not was:
                self._load_pdo_channels()
            if was and not self._operational:
                self._pending_rpdo.clear()
                if self._state in _POWERED or self._state is PowerState.READY_TO_SWITCH_ON:
                    self._set_state(PowerState.SWITCH_ON_DISABLED, None)  # abort connection
            self._changed.notify_all()

    def _on_guard_request(self) -> None:
        """Node guarding: answer with the NMT state and the toggle bit (not while a heartbeat
        producer runs, nor when silent); the request also feeds life guarding."""
        assert self.node is not None
        with self._lock:
            self.guard_requests += 1
            self._guard_s = time.monotonic()
            self._life_expired = False
            if self._producer_ms != 0 or self._silent:
                return
            answer = bytes([self._toggle << 7 | _NMT_CODES.get(self.node.nmt.state, 0)])
            self._toggle ^= 1
        self._send(self.ids.heartbeat, answer)

    def _on_master_heartbeat(self, can_id: int, data: bytearray, timestamp: float) -> None:
        with self._lock:
            self._master_hb_s = time.monotonic()
            self._consumer_expired = False
            self.master_heartbeats += 1

    # --- SDO callbacks ---------------------------------------------------------------------------
    def _on_sdo_read(self, index: int, subindex: int, od: Optional[ODVariable]) -> Optional[int]:
        """Live process values for SDO uploads and TPDOs; None = the data store answers."""
        if index == OD_CONSUMER_HEARTBEAT and subindex >= 1 and self._consumer_mode == "ignored":
            return 0
        fixed = self._fixed_mapping.get(index)
        if fixed is not None:
            return len(fixed) if subindex == 0 else (fixed[subindex - 1] if subindex <= len(fixed) else 0)
        live = self._live.get(index)
        if live is None:
            return None
        with self._lock:
            return live()

    def _on_sdo_write(self, index: int, subindex: int, od: ODVariable, data: bytes) -> None:
        if index == OD_CONSUMER_HEARTBEAT and self._consumer_mode == "refused":
            raise SdoAbortedError(_SDO_ABORT_READ_ONLY)
        if index in (OD_GUARD_TIME, OD_LIFE_TIME_FACTOR) and self._guarding_mode == "refused":
            raise SdoAbortedError(_SDO_ABORT_READ_ONLY)
        with self._lock:
            if 0x1600 <= index <= 0x17FF or 0x1A00 <= index <= 0x1BFF:
                self._check_mapping_write(index, subindex, data)
            if 0x1400 <= index <= 0x1BFF:
                self._pdo_dirty = True
            raw = od.decode_raw(data) if od.fixed_size else None
            value = int(raw) if isinstance(raw, (int, float)) else 0  # the objects below are integers
            if index == OD_CONTROLWORD:
                self._cw = value
                self._step_state()
            elif index == OD_TARGET_TORQUE:
                self._target_pm = value
            elif index == OD_MODES_OF_OPERATION:
                self._op_mode = value
            elif index == OD_RATED_CURRENT:
                self._rated_current_a = value / 1000.0
            elif index == OD_RATED_TORQUE:
                self._rated_torque_nm = value / 1000.0
            elif index == OD_CONSUMER_HEARTBEAT and subindex == 1 and self._consumer_mode == "supported":
                self._configure_consumer(value)
            elif index == OD_GUARD_TIME:
                self._guard_time_ms = value
            elif index == OD_LIFE_TIME_FACTOR:
                self._life_factor = value
            elif index == OD_PRODUCER_HEARTBEAT:
                self._producer_ms = value

    def _configure_consumer(self, entry: int) -> None:
        assert self._network is not None
        if self._consumer is not None:
            self._network.unsubscribe(HEARTBEAT_BASE + self._consumer[0], self._on_master_heartbeat)
        master, time_ms = entry >> 16 & 0x7F, entry & 0xFFFF
        self._consumer = (master, time_ms / 1000.0) if master and time_ms else None
        self._master_hb_s, self._consumer_expired = None, False
        if self._consumer is not None:
            self._network.subscribe(HEARTBEAT_BASE + master, self._on_master_heartbeat)

    def _check_mapping_write(self, index: int, subindex: int, data: bytes) -> None:
        """Refuse unmappable objects (0x06040041) and mappings over 64 bits (0x06040042)."""
        assert self.node is not None
        value = int.from_bytes(data, "little")
        if subindex == 0:
            bits = sum(self._read_u(index, k) & 0xFF for k in range(1, value + 1))
            if bits > 64:
                raise SdoAbortedError(_SDO_ABORT_PDO_TOO_LONG)
            return
        if value == 0:
            return
        try:
            obj_index, obj_sub, bits = decode_mapping_entry(value)
        except ProtocolError:
            raise SdoAbortedError(_SDO_ABORT_NOT_MAPPABLE) from None
        var = self.node.object_dictionary.get_variable(obj_index, obj_sub)
        if var is None or not var.pdo_mappable or len(var) != bits or bits % 8:
            raise SdoAbortedError(_SDO_ABORT_NOT_MAPPABLE)

    # --- PDOs ------------------------------------------------------------------------------------
    def _read_u(self, index: int, subindex: int) -> int:
        """An unsigned object from the data store (0 when it has no value)."""
        assert self.node is not None
        try:
            return int.from_bytes(self.node.get_data(index, subindex), "little")
        except SdoAbortedError:
            return 0

    def _load_pdo_channels(self) -> None:
        """Read the PDO configuration the master wrote (valid PDOs only)."""
        node, net = self.node, self._network
        assert node is not None and net is not None
        od = node.object_dictionary
        channels: dict[str, list[_PdoChannel]] = {"tpdo": [], "rpdo": []}
        for kind, comm, mapping in (("tpdo", 0x1800, 0x1A00), ("rpdo", 0x1400, 0x1600)):
            for n in range(4):
                if comm + n not in od or mapping + n not in od:
                    continue
                cob_id = self._read_u(comm + n, 1)
                if cob_id & PDO_COB_ID_INVALID:
                    continue
                entries = []
                for k in range(1, self._read_u(mapping + n, 0) + 1):
                    entry = self._read_u(mapping + n, k)
                    obj_index, obj_sub = entry >> 16 & 0xFFFF, entry >> 8 & 0xFF
                    var = od.get_variable(obj_index, obj_sub)
                    if var is None or var.data_type not in ODVariable.STRUCT_TYPES:
                        log.warning("emulated drive %d: 0x%04X maps 0x%04X:%02X, which it cannot "
                                    "serve; PDO ignored", self.ids.node_id, mapping + n, obj_index, obj_sub)
                        break
                    entries.append((obj_index, obj_sub, ODVariable.STRUCT_TYPES[var.data_type]))
                else:
                    channels[kind].append(_PdoChannel(cob_id & 0x7FF, self._read_u(comm + n, 2),
                                                      tuple(entries)))
        self._tpdos = tuple(channels["tpdo"])
        for cob_id in self._rpdos:
            net.unsubscribe(cob_id, self._on_rpdo)
        self._rpdos = {ch.cob_id: ch for ch in channels["rpdo"]}
        for cob_id in self._rpdos:
            net.subscribe(cob_id, self._on_rpdo)
        self._pdo_dirty = False

    def _object_value(self, index: int, subindex: int, codec: struct.Struct) -> int:
        live = self._live.get(index)
        if live is not None:
            return live()
        assert self.node is not None
        return codec.unpack(self.node.get_data(index, subindex))[0]

    def _pack_tpdo(self, channel: _PdoChannel) -> bytes:
        return b"".join(codec.pack(self._object_value(i, s, codec)) for i, s, codec in channel.entries)

    def _apply_rpdo(self, channel: _PdoChannel, payload: bytes) -> None:
        if len(payload) < channel.size:
            self._fault(_EMCY_PDO_LENGTH, bytes([len(payload)]))
            return
        offset = 0
        assert self.node is not None
        for index, subindex, codec in channel.entries:
            value = codec.unpack_from(payload, offset)[0]
            offset += codec.size
            if index == OD_CONTROLWORD:
                self._cw = value
            elif index == OD_TARGET_TORQUE:
                self._target_pm = value
            elif index == OD_MODES_OF_OPERATION:
                self._op_mode = value
            else:
                self.node.set_data(index, subindex, codec.pack(value))

    def _current_permille(self) -> int:
        return to_permille(self._sample.current_a, self._rated_current_a)

    def _torque_permille(self) -> int:
        return to_permille(self.plant.Kt * self._sample.current_a, self._rated_torque_nm)

    # --- sending ---------------------------------------------------------------------------------
    def _send(self, cob_id: int, data: bytes) -> None:
        self._send_message(can.Message(arbitration_id=cob_id, data=data, is_extended_id=False))

    def _send_message(self, msg: can.Message) -> None:
        net = self._network
        if net is None or net.bus is None:
            return  # closed: a late timer has nothing to send on
        try:
            with net.send_lock:
                net.bus.send(msg)
        except can.CanError as err:
            log.warning("emulated drive %d: send 0x%03X failed: %s", self.ids.node_id, msg.arbitration_id, err)

    def _send_frames(self, frames: list[tuple[int, bytes]]) -> None:
        for cob_id, payload in frames:
            self._send(cob_id, payload)
        with self._lock:
            self.tpdo_sent += len(frames)
            self._changed.notify_all()

    # --- the drive's own clock ----------------------------------------------------------------------
    def _run_consumer(self) -> None:
        """LOCKSTEP: check the heartbeat consumer every 10 ms of monotonic time, so a master
        that stops entirely (no SYNC either) still faults the drive within the consumer time."""
        while not self._stop.wait(_CONSUMER_POLL_S):
            with self._lock:
                self._check_consumer()
                self._changed.notify_all()

    # --- realtime plant --------------------------------------------------------------------------
    def _run_realtime(self) -> None:
        """Advance the plant every ``period_s`` of monotonic time (absolute schedule; late
        periods are caught up and counted, more than 100 behind are skipped)."""
        next_t = time.monotonic()
        while not self._stop.is_set():
            next_t += self.period_s
            lag = time.monotonic() - next_t
            if lag < 0:
                if self._stop.wait(-lag):
                    return
            elif lag > self.period_s:
                self.overruns += 1
                if lag > 100 * self.period_s:
                    next_t = time.monotonic()
            with self._lock:
                self.plant.advance(self._current_command_a(), self.period_s)
                self._check_consumer()
                if self._state in AUTOMATIC_TRANSITIONS:  # the drive's own timer, not SYNC
                    self._set_state(*AUTOMATIC_TRANSITIONS[self._state])
                self._changed.notify_all()
