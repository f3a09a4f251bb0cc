"""The CiA 402 PDO mapping: which objects go into which PDO, configurable (``drive.tpdo``,
``drive.rpdo``), validated with key paths, checked against the drive's EDS and, at start, against
what the drive reads back.

A mapping is a list of PDOs, each a list of objects by name (or by ``0xIIII`` / ``0xIIII:SS``) from
:data:`CATALOG`: the objects the driver knows how to use. TPDOs (drive → master, sent on every
SYNC) must carry ``position_actual`` and ``statusword``; RPDOs (master → drive, applied at the next
SYNC) must carry ``target_torque`` and ``controlword``. ``current_actual`` and ``torque_actual``
are optional (NaN in the feedback when not mapped); ``modes_of_operation`` in an RPDO is sent as
CST (10) every tick. At most 4 PDOs of each kind, 8 bytes each; each object once.

Pure: no I/O. Errors are ``ValueError("tpdo[1][0]: ...")`` (the loader adds ``drive.``) or, for
the EDS and read-back checks, one-line texts the caller raises.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Final, Optional

from .cia402_protocol import (
    MODE_CST, OD_CONTROLWORD, OD_CURRENT_ACTUAL, OD_MODES_OF_OPERATION,
    OD_MODES_OF_OPERATION_DISPLAY, OD_POSITION_ACTUAL, OD_STATUSWORD, OD_TARGET_TORQUE,
    OD_TORQUE_ACTUAL, RPDO_BASES, TPDO_BASES, PdoField, PdoLayout, frame_bits_worst_case,
)


@dataclass(frozen=True, slots=True)
class MappableObject:
    name: str
    index: int
    subindex: int
    fmt: str  # struct code, little-endian
    kind: str  # "tpdo" (drive → master) or "rpdo"
    required: bool

    @property
    def field(self) -> PdoField:
        return PdoField(self.name, self.index, self.subindex, self.fmt)


CATALOG: Final[dict[str, MappableObject]] = {o.name: o for o in (
    MappableObject("position_actual", OD_POSITION_ACTUAL, 0, "i", "tpdo", True),  # [counts]
    MappableObject("statusword", OD_STATUSWORD, 0, "H", "tpdo", True),
    MappableObject("current_actual", OD_CURRENT_ACTUAL, 0, "h", "tpdo", False),  # [‰ rated current]
    MappableObject("torque_actual", OD_TORQUE_ACTUAL, 0, "h", "tpdo", False),  # [‰ rated torque]
    MappableObject("modes_of_operation_display", OD_MODES_OF_OPERATION_DISPLAY, 0, "b", "tpdo", False),
    MappableObject("target_torque", OD_TARGET_TORQUE, 0, "h", "rpdo", True),  # [‰ rated torque]
    MappableObject("controlword", OD_CONTROLWORD, 0, "H", "rpdo", True),
    MappableObject("modes_of_operation", OD_MODES_OF_OPERATION, 0, "b", "rpdo", False),  # sent as CST
)}
_BY_INDEX: Final = {(o.index, o.subindex): o for o in CATALOG.values()}

DEFAULT_TPDO: Final = (("position_actual", "statusword"), ("current_actual", "torque_actual"))
DEFAULT_RPDO: Final = (("target_torque", "controlword"),)
MAX_PDOS = 4
_INDEX_SPEC = re.compile(r"0x([0-9A-Fa-f]{4})(?::(?:0x)?([0-9A-Fa-f]{1,2}))?")


def resolve(spec: str) -> Optional[MappableObject]:
    """A catalog object by name, ``0xIIII`` (subindex 0) or ``0xIIII:SS`` (hex); None if unknown."""
    if spec in CATALOG:
        return CATALOG[spec]
    m = _INDEX_SPEC.fullmatch(spec)
    if m is None:
        return None
    return _BY_INDEX.get((int(m.group(1), 16), int(m.group(2) or "0", 16)))


def _field(spec: str) -> PdoField:
    obj = resolve(spec)
    if obj is None:  # validate_mapping has refused it already
        raise ValueError(f"unknown PDO object {spec!r}")
    return obj.field


def _validate_kind(kind: str, pdos: tuple[tuple[str, ...], ...]) -> None:
    if not 1 <= len(pdos) <= MAX_PDOS:
        raise ValueError(f"{kind}: 1 to {MAX_PDOS} PDOs, got {len(pdos)}")
    seen: dict[str, str] = {}
    for i, entries in enumerate(pdos):
        if not entries:
            raise ValueError(f"{kind}[{i}]: an empty PDO (leave it out instead)")
        size = 0
        for j, spec in enumerate(entries):
            where = f"{kind}[{i}][{j}]"
            obj = resolve(spec)
            if obj is None:
                names = ", ".join(o.name for o in CATALOG.values() if o.kind == kind)
                raise ValueError(f"{where}: unknown object {spec!r} (known for {kind}: {names})")
            if obj.kind != kind:
                raise ValueError(f"{where}: {obj.name} (0x{obj.index:04X}) belongs in {obj.kind}, "
                                 f"not {kind}")
            if obj.name in seen:
                raise ValueError(f"{where}: {obj.name} is mapped twice (also at {seen[obj.name]})")
            seen[obj.name] = where
            size += obj.field.size
        if size > 8:
            raise ValueError(f"{kind}[{i}]: {size} bytes exceed the 8 of a CAN frame")
    for obj in CATALOG.values():
        if obj.kind == kind and obj.required and obj.name not in seen:
            raise ValueError(f"{kind}: {obj.name} (0x{obj.index:04X}) must be mapped")


def validate_mapping(tpdo: tuple[tuple[str, ...], ...], rpdo: tuple[tuple[str, ...], ...]) -> None:
    """ValueError ``"tpdo[1][0]: ..."`` naming the first entry that is wrong."""
    _validate_kind("tpdo", tpdo)
    _validate_kind("rpdo", rpdo)


class PdoMapping:
    """A validated mapping: layouts (``TPDO1``…, ``RPDO1``…) and the codec of a cycle by name."""

    def __init__(self, tpdo: tuple[tuple[str, ...], ...] = DEFAULT_TPDO,
                 rpdo: tuple[tuple[str, ...], ...] = DEFAULT_RPDO) -> None:
        validate_mapping(tpdo, rpdo)
        self.spec = {"tpdo": tpdo, "rpdo": rpdo}
        self.tpdos = tuple(PdoLayout(f"TPDO{n + 1}", tuple(_field(s) for s in entries))
                           for n, entries in enumerate(tpdo))
        self.rpdos = tuple(PdoLayout(f"RPDO{n + 1}", tuple(_field(s) for s in entries))
                           for n, entries in enumerate(rpdo))

    def layout(self, kind: str, n: int) -> Optional[PdoLayout]:
        """PDO ``n`` (1-based) of ``kind``, or None when the mapping leaves it unused."""
        layouts = self.tpdos if kind == "tpdo" else self.rpdos
        return layouts[n - 1] if n <= len(layouts) else None

    def tpdo_ids(self, node_id: int) -> tuple[int, ...]:
        return tuple(TPDO_BASES[n] + node_id for n in range(len(self.tpdos)))

    def rpdo_ids(self, node_id: int) -> tuple[int, ...]:
        return tuple(RPDO_BASES[n] + node_id for n in range(len(self.rpdos)))

    def maps(self, name: str) -> bool:
        return any(f.name == name for layout in self.tpdos + self.rpdos for f in layout.fields)

    def where(self, name: str, node_id: int) -> str:
        """``TPDO1 0x1A0 byte 4``: where a TPDO object sits on the wire."""
        for layout, cob_id in zip(self.tpdos, self.tpdo_ids(node_id)):
            for f, offset in zip(layout.fields, layout.offsets):
                if f.name == name:
                    return f"{layout.name} 0x{cob_id:03X} byte {offset}"
        return f"{name} (not mapped)"

    def cycle_bits(self) -> int:
        """Worst-case bus time of one cycle: SYNC (DLC 0), every TPDO and RPDO [bit]."""
        return sum(frame_bits_worst_case(n) for n in (0, *(p.size for p in self.tpdos + self.rpdos)))

    def decode(self, payloads: tuple[bytes, ...], node_id: int) -> dict[str, int]:
        """The TPDO payloads of one SYNC, in TPDO order → raw values by object name.
        ProtocolError names the COB-ID and byte offset."""
        values: dict[str, int] = {}
        for layout, data, cob_id in zip(self.tpdos, payloads, self.tpdo_ids(node_id)):
            values.update(zip((f.name for f in layout.fields), layout.unpack(data, cob_id)))
        return values

    def pack(self, target_torque: int, controlword: int) -> tuple[bytes, ...]:
        """The RPDO payloads of one tick, in RPDO order."""
        values = {"target_torque": target_torque, "controlword": controlword,
                  "modes_of_operation": MODE_CST}
        return tuple(layout.pack(*(values[f.name] for f in layout.fields)) for layout in self.rpdos)


def eds_problem(mapping: PdoMapping, od) -> Optional[tuple[str, str]]:
    """(key path, message) of the first configured object the drive's object dictionary (an
    EDS) lacks, does not allow in a PDO, or types with another size; None when all fit."""
    for kind, layouts in (("tpdo", mapping.tpdos), ("rpdo", mapping.rpdos)):
        for i, layout in enumerate(layouts):
            for j, f in enumerate(layout.fields):
                where = f"drive.{kind}[{i}][{j}]"
                var = od.get_variable(f.index, f.subindex)
                if var is None:
                    return where, f"{f.name} 0x{f.index:04X}:{f.subindex:02X} is not in the EDS"
                if not var.pdo_mappable:
                    return where, f"{f.name} 0x{f.index:04X}:{f.subindex:02X} is not PDO-mappable in the EDS"
                if len(var) != f.bits:
                    return where, (f"{f.name} 0x{f.index:04X}:{f.subindex:02X} is {len(var)} bits in "
                                   f"the EDS, the driver maps {f.bits}")
    return None


def readback_mismatch(layout: PdoLayout, entries: tuple[int, ...]) -> Optional[str]:
    """Compare a PDO's mapping as read back from the drive (0x1600+n / 0x1A00+n sub 1..count)
    with ``layout``; a one-line text naming the PDO and the first entry that differs."""
    want = layout.mapping_entries
    if len(entries) != len(want):
        return (f"{layout.name} maps {len(entries)} objects on the drive, configured {len(want)} "
                f"({', '.join(f.name for f in layout.fields)})")
    for k, (got, exp, f) in enumerate(zip(entries, want, layout.fields), start=1):
        if got != exp:
            return (f"{layout.name} entry {k} reads back 0x{got:08X} (0x{got >> 16:04X}:"
                    f"{got >> 8 & 0xFF:02X}, {got & 0xFF} bits), configured 0x{exp:08X} ({f.name})")
    return None
