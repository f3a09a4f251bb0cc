"""CANopen CiA 402 (cyclic synchronous torque) encodings: pure, I/O-free.

What is here, each pinned by golden bytes in ``tests/test_cia402.py``:

- the power state machine: statusword → :class:`PowerState` (mask/value table), controlword →
  :class:`Command`, the drive-side transition table (:data:`DRIVE_TRANSITIONS`, numbered as in
  CiA 402 / IEC 61800-7-201) and the master-side table :data:`ENABLE_STEPS` (which controlword
  to send next, from each state, to reach OPERATION ENABLED);
- EMCY frames (CiA 301: error code u16 LE, error register u8, 5 vendor bytes) decoded to text
  through a table of standard codes with a fallback by code class;
- our PDO mapping (:data:`TPDO1`, :data:`TPDO2`, :data:`RPDO1`) with pack/unpack that name the
  COB-ID and byte offset on error;
- unit conversions: encoder counts ↔ rad, per-mille of a rated value ↔ SI with i16 saturation,
  i32 wrap-around of the position;
- SocketCAN error-frame classes and worst-case CAN frame lengths (for the link's rate bound).

Units: torque N·m, current A, angle rad, time s; "‰" is per-mille of the rated value
(0x6076 rated torque [mN·m], 0x6075 rated current [mA]).
"""

from __future__ import annotations

import enum
import math
import struct
from dataclasses import dataclass
from typing import Final, Optional

from .errors import ProtocolError

# --- COB-IDs (CiA 301 pre-defined connection set) -----------------------------------------------

NMT_COB_ID: Final = 0x000
SYNC_COB_ID: Final = 0x080
EMCY_BASE: Final = 0x080
TPDO_BASES: Final = (0x180, 0x280, 0x380, 0x480)
RPDO_BASES: Final = (0x200, 0x300, 0x400, 0x500)
SDO_RX_BASE: Final = 0x600  # requests to the node
SDO_TX_BASE: Final = 0x580  # responses from the node
HEARTBEAT_BASE: Final = 0x700

NMT_START: Final = 0x01
NMT_STOP: Final = 0x02
NMT_PRE_OPERATIONAL: Final = 0x80
NMT_RESET_NODE: Final = 0x81
NMT_RESET_COMMUNICATION: Final = 0x82

# Heartbeat payload byte (bit 7 is the toggle bit of node guarding: mask it off).
HB_BOOTUP: Final = 0x00
HB_STOPPED: Final = 0x04
HB_OPERATIONAL: Final = 0x05
HB_PRE_OPERATIONAL: Final = 0x7F
HB_STATE_NAMES: Final = {HB_BOOTUP: "BOOT-UP", HB_STOPPED: "STOPPED", HB_OPERATIONAL: "OPERATIONAL",
                         HB_PRE_OPERATIONAL: "PRE-OPERATIONAL"}


@dataclass(frozen=True, slots=True)
class CobIds:
    """The COB-IDs of one node in the pre-defined connection set."""

    node_id: int

    def __post_init__(self) -> None:
        if not 1 <= self.node_id <= 127:
            raise ValueError(f"node_id: must be 1..127, got {self.node_id}")

    @property
    def emcy(self) -> int:
        return EMCY_BASE + self.node_id

    def tpdo(self, n: int) -> int:
        """COB-ID of TPDO n (1..4)."""
        return TPDO_BASES[n - 1] + self.node_id

    def rpdo(self, n: int) -> int:
        """COB-ID of RPDO n (1..4)."""
        return RPDO_BASES[n - 1] + self.node_id

    @property
    def heartbeat(self) -> int:
        return HEARTBEAT_BASE + self.node_id

    @property
    def sdo_rx(self) -> int:
        return SDO_RX_BASE + self.node_id

    @property
    def sdo_tx(self) -> int:
        return SDO_TX_BASE + self.node_id


# --- object dictionary indices used by this project ---------------------------------------------

OD_ERROR_REGISTER: Final = 0x1001
OD_CONSUMER_HEARTBEAT: Final = 0x1016  # sub n: u32 = node_id << 16 | time [ms]
OD_PRODUCER_HEARTBEAT: Final = 0x1017  # u16 [ms]
OD_GUARD_TIME: Final = 0x100C  # u16 [ms]: node guarding period (life guarding, CiA 301)
OD_LIFE_TIME_FACTOR: Final = 0x100D  # u8: the drive's life time = guard time × this
OD_CONTROLWORD: Final = 0x6040
OD_STATUSWORD: Final = 0x6041
OD_MODES_OF_OPERATION: Final = 0x6060  # i8
OD_MODES_OF_OPERATION_DISPLAY: Final = 0x6061  # i8
OD_POSITION_ACTUAL: Final = 0x6064  # i32 [counts]
OD_TARGET_TORQUE: Final = 0x6071  # i16 [‰ of 0x6076]
OD_RATED_CURRENT: Final = 0x6075  # u32 [mA]
OD_RATED_TORQUE: Final = 0x6076  # u32 [mN·m]
OD_TORQUE_ACTUAL: Final = 0x6077  # i16 [‰ of 0x6076]
OD_CURRENT_ACTUAL: Final = 0x6078  # i16 [‰ of 0x6075]
OD_SUPPORTED_DRIVE_MODES: Final = 0x6502  # u32 bit field

MODE_CST: Final = 10  # cyclic synchronous torque (0x6060 value)
SUPPORTED_MODE_CST_BIT: Final = 9  # its bit in 0x6502


def supports_cst(supported_modes: int) -> bool:
    """Whether 0x6502 announces cyclic synchronous torque (bit 9)."""
    return bool(supported_modes >> SUPPORTED_MODE_CST_BIT & 1)


# --- power state machine: statusword ------------------------------------------------------------


class PowerState(enum.Enum):
    """CiA 402 power states, valued by their spec names."""

    NOT_READY_TO_SWITCH_ON = "NOT READY TO SWITCH ON"
    SWITCH_ON_DISABLED = "SWITCH ON DISABLED"
    READY_TO_SWITCH_ON = "READY TO SWITCH ON"
    SWITCHED_ON = "SWITCHED ON"
    OPERATION_ENABLED = "OPERATION ENABLED"
    QUICK_STOP_ACTIVE = "QUICK STOP ACTIVE"
    FAULT_REACTION_ACTIVE = "FAULT REACTION ACTIVE"
    FAULT = "FAULT"

    @property
    def is_fault(self) -> bool:
        return self in (PowerState.FAULT, PowerState.FAULT_REACTION_ACTIVE)


# (mask, value, state): the statusword bits 0,1,2,3,5,6 identify the state. Bit 5 (quick stop)
# is part of the mask only where it distinguishes states (it is active-low).
STATUSWORD_STATES: Final[tuple[tuple[int, int, PowerState], ...]] = (
    (0x004F, 0x0000, PowerState.NOT_READY_TO_SWITCH_ON),
    (0x004F, 0x0040, PowerState.SWITCH_ON_DISABLED),
    (0x006F, 0x0021, PowerState.READY_TO_SWITCH_ON),
    (0x006F, 0x0023, PowerState.SWITCHED_ON),
    (0x006F, 0x0027, PowerState.OPERATION_ENABLED),
    (0x006F, 0x0007, PowerState.QUICK_STOP_ACTIVE),
    (0x004F, 0x000F, PowerState.FAULT_REACTION_ACTIVE),
    (0x004F, 0x0008, PowerState.FAULT),
)

# Other statusword bits.
SW_VOLTAGE_ENABLED: Final = 1 << 4
SW_QUICK_STOP: Final = 1 << 5  # 1 = quick stop NOT active
SW_WARNING: Final = 1 << 7
SW_REMOTE: Final = 1 << 9
SW_TARGET_REACHED: Final = 1 << 10
SW_INTERNAL_LIMIT: Final = 1 << 11


def decode_statusword(statusword: int) -> PowerState:
    """The power state a statusword reports. ProtocolError if it matches no state or is not
    an unsigned 16-bit value."""
    if not 0 <= statusword <= 0xFFFF:
        raise ProtocolError(f"statusword {statusword}: not an unsigned 16-bit value")
    for mask, value, state in STATUSWORD_STATES:
        if statusword & mask == value:
            return state
    raise ProtocolError(f"statusword 0x{statusword:04X} matches no CiA 402 power state")


def encode_statusword(state: PowerState, extra_bits: int = 0) -> int:
    """The canonical statusword of a state (the table's value), OR'ed with ``extra_bits``
    (e.g. SW_REMOTE); bits that would change the decoded state are refused."""
    for _mask, value, s in STATUSWORD_STATES:
        if s is state:
            word = value | extra_bits
            if decode_statusword(word) is not state:
                raise ValueError(f"extra bits 0x{extra_bits:04X} change the state {state.value}")
            return word
    raise AssertionError(state)  # every state is in the table


# --- controlword ------------------------------------------------------------------------------

CW_DISABLE_VOLTAGE: Final = 0x0000
CW_QUICK_STOP: Final = 0x0002
CW_SHUTDOWN: Final = 0x0006
CW_SWITCH_ON: Final = 0x0007
CW_DISABLE_OPERATION: Final = 0x0007  # same bits as switch on; the state tells them apart
CW_ENABLE_OPERATION: Final = 0x000F
CW_FAULT_RESET_BIT: Final = 0x0080  # a rising edge of bit 7 resets a fault (transition 15)


class Command(enum.Enum):
    """Device control commands as the drive decodes them from controlword bits 0..3 and 7."""

    SHUTDOWN = "shutdown"
    SWITCH_ON = "switch on / disable operation"
    ENABLE_OPERATION = "enable operation"
    DISABLE_VOLTAGE = "disable voltage"
    QUICK_STOP = "quick stop"


# (mask, value, command), first match wins. Bit 7 must be 0 for all of these; with bit 7 set
# only its rising edge means anything (fault reset).
CONTROLWORD_COMMANDS: Final[tuple[tuple[int, int, Command], ...]] = (
    (0x0082, 0x0000, Command.DISABLE_VOLTAGE),  # bit 1 = 0
    (0x0086, 0x0002, Command.QUICK_STOP),  # bit 1 = 1, bit 2 = 0
    (0x0087, 0x0006, Command.SHUTDOWN),  # bits 2,1 = 1, bit 0 = 0
    (0x008F, 0x0007, Command.SWITCH_ON),  # bits 2,1,0 = 1, bit 3 = 0
    (0x008F, 0x000F, Command.ENABLE_OPERATION),  # bits 3,2,1,0 = 1
)


def decode_command(controlword: int) -> Optional[Command]:
    """The command a controlword carries; None when bit 7 is set (fault reset handled apart)."""
    for mask, value, command in CONTROLWORD_COMMANDS:
        if controlword & mask == value:
            return command
    return None


def is_fault_reset_edge(previous_controlword: int, controlword: int) -> bool:
    """Bit 7 went 0 → 1: the only thing that resets a drive fault."""
    return not previous_controlword & CW_FAULT_RESET_BIT and bool(controlword & CW_FAULT_RESET_BIT)


# --- the drive's transition table (what the drive does) -----------------------------------------

_S = PowerState
_C = Command

# (state, command) → (next state, transition number). Transitions not listed leave the state
# unchanged. 0, 1, 13, 14 are automatic or fault driven (AUTOMATIC_TRANSITIONS, drive_step);
# 15 is the fault reset edge; 16 (quick stop → operation enabled) exists only for quick-stop
# option codes 5..8, which the emulated drive uses (it holds QUICK STOP ACTIVE until told).
DRIVE_TRANSITIONS: Final[dict[tuple[PowerState, Command], tuple[PowerState, int]]] = {
    (_S.SWITCH_ON_DISABLED, _C.SHUTDOWN): (_S.READY_TO_SWITCH_ON, 2),
    (_S.READY_TO_SWITCH_ON, _C.SWITCH_ON): (_S.SWITCHED_ON, 3),
    # "switch on + enable operation" from READY TO SWITCH ON: 3 now, 4 on the next cycle.
    (_S.READY_TO_SWITCH_ON, _C.ENABLE_OPERATION): (_S.SWITCHED_ON, 3),
    (_S.SWITCHED_ON, _C.ENABLE_OPERATION): (_S.OPERATION_ENABLED, 4),
    (_S.OPERATION_ENABLED, _C.SWITCH_ON): (_S.SWITCHED_ON, 5),  # disable operation
    (_S.SWITCHED_ON, _C.SHUTDOWN): (_S.READY_TO_SWITCH_ON, 6),
    (_S.READY_TO_SWITCH_ON, _C.DISABLE_VOLTAGE): (_S.SWITCH_ON_DISABLED, 7),
    (_S.READY_TO_SWITCH_ON, _C.QUICK_STOP): (_S.SWITCH_ON_DISABLED, 7),
    (_S.OPERATION_ENABLED, _C.SHUTDOWN): (_S.READY_TO_SWITCH_ON, 8),
    (_S.OPERATION_ENABLED, _C.DISABLE_VOLTAGE): (_S.SWITCH_ON_DISABLED, 9),
    (_S.SWITCHED_ON, _C.DISABLE_VOLTAGE): (_S.SWITCH_ON_DISABLED, 10),
    (_S.SWITCHED_ON, _C.QUICK_STOP): (_S.SWITCH_ON_DISABLED, 10),
    (_S.OPERATION_ENABLED, _C.QUICK_STOP): (_S.QUICK_STOP_ACTIVE, 11),
    (_S.QUICK_STOP_ACTIVE, _C.DISABLE_VOLTAGE): (_S.SWITCH_ON_DISABLED, 12),
    (_S.QUICK_STOP_ACTIVE, _C.ENABLE_OPERATION): (_S.OPERATION_ENABLED, 16),
}

# Transitions the drive makes by itself: 1 after initialisation, 14 once the fault reaction
# (braking) is over.
AUTOMATIC_TRANSITIONS: Final[dict[PowerState, tuple[PowerState, int]]] = {
    _S.NOT_READY_TO_SWITCH_ON: (_S.SWITCH_ON_DISABLED, 1),
    _S.FAULT_REACTION_ACTIVE: (_S.FAULT, 14),
}


def drive_step(state: PowerState, previous_controlword: int, controlword: int
               ) -> tuple[PowerState, Optional[int]]:
    """One step of the drive's state machine on a newly applied controlword.

    Returns (next state, transition number or None). Automatic transitions (1, 14) take
    precedence; then the fault reset edge (15) in FAULT; then the command table.
    """
    if state in AUTOMATIC_TRANSITIONS:
        return AUTOMATIC_TRANSITIONS[state]
    if state is _S.FAULT:
        if is_fault_reset_edge(previous_controlword, controlword):
            return _S.SWITCH_ON_DISABLED, 15
        return state, None
    command = decode_command(controlword)
    if command is None:
        return state, None
    return DRIVE_TRANSITIONS.get((state, command), (state, None))


# --- the master's table: what to send to reach OPERATION ENABLED --------------------------------


@dataclass(frozen=True, slots=True)
class EnableStep:
    """The controlword to send from one state on the way to OPERATION ENABLED."""

    controlword: int
    transition: Optional[int]  # the spec transition it requests; None = wait (automatic)
    explicit_only: bool = False  # only on an explicit operator request (fault reset)


ENABLE_STEPS: Final[dict[PowerState, EnableStep]] = {
    _S.NOT_READY_TO_SWITCH_ON: EnableStep(CW_DISABLE_VOLTAGE, None),  # wait for 1
    _S.SWITCH_ON_DISABLED: EnableStep(CW_SHUTDOWN, 2),
    _S.READY_TO_SWITCH_ON: EnableStep(CW_SWITCH_ON, 3),
    _S.SWITCHED_ON: EnableStep(CW_ENABLE_OPERATION, 4),
    _S.OPERATION_ENABLED: EnableStep(CW_ENABLE_OPERATION, None),  # there: hold
    # Leave quick stop through 12 rather than 16: 16 depends on the quick-stop option code.
    _S.QUICK_STOP_ACTIVE: EnableStep(CW_DISABLE_VOLTAGE, 12),
    _S.FAULT_REACTION_ACTIVE: EnableStep(CW_DISABLE_VOLTAGE, None),  # wait for 14
    # 15 needs a rising edge of bit 7: never sent on the way to enable, only by reset_fault().
    _S.FAULT: EnableStep(CW_FAULT_RESET_BIT, 15, explicit_only=True),
}


# --- EMCY ---------------------------------------------------------------------------------------

# Standard error codes (CiA 301 communication profile, CiA 402 drive profile).
EMCY_CODES: Final[dict[int, str]] = {
    0x0000: "error reset / no error",
    0x1000: "generic error",
    0x2000: "current: generic",
    0x2100: "current, device input side",
    0x2200: "current inside the device",
    0x2300: "current, device output side",
    0x2310: "continuous over-current",
    0x2320: "short circuit / earth leakage",
    0x3000: "voltage: generic",
    0x3100: "mains voltage",
    0x3200: "voltage inside the device",
    0x3210: "DC link over-voltage",
    0x3220: "DC link under-voltage",
    0x3300: "output voltage",
    0x4000: "temperature: generic",
    0x4100: "ambient temperature",
    0x4200: "device temperature",
    0x4210: "excess temperature device",
    0x5000: "device hardware: generic",
    0x6000: "device software: generic",
    0x6100: "internal software",
    0x6200: "user software",
    0x6300: "data set",
    0x7000: "additional modules: generic",
    0x7300: "sensor",
    0x7320: "position sensor",
    0x8000: "monitoring: generic",
    0x8100: "communication: generic",
    0x8110: "CAN overrun (objects lost)",
    0x8120: "CAN in error passive mode",
    0x8130: "life guard error or heartbeat error",
    0x8140: "recovered from bus off",
    0x8150: "CAN-ID collision",
    0x8200: "protocol error: generic",
    0x8210: "PDO not processed due to length error",
    0x8220: "PDO length exceeded",
    0x8240: "unexpected SYNC data length",
    0x8250: "RPDO timeout",
    0x8611: "following error",
    0x9000: "external error: generic",
    0xF000: "additional functions: generic",
    0xFF00: "device specific",
}

# Fallback by class: the high byte first, then the high nibble.
EMCY_CLASSES: Final[dict[int, str]] = {
    0x1: "generic error",
    0x2: "current",
    0x3: "voltage",
    0x4: "temperature",
    0x5: "device hardware",
    0x6: "device software",
    0x7: "additional modules",
    0x8: "monitoring",
    0x9: "external error",
    0xF: "additional functions",
}

ERROR_REGISTER_BITS: Final[tuple[str, ...]] = (
    "generic", "current", "voltage", "temperature", "communication", "device profile",
    "reserved", "manufacturer",
)

EMCY_FORMAT: Final = struct.Struct("<HB5s")


def describe_emcy_code(code: int) -> str:
    """Text for an EMCY error code: the exact entry, else its 0xXX00 group, else its class."""
    if code in EMCY_CODES:
        return EMCY_CODES[code]
    if code & 0xFF00 == 0xFF00:
        return f"device specific (0x{code:04X})"
    group = code & 0xFF00
    if group in EMCY_CODES and group & 0x0F00:
        return f"{EMCY_CODES[group]} (0x{code:04X})"
    nibble = code >> 12
    if nibble in EMCY_CLASSES:
        return f"{EMCY_CLASSES[nibble]} (0x{code:04X})"
    return f"unknown error code 0x{code:04X}"


def describe_error_register(register: int) -> str:
    """The set bits of the error register 0x1001 as words ("none" when 0)."""
    names = [name for bit, name in enumerate(ERROR_REGISTER_BITS) if register >> bit & 1]
    return ", ".join(names) if names else "none"


def error_register_for(code: int) -> int:
    """The error register 0x1001 a device shows for an active error of this code (bit 0 set
    for any error, plus the class bit)."""
    if code == 0:
        return 0
    class_bit = {0x2: 1, 0x3: 2, 0x4: 3, 0x8: 4}.get(code >> 12)
    register = 0x01
    if class_bit is not None:
        register |= 1 << class_bit
    elif code & 0xFF00 == 0xFF00:
        register |= 0x80
    return register


@dataclass(frozen=True, slots=True)
class Emcy:
    """One EMCY frame."""

    code: int  # u16 error code; 0x0000 = error reset
    register: int  # u8 error register (0x1001)
    vendor: bytes  # 5 manufacturer-specific bytes

    @property
    def is_reset(self) -> bool:
        return self.code == 0

    @property
    def text(self) -> str:
        vendor = self.vendor.hex(" ") if any(self.vendor) else "none"
        return (f"EMCY 0x{self.code:04X} {describe_emcy_code(self.code)} "
                f"(error register 0x{self.register:02X}: {describe_error_register(self.register)}; "
                f"vendor data: {vendor})")


def encode_emcy(code: int, register: int, vendor: bytes = b"") -> bytes:
    """8-byte EMCY payload; ``vendor`` is zero-padded to 5 bytes."""
    if len(vendor) > 5:
        raise ValueError(f"EMCY vendor data: at most 5 bytes, got {len(vendor)}")
    return EMCY_FORMAT.pack(code, register, vendor)


def decode_emcy(data: bytes, cob_id: int) -> Emcy:
    """Decode an EMCY payload. Accepts 3..8 bytes (some devices send short frames; the vendor
    bytes are zero-padded); ProtocolError names the COB-ID and offset otherwise."""
    n = len(data)
    if n < 2:
        raise ProtocolError(f"EMCY 0x{cob_id:03X}: {n} bytes, error code at byte 0 incomplete")
    if n < 3:
        raise ProtocolError(f"EMCY 0x{cob_id:03X}: {n} bytes, error register at byte 2 missing")
    if n > 8:
        raise ProtocolError(f"EMCY 0x{cob_id:03X}: {n} bytes, unexpected data from byte 8")
    code, register, vendor = EMCY_FORMAT.unpack(bytes(data).ljust(8, b"\x00"))
    return Emcy(code, register, vendor)


# --- PDO layouts --------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class PdoField:
    """One object mapped into a PDO. ``fmt`` is its struct code (little-endian)."""

    name: str
    index: int
    subindex: int
    fmt: str  # 'b', 'B', 'h', 'H', 'i', 'I'

    @property
    def size(self) -> int:
        return struct.calcsize("<" + self.fmt)

    @property
    def bits(self) -> int:
        return 8 * self.size

    @property
    def mapping_entry(self) -> int:
        """The u32 written to 0x1600+n / 0x1A00+n: index << 16 | subindex << 8 | bit length."""
        return self.index << 16 | self.subindex << 8 | self.bits


class PdoLayout:
    """An ordered, byte-aligned PDO mapping with its codec."""

    def __init__(self, name: str, fields: tuple[PdoField, ...]) -> None:
        self.name = name
        self.fields = fields
        self._struct = struct.Struct("<" + "".join(f.fmt for f in fields))
        offsets, offset = [], 0
        for f in fields:
            offsets.append(offset)
            offset += f.size
        self.offsets: tuple[int, ...] = tuple(offsets)
        if self._struct.size > 8:
            raise ValueError(f"{name}: {self._struct.size} bytes exceed the 8 of a CAN frame")

    @property
    def size(self) -> int:
        """Payload length [bytes]."""
        return self._struct.size

    @property
    def mapping_entries(self) -> tuple[int, ...]:
        return tuple(f.mapping_entry for f in self.fields)

    def pack(self, *values: int) -> bytes:
        """Encode the field values in mapping order. ProtocolError on a value out of range."""
        try:
            return self._struct.pack(*values)
        except struct.error as err:
            for f, off, v in zip(self.fields, self.offsets, values):
                try:
                    struct.pack("<" + f.fmt, v)
                except struct.error:
                    raise ProtocolError(f"{self.name}: {f.name} = {v!r} does not fit "
                                        f"'{f.fmt}' at byte {off}") from err
            raise ProtocolError(f"{self.name}: {err}") from err

    def unpack(self, data: bytes, cob_id: int) -> tuple[int, ...]:
        """Decode a payload. ProtocolError names the COB-ID and the byte offset that is wrong."""
        n = len(data)
        if n != self._struct.size:
            if n < self._struct.size:
                missing = next(f for f, off in zip(self.fields, self.offsets) if off + f.size > n)
                at = self.offsets[self.fields.index(missing)]
                raise ProtocolError(f"{self.name} 0x{cob_id:03X}: {n} bytes, expected {self.size}: "
                                    f"{missing.name} at byte {at} incomplete")
            raise ProtocolError(f"{self.name} 0x{cob_id:03X}: {n} bytes, expected {self.size}: "
                                f"unexpected data from byte {self.size}")
        return self._struct.unpack(data)


# The mapping this project configures (all transmission type 1: every SYNC).
TPDO1: Final = PdoLayout("TPDO1", (
    PdoField("position_actual", OD_POSITION_ACTUAL, 0, "i"),  # [counts]
    PdoField("statusword", OD_STATUSWORD, 0, "H"),
))
TPDO2: Final = PdoLayout("TPDO2", (
    PdoField("current_actual", OD_CURRENT_ACTUAL, 0, "h"),  # [‰ of rated current]
    PdoField("torque_actual", OD_TORQUE_ACTUAL, 0, "h"),  # [‰ of rated torque]
))
RPDO1: Final = PdoLayout("RPDO1", (
    PdoField("target_torque", OD_TARGET_TORQUE, 0, "h"),  # [‰ of rated torque]
    PdoField("controlword", OD_CONTROLWORD, 0, "H"),
))

PDO_TRANSMISSION_SYNC: Final = 1  # transmission type: every SYNC (RPDO: applied at the next SYNC)
PDO_COB_ID_INVALID: Final = 1 << 31
PDO_RTR_NOT_ALLOWED: Final = 1 << 30


def decode_mapping_entry(entry: int) -> tuple[int, int, int]:
    """A mapping entry u32 → (index, subindex, bit length). ProtocolError outside u32 or for a
    bit length of 0 or over 64 (no CiA 402 object maps so)."""
    if not 0 <= entry <= 0xFFFFFFFF:
        raise ProtocolError(f"PDO mapping entry {entry}: not an unsigned 32-bit value")
    bits = entry & 0xFF
    if not 1 <= bits <= 64:
        raise ProtocolError(f"PDO mapping entry 0x{entry:08X}: bit length {bits} (1..64)")
    return entry >> 16 & 0xFFFF, entry >> 8 & 0xFF, bits


# --- units --------------------------------------------------------------------------------------

I16_MAX: Final = 32767  # symmetric saturation: −32768 is not used


def counts_to_rad(counts: int, counts_per_rev: int) -> float:
    """Encoder counts → rad."""
    return counts * (2.0 * math.pi / counts_per_rev)


def rad_to_counts(angle_rad: float, counts_per_rev: int) -> int:
    """rad → encoder counts (floor: the count the encoder shows at that angle)."""
    return math.floor(angle_rad * counts_per_rev / (2.0 * math.pi))


def wrap_i32(counts: int) -> int:
    """An unbounded count as the i32 0x6064 carries it (two's complement wrap)."""
    return (counts + 2**31) % 2**32 - 2**31


def i32_delta(previous: int, current: int) -> int:
    """The signed change between two i32 position samples across a wrap (|Δ| < 2³¹)."""
    return wrap_i32(current - previous)


def to_permille(value: float, rated: float) -> int:
    """SI value (N·m or A) → ‰ of ``rated``, rounded and saturated to ±32767."""
    p = round(value / rated * 1000.0)
    return I16_MAX if p > I16_MAX else (-I16_MAX if p < -I16_MAX else p)


def from_permille(permille: int, rated: float) -> float:
    """‰ of ``rated`` → SI value (N·m or A)."""
    return permille * rated / 1000.0


def permille_limit(rated: float) -> float:
    """The largest magnitude an i16 ‰ value can carry [unit of rated]."""
    return I16_MAX * rated / 1000.0


# --- SocketCAN error frames (linux/can/error.h: class bits in the CAN id) -----------------------

CAN_ERR_TX_TIMEOUT: Final = 0x001
CAN_ERR_LOSTARB: Final = 0x002
CAN_ERR_CRTL: Final = 0x004
CAN_ERR_PROT: Final = 0x008
CAN_ERR_TRX: Final = 0x010
CAN_ERR_ACK: Final = 0x020
CAN_ERR_BUSOFF: Final = 0x040
CAN_ERR_BUSERROR: Final = 0x080
CAN_ERR_RESTARTED: Final = 0x100

ERROR_FRAME_CLASSES: Final[tuple[tuple[int, str], ...]] = (
    (CAN_ERR_TX_TIMEOUT, "TX timeout"),
    (CAN_ERR_LOSTARB, "lost arbitration"),
    (CAN_ERR_CRTL, "controller problem"),
    (CAN_ERR_PROT, "protocol violation"),
    (CAN_ERR_TRX, "transceiver status"),
    (CAN_ERR_ACK, "no ACK on transmission"),
    (CAN_ERR_BUSOFF, "bus off"),
    (CAN_ERR_BUSERROR, "bus error"),
    (CAN_ERR_RESTARTED, "controller restarted"),
)


def describe_error_frame(error_class: int) -> str:
    """The error classes set in an error frame's CAN id."""
    names = [name for bit, name in ERROR_FRAME_CLASSES if error_class & bit]
    return ", ".join(names) if names else f"unspecified (class 0x{error_class:03X})"


# --- bus time -----------------------------------------------------------------------------------


def frame_bits_worst_case(dlc: int) -> int:
    """Worst-case length of a CAN 2.0A data frame with ``dlc`` bytes, stuff bits and the 3-bit
    interframe space included: 47 + 8·dlc + ⌊(34 + 8·dlc − 1)/4⌋ [bit]."""
    return 47 + 8 * dlc + (34 + 8 * dlc - 1) // 4


def cycle_bits_worst_case() -> int:
    """Bus time of one control cycle: SYNC (DLC 0), TPDO1, TPDO2, RPDO1 [bit]."""
    return sum(frame_bits_worst_case(n) for n in (0, TPDO1.size, TPDO2.size, RPDO1.size))
