"""Fuzz every parser of untrusted input: the drive codecs, the capture decoders' frame parsers and
the run-log header reader.

A parser passes when, for every input, it either returns values that are all finite (and in
range where the protocol bounds them) or raises its own error type (a ``ProtocolError`` for the
codecs, a ``LogFormatError`` for the log) — never anything else. Inputs are random bytes or
frames plus mutations of valid encodings (so the parsers' deep paths are reached, not only their
first length check). Deterministic for a seed.

    python -m hil.fuzz --inputs 1000000        # ≥ 1e6 inputs per parser; prints a table
"""

from __future__ import annotations

import argparse
import dataclasses
import enum
import functools
import math
import random
import struct
import sys
import time
import zlib
from typing import Any, Callable, Iterator

from controller.runlog import MAGIC, LogFormatError, _parse_header
from drivers import cia402_protocol as cia
from drivers import odrive_ascii_codec as asc
from drivers import odrive_codec as oc
from drivers import odrive_codec06 as oc6
from drivers.errors import ProtocolError


def finite_everywhere(value: Any) -> bool:
    """Every float inside a returned value (tuples, dataclasses, dicts) is finite."""
    if isinstance(value, float):
        return math.isfinite(value)
    if isinstance(value, (bool, int, str, bytes, enum.Enum)) or value is None:
        return True
    if dataclasses.is_dataclass(value):
        return all(finite_everywhere(getattr(value, f.name)) for f in dataclasses.fields(value))
    if isinstance(value, dict):
        return all(finite_everywhere(v) for v in value.values())
    if isinstance(value, (tuple, list)):
        return all(finite_everywhere(v) for v in value)
    return True


@dataclasses.dataclass
class Target:
    name: str
    make: Callable[[random.Random], Any]  # an input
    parse: Callable[[Any], Any]
    errors: tuple[type[BaseException], ...]


# --- input generators -----------------------------------------------------------------------------

def _bytes(rng: random.Random, n_max: int) -> bytes:
    return rng.randbytes(rng.randint(0, n_max))


def _mutate(rng: random.Random, blob: bytes) -> bytes:
    """A valid encoding with a few bytes changed, cut or extended."""
    b = bytearray(blob)
    for _ in range(rng.randint(0, 3)):
        op = rng.randrange(3)
        if op == 0 and b:
            b[rng.randrange(len(b))] = rng.randrange(256)
        elif op == 1 and b:
            del b[rng.randrange(len(b)):]
        else:
            b[rng.randrange(len(b) + 1):0] = rng.randbytes(rng.randint(1, 4))
    return bytes(b)


_SPECIAL_F32 = [struct.pack("<f", x) for x in (math.nan, math.inf, -math.inf, 3.4e38, -0.0, 1e-45)]


def _can_frame(rng: random.Random, cmd: int) -> oc.Frame:
    node = rng.randrange(64) if rng.random() < 0.9 else rng.randrange(0x800) >> 5
    if rng.random() < 0.5:
        payload = b"".join(rng.choice(_SPECIAL_F32) if rng.random() < 0.3 else rng.randbytes(4)
                           for _ in range(2))
        data = payload[:rng.randint(0, 8)]
    else:
        data = _bytes(rng, 8)
    arb = (node << 5 | cmd) if rng.random() < 0.9 else rng.randrange(0x800)
    return oc.Frame(arbitration_id=arb, data=data, rtr=rng.random() < 0.05)


def _ascii_line(rng: random.Random) -> bytes:
    choices = [
        lambda: _bytes(rng, 40),
        lambda: f"{rng.uniform(-1e3, 1e3):f} {rng.uniform(-1e3, 1e3):f}".encode(),
        lambda: ("9" * rng.randint(1, 400) + "." + "9" * rng.randint(0, 10)).encode(),
        lambda: rng.choice([b"nan", b"inf", b"-inf", b"1e999", b"0x10", b"1_0", b" 1.0", b"1.0 "]),
        lambda: _mutate(rng, b"0.123456 -7.500000*" + str(asc.checksum(b"0.123456 -7.500000")).encode()),
    ]
    return rng.choice(choices)()


def _header_blob(rng: random.Random) -> bytes:
    kind = rng.randrange(4)
    if kind == 0:
        return _bytes(rng, 64)
    if kind == 1:  # deep nesting with a valid CRC: the JSON parser's recursion limit
        depth = rng.randint(1, 20000)
        text = ("[" * depth + "]" * depth).encode()
    elif kind == 2:
        text = _mutate(rng, b'{"format": 1, "columns": ["t_s"], "units": {}, "chunk_rows": 1, '
                            b'"header": {}}')
    else:
        text = _bytes(rng, 200)
    crc = zlib.crc32(text) if rng.random() < 0.8 else rng.randrange(1 << 32)
    return MAGIC + struct.pack("<I", len(text)) + text + struct.pack("<I", crc)


def targets() -> list[Target]:
    can_decoders = {
        "odrive_can.heartbeat": (oc.decode_heartbeat, oc.Cmd.HEARTBEAT),
        "odrive_can.encoder_estimates": (oc.decode_encoder_estimates, oc.Cmd.GET_ENCODER_ESTIMATES),
        "odrive_can.iq": (oc.decode_iq, oc.Cmd.GET_IQ),
        "odrive_can.set_input_torque": (oc.decode_set_input_torque, oc.Cmd.SET_INPUT_TORQUE),
        "odrive_can.set_axis_state": (oc.decode_set_axis_state, oc.Cmd.SET_AXIS_STATE),
        "odrive_can.set_limits": (oc.decode_set_limits, oc.Cmd.SET_LIMITS),
        "odrive_can.bus_voltage_current": (oc.decode_bus_voltage_current, oc.Cmd.GET_BUS_VOLTAGE_CURRENT),
        "odrive_can.motor_error": (oc.decode_motor_error, oc.Cmd.GET_MOTOR_ERROR),
        "odrive_can.heartbeat06": (oc6.decode_heartbeat06, oc.Cmd.HEARTBEAT),
        "odrive_can.error_status06": (oc6.decode_error_status, oc.Cmd.GET_MOTOR_ERROR),
        "odrive_can.clear_errors06": (oc6.decode_clear_errors06, oc.Cmd.CLEAR_ERRORS),
    }
    out = [Target(name, functools.partial(_can_frame, cmd=cmd), fn, (ProtocolError,))
           for name, (fn, cmd) in can_decoders.items()]
    out += [
        Target("odrive_ascii.reply", _ascii_line, lambda b: asc.decode_reply(b, use_checksum=b"*" in b),
               (ProtocolError,)),
        Target("odrive_ascii.feedback", lambda rng: _ascii_line(rng).decode("latin-1"),
               asc.parse_feedback, (ProtocolError,)),
        Target("odrive_ascii.request", _ascii_line, asc.decode_request, (ProtocolError,)),
        Target("cia402.emcy", lambda rng: (_bytes(rng, 10), 0x80 + rng.randrange(128)),
               lambda a: cia.decode_emcy(*a), (ProtocolError,)),
        Target("cia402.statusword", lambda rng: rng.randrange(-2, 0x10002), cia.decode_statusword,
               (ProtocolError,)),
        Target("cia402.mapping_entry", lambda rng: rng.randrange(-2, (1 << 32) + 2),
               cia.decode_mapping_entry, (ProtocolError,)),
        Target("runlog.header", _header_blob, lambda b: _parse_header(b, "fuzz.fctl"), (LogFormatError,)),
    ]
    return out


@dataclasses.dataclass
class Outcome:
    inputs: int = 0
    accepted: int = 0
    rejected: int = 0
    escapes: int = 0  # another exception type, or a non-finite value returned
    first_escape: str = ""


def fuzz(target: Target, n: int, seed: int) -> Outcome:
    rng = random.Random(f"{seed}:{target.name}")
    out = Outcome()
    for _ in range(n):
        data = target.make(rng)
        out.inputs += 1
        try:
            value = target.parse(data)
        except target.errors:
            out.rejected += 1
            continue
        except Exception as err:  # noqa: BLE001 - exactly what the fuzzer looks for
            out.escapes += 1
            out.first_escape = out.first_escape or f"{type(err).__name__}: {err} on {data!r:.120}"
            continue
        if finite_everywhere(value):
            out.accepted += 1
        else:
            out.escapes += 1
            out.first_escape = out.first_escape or f"non-finite {value!r:.80} from {data!r:.120}"
    return out


def iter_results(n: int, seed: int, only: str = "") -> Iterator[tuple[Target, Outcome, float]]:
    for target in targets():
        if only and only not in target.name:
            continue
        t0 = time.perf_counter()
        yield target, fuzz(target, n, seed), time.perf_counter() - t0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m hil.fuzz", description=__doc__.splitlines()[0])
    parser.add_argument("--inputs", type=int, default=100_000, help="inputs per parser")
    parser.add_argument("--seed", type=int, default=1, help="random seed")
    parser.add_argument("--only", default="", help="only parsers whose name contains this")
    args = parser.parse_args(argv)
    total_escapes = 0
    print(f"{'parser':32} {'inputs':>9} {'accepted':>9} {'rejected':>9} {'escapes':>8} {'s':>7}")
    for target, o, secs in iter_results(args.inputs, args.seed, args.only):
        total_escapes += o.escapes
        print(f"{target.name:32} {o.inputs:9d} {o.accepted:9d} {o.rejected:9d} {o.escapes:8d} {secs:7.1f}",
              flush=True)
        if o.first_escape:
            print(f"  first escape: {o.first_escape}")
    print(f"escapes: {total_escapes}")
    return 1 if total_escapes else 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
