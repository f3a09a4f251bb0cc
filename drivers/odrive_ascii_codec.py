"""ODrive ASCII protocol (firmware 0.5.6): pure line builders and parsers, no I/O.

Host side: :func:`encode_line` frames a command (optionally with ``*checksum``),
:func:`decode_reply` checks a reply line and returns its text, :func:`parse_feedback` /
:func:`parse_float` / :func:`parse_int` turn reply text into numbers — strictly: anything that is
not a plain finite decimal number raises :class:`~drivers.errors.ProtocolError` (naming the line),
so garbage never becomes a value.

Drive side (the emulator): :func:`split_request_lines`, :func:`decode_request`,
:func:`encode_reply`, :func:`format_read_value`.

Protocol facts (PROTOCOLS.md §2): a line is ``command *CS ; comment`` ended by ``\\r``, ``\\n`` or
``!``, at most 256 bytes; CS is the XOR of every byte before ``*`` (the space before it included);
a wrong checksum makes the drive ignore the line; with a right one the reply carries ``*<decimal>``
(XOR of the reply text) before ``\\r\\n``. Units: turns, turns/s, N·m, A.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from functools import reduce

from .errors import ProtocolError

MAX_LINE_BYTES = 256  # the drive drops a longer line up to the next end of line
READ_REPLY_CHARS = 9  # the firmware truncates an ``r`` reply to this many characters
END_OF_LINE = b"\r\n!"  # bytes that end a request line at the drive

#: Replies the firmware sends for a request it refuses (exact texts).
ERROR_REPLIES = ("invalid command format", "invalid property", "not implemented", "unknown command")
INVALID_MOTOR_PREFIX = "invalid motor "

_NUMBER = re.compile(rb"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")
_FIXED = re.compile(rb"[+-]?[0-9]+\.[0-9]+")  # as printf("%f") prints (possibly truncated)
_CHECKSUM = re.compile(rb"[0-9]{1,3}")
_PRINTABLE = re.compile(rb"[\x20-\x7e]*")


def checksum(data: bytes | str) -> int:
    """XOR of all bytes (0..255)."""
    raw = data.encode("ascii") if isinstance(data, str) else data
    return reduce(lambda acc, b: acc ^ b, raw, 0)


# --- property names (0.5.x) ---------------------------------------------------------------------


def prop_iq_measured(axis: int) -> str:
    return f"axis{axis}.motor.current_control.Iq_measured"


def prop_current_state(axis: int) -> str:
    return f"axis{axis}.current_state"


def prop_requested_state(axis: int) -> str:
    return f"axis{axis}.requested_state"


def prop_axis_error(axis: int) -> str:
    return f"axis{axis}.error"


def prop_input_mode(axis: int) -> str:
    return f"axis{axis}.controller.config.input_mode"


def prop_control_mode(axis: int) -> str:
    return f"axis{axis}.controller.config.control_mode"


def prop_enable_watchdog(axis: int) -> str:
    return f"axis{axis}.config.enable_watchdog"


def prop_watchdog_timeout(axis: int) -> str:
    return f"axis{axis}.config.watchdog_timeout"


# --- host side: commands ------------------------------------------------------------------------


def format_number(value: float) -> str:
    """A command argument as the drive's ``sscanf("%f")`` reads it: fixed, 6 decimals."""
    return f"{value:.6f}"


def cmd_torque(axis: int, torque_nm: float) -> str:
    """``c <axis> <torque>``: torque mode + input torque [N·m]; feeds the watchdog; no reply."""
    return f"c {axis} {format_number(torque_nm)}"


def cmd_feedback(axis: int) -> str:
    """``f <axis>``: reply ``"<pos turns> <vel turns/s>"``."""
    return f"f {axis}"


def cmd_read(prop: str) -> str:
    return f"r {prop}"


def cmd_write(prop: str, value: float | int | str) -> str:
    """``w <property> <value>`` (no reply on success)."""
    text = format_number(value) if isinstance(value, float) else str(value)
    return f"w {prop} {text}"


def cmd_feed_watchdog(axis: int) -> str:
    """``u <axis>``: feed the watchdog only; no reply."""
    return f"u {axis}"


CMD_CLEAR_ERRORS = "sc"


def encode_line(command: str, use_checksum: bool = False) -> bytes:
    """``command\\n``, or ``command *CS\\n`` with CS over ``command `` (trailing space included)."""
    body = command.encode("ascii")
    if any(c in body for c in b"\r\n!;*"):
        raise ValueError(f"command {command!r} contains a line/comment/checksum delimiter")
    if use_checksum:
        body += b" "
        body += b"*%d" % checksum(body)
    line = body + b"\n"
    if len(line) > MAX_LINE_BYTES:
        raise ValueError(f"command {command!r}: {len(line)} bytes, the drive takes at most {MAX_LINE_BYTES}")
    return line


# --- host side: replies -------------------------------------------------------------------------


def decode_reply(line: bytes, use_checksum: bool = False) -> str:
    """The text of one reply line (``\\r\\n`` stripped). With ``use_checksum`` the line must end in
    ``*<decimal>`` matching the XOR of the bytes before ``*``. An error reply from the drive or a
    line with non-printable bytes raises ProtocolError naming the line."""
    body = line[:-1] if line.endswith(b"\n") else line
    body = body[:-1] if body.endswith(b"\r") else body
    if not _PRINTABLE.fullmatch(body):
        raise ProtocolError(f"reply line {line!r}: non-printable bytes")
    if use_checksum:
        star = body.rfind(b"*")
        if star < 0:
            raise ProtocolError(f"reply line {line!r}: checksum missing")
        cs = body[star + 1:]
        if not _CHECKSUM.fullmatch(cs) or int(cs) != checksum(body[:star]):
            raise ProtocolError(f"reply line {line!r}: bad checksum at byte {star} "
                                f"(expected {checksum(body[:star])})")
        body = body[:star]
    text = body.decode("ascii").strip()
    if text in ERROR_REPLIES or text.startswith(INVALID_MOTOR_PREFIX):
        raise ProtocolError(f"reply line {line!r}: the drive refused the request: {text}")
    return text


def parse_float(text: str, what: str = "value", fixed: bool = False) -> float:
    """A plain finite decimal number; ``nan``, ``inf``, ``1_0`` and padding are refused. With
    ``fixed`` only the shape printf ``%f`` produces (digits, point, digits) is accepted, so an
    integer reply (a state, an error code) can never pass for a float reply."""
    raw = text.encode("ascii", "replace")
    if not (_FIXED if fixed else _NUMBER).fullmatch(raw):
        shape = "a %f number" if fixed else "a number"
        raise ProtocolError(f"reply {text!r}: {what} is not {shape}")
    value = float(raw)
    if not math.isfinite(value):  # a 320-digit "number" overflows to inf: garbage, not a value
        raise ProtocolError(f"reply {text[:40]!r}…: {what} out of range ({len(text)} characters)")
    return value


def parse_int(text: str, what: str = "value") -> int:
    if not re.fullmatch(r"[+-]?[0-9]+", text):
        raise ProtocolError(f"reply {text!r}: {what} is not an integer")
    return int(text)


def parse_feedback(text: str) -> tuple[float, float]:
    """``f`` reply → (pos [turns], vel [turns/s]): exactly two ``%f`` numbers, one space apart."""
    parts = text.split(" ")
    if len(parts) != 2:
        raise ProtocolError(f"reply {text!r}: expected '<pos> <vel>'")
    return parse_float(parts[0], "pos", fixed=True), parse_float(parts[1], "vel", fixed=True)


# --- drive side (emulator) ----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Request:
    """One request line as the drive sees it."""

    command: str  # comment, checksum and surrounding blanks removed
    use_checksum: bool  # the line carried a valid checksum: reply with one


def split_request_lines(buffer: bytes) -> tuple[list[bytes], bytes]:
    """Split received bytes at ``\\r``, ``\\n`` or ``!`` → (complete lines, remainder). Empty
    lines are dropped; a line longer than MAX_LINE_BYTES is returned as-is for the caller to drop."""
    lines: list[bytes] = []
    start = 0
    for i, b in enumerate(buffer):
        if b in END_OF_LINE:
            if i > start:
                lines.append(buffer[start:i])
            start = i + 1
    return lines, buffer[start:]


def decode_request(line: bytes) -> Request | None:
    """Comment (after ``;``) removed, checksum verified. None: the drive ignores the line (too long,
    wrong or malformed checksum, not ASCII, empty)."""
    if len(line) >= MAX_LINE_BYTES:
        return None
    semi = line.find(b";")
    if semi >= 0:
        line = line[:semi]
    star = line.find(b"*")
    use_checksum = star >= 0
    if use_checksum:
        cs = line[star + 1:].strip()
        if not _CHECKSUM.fullmatch(cs) or int(cs) != checksum(line[:star]):
            return None
        line = line[:star]
    try:
        command = line.decode("ascii").strip()
    except UnicodeDecodeError:
        return None
    return Request(command, use_checksum) if command else None


def encode_reply(text: str, use_checksum: bool = False) -> bytes:
    """``text\\r\\n`` or ``text*CS\\r\\n`` (CS = XOR of ``text``)."""
    body = text.encode("ascii")
    if use_checksum:
        body += b"*%d" % checksum(body)
    return body + b"\r\n"


def format_read_value(value: float | int | bool) -> str:
    """An ``r`` reply as the firmware prints it: ints/bools as decimal, floats ``%f``, then
    truncated to READ_REPLY_CHARS characters (``-12.345678`` reads back as ``-12.34567``)."""
    if isinstance(value, bool):
        text = "1" if value else "0"
    elif isinstance(value, int):
        text = str(value)
    else:
        text = f"{value:f}"
    return text[:READ_REPLY_CHARS]


def format_feedback(pos_turns: float, vel_turns_s: float) -> str:
    """An ``f`` reply: ``"%f %f"``."""
    return f"{pos_turns:f} {vel_turns_s:f}"
