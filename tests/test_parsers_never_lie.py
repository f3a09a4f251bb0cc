"""Parsers of untrusted input reject garbage with their own error type, never raise anything
else and never return a non-finite value: property-based (hypothesis) on raw inputs, plus a
short deterministic run of the fuzz command's mutation generators (``python -m hil.fuzz`` runs
≥ 1e6 inputs per parser; README "Parsers")."""

from __future__ import annotations

import struct
import zlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from controller.runlog import MAGIC, LogFormatError, _parse_header
from drivers import odrive_ascii_codec as asc
from drivers import odrive_codec as oc
from drivers import odrive_codec06 as oc6
from drivers.cia402_protocol import decode_emcy, decode_mapping_entry, decode_statusword
from drivers.errors import ProtocolError
from hil.fuzz import finite_everywhere, fuzz, targets

CAN_DECODERS = (oc.decode_heartbeat, oc.decode_encoder_estimates, oc.decode_iq,
                oc.decode_set_input_torque, oc.decode_set_axis_state, oc.decode_set_limits,
                oc.decode_bus_voltage_current, oc.decode_motor_error, oc6.decode_heartbeat06,
                oc6.decode_error_status, oc6.decode_clear_errors06)


def _never_lies(fn, arg, errors):
    try:
        value = fn(arg)
    except errors:
        return
    assert finite_everywhere(value), (fn.__name__, arg, value)


@settings(max_examples=300, deadline=None)
@given(arb=st.integers(0, 0x7FF), data=st.binary(max_size=8), rtr=st.booleans())
def test_can_decoders(arb, data, rtr):
    frame = oc.Frame(arbitration_id=arb, data=data, rtr=rtr)
    for fn in CAN_DECODERS:
        _never_lies(fn, frame, ProtocolError)


@settings(max_examples=300, deadline=None)
@given(line=st.binary(max_size=60))
def test_ascii_reply_and_request(line):
    _never_lies(lambda b: asc.decode_reply(b, use_checksum=b"*" in b), line, ProtocolError)
    _never_lies(asc.decode_request, line, ProtocolError)


@settings(max_examples=300, deadline=None)
@given(text=st.text(max_size=60) | st.from_regex(r"-?[0-9]{1,400}\.[0-9]{0,8} -?[0-9]{1,5}\.[0-9]{6}",
                                                  fullmatch=True))
def test_ascii_feedback(text):
    _never_lies(asc.parse_feedback, text, ProtocolError)


def test_ascii_overlong_number_is_rejected_not_inf():
    with pytest.raises(ProtocolError, match="out of range"):
        asc.parse_feedback("9" * 320 + ".000000 0.000000")


@settings(max_examples=300, deadline=None)
@given(data=st.binary(max_size=12), node=st.integers(0, 127), word=st.integers(-5, 0x1_0005),
       entry=st.integers(-5, (1 << 32) + 5))
def test_cia402_decoders(data, node, word, entry):
    _never_lies(lambda d: decode_emcy(d, 0x80 + node), data, ProtocolError)
    _never_lies(decode_statusword, word, ProtocolError)
    _never_lies(decode_mapping_entry, entry, ProtocolError)


@settings(max_examples=200, deadline=None)
@given(body=st.binary(max_size=200), good_crc=st.booleans())
def test_log_header(body, good_crc):
    crc = zlib.crc32(body) if good_crc else (zlib.crc32(body) ^ 1)
    blob = MAGIC + struct.pack("<I", len(body)) + body + struct.pack("<I", crc)
    _never_lies(lambda b: _parse_header(b, "x.fctl"), blob, LogFormatError)


def test_deeply_nested_log_header_is_a_format_error():
    body = b"[" * 100_000 + b"]" * 100_000
    blob = MAGIC + struct.pack("<I", len(body)) + body + struct.pack("<I", zlib.crc32(body))
    with pytest.raises(LogFormatError, match="nested too deep"):
        _parse_header(blob, "x.fctl")


@pytest.mark.parametrize("target", targets(), ids=lambda t: t.name)
def test_fuzz_generators_find_no_escape(target):
    outcome = fuzz(target, 2000, seed=7)
    assert outcome.escapes == 0, outcome.first_escape
    if target.name != "odrive_ascii.request":  # the drive side answers garbage with None
        assert outcome.rejected > 0  # the generators do reach the error paths
