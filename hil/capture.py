"""Raw CAN captures (python-can formats: ``.log`` candump, ``.asc``, ``.blf``, …) turned into
per-tick feedback by the drivers' own decoding code, for offline replay.

Ticks: CiA 402 — one per RPDO carrying the target torque the master sent, with the latest
position and current from the TPDOs before it (decoded with the mapping ``drive.tpdo`` /
``drive.rpdo`` of the config given; the default: TPDO1 position + statusword, TPDO2 current +
torque, RPDO1 target torque + controlword). ODrive CAN — each
Set_Input_Torque (0x0E) closes a tick; the latest Get_Encoder_Estimates (0x09) and Get_Iq (0x14)
replies before it are its feedback. Rated torque/current of a CiA 402 drive are taken from the
SDO replies in the capture when present (0x6076, 0x6075), else from the config.
"""

from __future__ import annotations

import math
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import can
import numpy as np

from controller.config import Config
from drivers.errors import ProtocolError

CAPTURE_SUFFIXES = (".log", ".asc", ".blf", ".trc", ".csv")


@dataclass
class CaptureRun:
    protocol: str
    t_s: np.ndarray  # capture timestamps of the ticks [s], from the first tick
    pos_rad: np.ndarray
    current_a: np.ndarray
    torque_cmd_nm: np.ndarray  # what the master commanded on that tick
    frames: int
    skipped: int  # frames of other nodes / services


def _messages(path: Path) -> list[can.Message]:
    try:
        return [m for m in can.LogReader(str(path)) if not m.is_error_frame]
    except (ValueError, struct.error, IndexError) as err:
        raise ProtocolError(f"{path}: not a readable CAN capture ({err})") from err


def infer_protocol(messages: list[can.Message]) -> str:
    """cia402 if the capture has SYNC frames, odrive_can if it has Set_Input_Torque frames."""
    ids = {m.arbitration_id for m in messages}
    if 0x080 in ids:
        return "cia402"
    if any((i & 0x1F) == 0x0E for i in ids):
        return "odrive_can"
    raise ProtocolError("capture holds neither CiA 402 SYNC (0x080) nor ODrive Set_Input_Torque "
                        "(cmd 0x0E) frames: give --protocol")


def _cia402(messages, cfg: Config) -> tuple[list[tuple], int]:
    from drivers.cia402_pdo import PdoMapping
    from drivers.cia402_protocol import counts_to_rad, from_permille

    node = cfg.drive.node_id
    tpdo1_ids = {0x180 + n: n for n in range(1, 128)}
    found = [tpdo1_ids[m.arbitration_id] for m in messages if m.arbitration_id in tpdo1_ids]
    if found:
        node = found[0]
    rated_torque = rated_current = math.nan
    for m in messages:  # SDO upload replies (0x43 = 4-byte expedited) of 0x6076 / 0x6075
        if m.arbitration_id == 0x580 + node and len(m.data) == 8 and m.data[0] == 0x43:
            index = m.data[1] | m.data[2] << 8
            value = int.from_bytes(bytes(m.data[4:8]), "little")
            if index == 0x6076:
                rated_torque = value / 1000.0
            elif index == 0x6075:
                rated_current = value / 1000.0
    if not math.isfinite(rated_torque):
        rated_torque = cfg.plant.Kt * 5.0
    if not math.isfinite(rated_current):
        rated_current = 5.0
    cpr = cfg.drive.counts_per_rev
    mapping = PdoMapping(cfg.drive.tpdo, cfg.drive.rpdo)  # the mapping the run configured
    tpdos = dict(zip(mapping.tpdo_ids(node), mapping.tpdos))
    rpdos = dict(zip(mapping.rpdo_ids(node), mapping.rpdos))
    rows, skipped = [], 0
    pos = cur = math.nan
    for m in messages:
        cid, data = m.arbitration_id, bytes(m.data)
        if cid in tpdos:
            layout = tpdos[cid]
            values = dict(zip((f.name for f in layout.fields), layout.unpack(data, cid)))
            if "position_actual" in values:
                pos = counts_to_rad(values["position_actual"], cpr)
            if "current_actual" in values:
                cur = from_permille(values["current_actual"], rated_current)
        elif cid in rpdos:
            layout = rpdos[cid]
            values = dict(zip((f.name for f in layout.fields), layout.unpack(data, cid)))
            # one row per command the master sent, with the latest feedback it had (a tick
            # whose TPDOs were lost or late keeps the previous sample, as the driver does)
            if "target_torque" in values and not math.isnan(pos):
                rows.append((m.timestamp, pos, cur, from_permille(values["target_torque"], rated_torque)))
        elif cid != 0x080:
            skipped += 1
    return rows, skipped


def _odrive(messages, cfg: Config) -> tuple[list[tuple], int]:
    from drivers.odrive_codec import (Cmd, Frame, decode_encoder_estimates, decode_iq,
                                      decode_set_input_torque)

    two_pi = 2.0 * math.pi
    rows, skipped = [], 0
    pos = cur = math.nan
    node = None
    for m in messages:
        frame = Frame(m.arbitration_id, bytes(m.data), m.is_remote_frame)
        if node is None and frame.cmd == Cmd.SET_INPUT_TORQUE:
            node = frame.node_id
        if node is not None and frame.node_id != node:
            skipped += 1
            continue
        if frame.is_request:
            continue
        if frame.cmd == Cmd.GET_ENCODER_ESTIMATES:
            pos = decode_encoder_estimates(frame).pos_turns * two_pi
        elif frame.cmd == Cmd.GET_IQ:
            cur = decode_iq(frame).measured_a
        elif frame.cmd == Cmd.SET_INPUT_TORQUE:
            if not math.isnan(pos):
                rows.append((m.timestamp, pos, cur, decode_set_input_torque(frame)))
        else:
            skipped += 1
    return rows, skipped


def read_capture(path: Path, cfg: Config, protocol: str | None = None) -> CaptureRun:
    messages = _messages(path)
    if not messages:
        raise ProtocolError(f"{path}: no CAN frames")
    protocol = protocol or infer_protocol(messages)
    if protocol == "cia402":
        rows, skipped = _cia402(messages, cfg)
    elif protocol == "odrive_can":
        rows, skipped = _odrive(messages, cfg)
    else:
        raise ProtocolError(f"--protocol: captures are CAN (cia402, odrive_can), got {protocol!r}")
    if not rows:
        raise ProtocolError(f"{path}: no complete {protocol} ticks in {len(messages)} frames")
    data = np.array(rows, dtype=float)
    return CaptureRun(protocol, data[:, 0] - data[0, 0], data[:, 1] - data[0, 1], data[:, 2],
                      data[:, 3], frames=len(messages), skipped=skipped)


# --- recording --------------------------------------------------------------------------------------

CAPTURE_WRITE_SUFFIXES = (".log", ".asc", ".blf", ".csv")  # python-can writers without extras
SERIAL_CAPTURE_SUFFIXES = (".txt",)  # not .log: that is a candump CAN capture to replay


def format_serial_line(t_s: float, to_drive: bool, data: bytes) -> str:
    """One line of a serial capture: ``<t [s]> <'>' host→drive | '<' drive→host> <bytes>``,
    the bytes as text with Python escapes (``\\n``, ``\\r``, ``\\xNN``) so a line of ASCII
    protocol reads as itself: ``0.001234 > c 0 0.0123\\n``."""
    return f"{t_s:.6f} {'>' if to_drive else '<'} {repr(bytes(data))[2:-1]}\n"


def parse_serial_line(line: str) -> tuple[float, bool, bytes]:
    """Inverse of :func:`format_serial_line`: (t [s], to_drive, the bytes)."""
    import codecs

    t, direction, text = line.rstrip("\n").split(" ", 2)
    if direction not in (">", "<"):
        raise ValueError(f"serial capture line: direction {direction!r} is not '>' or '<'")
    return float(t), direction == ">", codecs.escape_decode(text.encode("latin-1"))[0]


class SerialTextCapture:
    """A text file of every chunk read from and written to a serial port (the host's side)."""

    def __init__(self, path: Path, clock=None) -> None:
        import time

        self._clock = clock or time.monotonic
        self._t0 = self._clock()
        self._file = open(path, "w", encoding="ascii")  # buffered: no syscall per line

    def record(self, to_drive: bool, data: bytes) -> None:
        if data:
            self._file.write(format_serial_line(self._clock() - self._t0, to_drive, data))

    def close(self) -> None:
        self._file.close()


def captured_serial(port: str, baudrate: int, capture: SerialTextCapture, **kwargs):
    """An open ``serial.Serial`` on ``port`` whose reads and writes also go to ``capture``."""
    import serial

    class CapturedSerial(serial.Serial):
        def read(self, size: int = 1) -> bytes:
            data = super().read(size)
            capture.record(False, data)
            return data

        def write(self, data) -> int | None:
            capture.record(True, bytes(data))
            return super().write(data)

    return CapturedSerial(port, baudrate, **kwargs)


class BusCapture:
    """Every frame on a CAN channel to a python-can log file (format by extension), through a
    second handle on the channel: on socketcan, virtual and udp_multicast it sees both the
    driver's frames and the drive's. Interfaces that allow one handle only (most USB adapters)
    refuse it: the error names the interface."""

    def __init__(self, path: Path, interface: str, channel, bitrate: int | None = None) -> None:
        kwargs: dict[str, Any] = {"bitrate": bitrate} if bitrate and interface not in ("virtual", "socketcan",
                                                                       "udp_multicast") else {}
        try:
            self._bus = can.Bus(interface=interface, channel=channel, **kwargs)
        except Exception as err:  # noqa: BLE001 - python-can and vendor libraries raise anything
            raise ProtocolError(f"--capture: cannot open a second handle on {interface}:{channel} "
                                f"to record it ({type(err).__name__}: {err})") from err
        self._logger = can.Logger(str(path))
        self._notifier = can.Notifier(self._bus, [self._logger], timeout=0.05)

    def stop(self) -> None:
        self._notifier.stop()
        self._logger.stop()
        self._bus.shutdown()


class RunCapture:
    """``frictionctl run --capture FILE``: record the drive link of a real run.

    CAN (cia402, odrive_can): a :class:`BusCapture` in a python-can format (``.log`` candump,
    ``.asc``, ``.blf``, ``.csv``); replay reads it back. Serial (odrive_ascii): the text lines of
    :func:`format_serial_line` (``.txt``). ``backend_kwargs`` go to the backend's
    ``from_config`` (the captured serial port); :meth:`stop` after the run."""

    def __init__(self, cfg: Config, path: Path) -> None:
        d = cfg.drive
        self.path = path
        self.backend_kwargs: dict = {}
        self._parts: list = []
        suffix = path.suffix.lower()
        if d.protocol in ("cia402", "odrive_can"):
            if suffix not in CAPTURE_WRITE_SUFFIXES:
                raise ProtocolError(f"--capture {path}: a CAN capture is written as "
                                    f"{', '.join(CAPTURE_WRITE_SUFFIXES)} (python-can formats)")
            path.parent.mkdir(parents=True, exist_ok=True)
            self._parts.append(BusCapture(path, d.interface, d.channel, getattr(d, "bitrate", None)))
        elif d.protocol == "odrive_ascii":
            if suffix not in SERIAL_CAPTURE_SUFFIXES:
                raise ProtocolError(f"--capture {path}: a serial capture is text: "
                                    f"{', '.join(SERIAL_CAPTURE_SUFFIXES)}")
            import serial

            path.parent.mkdir(parents=True, exist_ok=True)
            text = SerialTextCapture(path)
            self._parts.append(text)
            try:
                port = captured_serial(d.port, d.baudrate, text, timeout=0,
                                       write_timeout=d.state_timeout_s, exclusive=True)  # as the driver
            except (serial.SerialException, OSError, ValueError) as err:
                text.close()
                raise ProtocolError(f"drive.port {d.port}: cannot open: {err}") from err
            self._parts.insert(0, port)
            self.backend_kwargs = {"port": port}
        else:
            raise ProtocolError(f"--capture: drive.protocol {d.protocol!r} has no link to record "
                                "(cia402, odrive_can, odrive_ascii)")

    def stop(self) -> None:
        for part in self._parts:
            (part.stop if hasattr(part, "stop") else part.close)()
        self._parts = []
