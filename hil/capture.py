"""Raw CAN captures (python-can formats: ``.log`` candump, ``.asc``, ``.blf``, …) turned into
per-tick feedback by the drivers' own decoding code, for offline replay.

Ticks: CiA 402 — one per RPDO1 (target torque) the master sent, with the latest TPDO1
(position, statusword) and TPDO2 (current, torque) before it. ODrive CAN — each
Set_Input_Torque (0x0E) closes a tick; the latest Get_Encoder_Estimates (0x09) and Get_Iq (0x14)
replies before it are its feedback. Rated torque/current of a CiA 402 drive are taken from the
SDO replies in the capture when present (0x6076, 0x6075), else from the config.
"""

from __future__ import annotations

import math
import struct
from dataclasses import dataclass
from pathlib import Path

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
    from drivers.cia402_protocol import RPDO1, TPDO1, TPDO2, CobIds, counts_to_rad, from_permille

    node = cfg.drive.node_id
    tpdo1_ids = {0x180 + n: n for n in range(1, 128)}
    found = [tpdo1_ids[m.arbitration_id] for m in messages if m.arbitration_id in tpdo1_ids]
    if found:
        node = found[0]
    ids = CobIds(node)
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
    rows, skipped = [], 0
    pos = cur = math.nan
    for m in messages:
        cid, data = m.arbitration_id, bytes(m.data)
        if cid == ids.tpdo(1):
            counts, _status = TPDO1.unpack(data, cid)
            pos = counts_to_rad(counts, cpr)
        elif cid == ids.tpdo(2):
            cur_pm, _torque_pm = TPDO2.unpack(data, cid)
            cur = from_permille(cur_pm, rated_current)
        elif cid == ids.rpdo(1):
            # one row per command the master sent, with the latest feedback it had (a tick
            # whose TPDOs were lost or late keeps the previous sample, as the driver does)
            target_pm, _cw = RPDO1.unpack(data, cid)
            if not math.isnan(pos):
                rows.append((m.timestamp, pos, cur, from_permille(target_pm, rated_torque)))
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
