"""ODrive ASCII protocol: golden lines of the codec, the emulator's replies byte for byte, and the
driver against the emulated drive on a pseudo-terminal (lockstep unless stated)."""

from __future__ import annotations

import dataclasses
import io
import math
import os
import re
import threading
import time

import pytest
import serial

from controller.clock import RealClock, SimClock
from controller.config import Config
from controller.schema import ConfigError
from drivers.backend import DriveState
from drivers.errors import BackendError, CommunicationError, EnableError, ProtocolError
from drivers.odrive_ascii import ODriveAsciiBackend, max_rate_for_baud, tick_byte_times, tick_lines
from drivers.odrive_ascii_codec import (Request, checksum, cmd_feed_watchdog, cmd_feedback,
                                        cmd_read, cmd_torque, cmd_write, decode_reply,
                                        decode_request, encode_line, encode_reply,
                                        format_feedback, format_read_value, parse_feedback,
                                        parse_float, parse_int, prop_iq_measured,
                                        split_request_lines)
from drivers.odrive_codec import AxisError, AxisState
from hil.emu_odrive_ascii import ODriveAsciiEmulator
from hil.odrive_axis import EmuMode

from .odrive_helpers import (DT, check_idle_after_close_and_after_exception, check_realtime_pd,
                             made_by, pd_ticks, read_through_dropped_reply, run_then_go_silent)


# --- fixtures: nothing may outlive a test --------------------------------------------------------

WATCHDOG_S = 0.05  # the watchdog the driver writes and reads back, unless a test says otherwise


@pytest.fixture(autouse=True)
def no_leaks():
    yield
    threads = [t.name for t in threading.enumerate() if t.name.startswith("odrive-ascii-emu")]
    assert not threads, f"emulator threads left running: {threads}"


@pytest.fixture
def cfg(ref_cfg: Config) -> Config:
    loop = dataclasses.replace(ref_cfg.loop, rate_hz=200.0)
    drive = dataclasses.replace(ref_cfg.drive, protocol="odrive_ascii", baudrate=921600,
                                timeout_s=0.05, watchdog_timeout_s=math.inf)
    return dataclasses.replace(ref_cfg, loop=loop, drive=drive)


@pytest.fixture
def make_emu(cfg: Config):
    def build(**kw) -> ODriveAsciiEmulator:
        kw.setdefault("dt_s", DT)
        return ODriveAsciiEmulator(cfg.plant, seed=1, **kw).start()

    yield from made_by(build, ODriveAsciiEmulator.stop)


@pytest.fixture
def make_backend(cfg: Config):
    def build(emu: ODriveAsciiEmulator, clock=None, **kw) -> ODriveAsciiBackend:
        kw.setdefault("timeout_s", 0.05)
        kw.setdefault("watchdog_timeout_s", WATCHDOG_S)
        return ODriveAsciiBackend(clock or SimClock(), port=emu.port_name, **kw)

    yield from made_by(build, ODriveAsciiBackend.close)


@pytest.fixture
def raw_port(make_emu):
    """A bare pyserial port on a fresh emulator, for byte-level exchanges."""
    emu = make_emu()
    with serial.Serial(emu.port_name, 115200, timeout=0.5, exclusive=True) as port:
        yield emu, port


def exchange(port: serial.Serial, line: bytes) -> bytes:
    port.write(line)
    return port.read_until(b"\r\n")


# --- codec: golden lines -------------------------------------------------------------------------


def test_checksum_golden() -> None:
    assert checksum("r vbus_voltage ") == 93  # PROTOCOLS §2's example, space before '*' included
    assert encode_line("r vbus_voltage", use_checksum=True) == b"r vbus_voltage *93\n"
    assert encode_line("f 0") == b"f 0\n"
    assert encode_line("f 0", use_checksum=True) == b"f 0 *86\n"
    assert encode_reply("8", use_checksum=True) == b"8*56\r\n"
    assert encode_reply("1.500000 -0.250000", use_checksum=True) == b"1.500000 -0.250000*14\r\n"


def test_command_builders_golden() -> None:
    assert cmd_torque(0, 0.5) == "c 0 0.500000"
    assert cmd_torque(1, -1.25) == "c 1 -1.250000"
    assert cmd_feedback(0) == "f 0"
    assert cmd_read(prop_iq_measured(0)) == "r axis0.motor.current_control.Iq_measured"
    assert cmd_write("axis0.requested_state", 8) == "w axis0.requested_state 8"
    assert cmd_write("axis0.config.watchdog_timeout", 0.05) == "w axis0.config.watchdog_timeout 0.050000"
    assert cmd_feed_watchdog(0) == "u 0"
    with pytest.raises(ValueError):
        encode_line("f 0\nsc")


def test_decode_reply() -> None:
    assert decode_reply(b"1.500000 -0.250000\r\n") == "1.500000 -0.250000"
    assert decode_reply(b"1.500000 -0.250000*14\r\n", use_checksum=True) == "1.500000 -0.250000"
    line = b"1.500000 -0.250000*15\r\n"
    with pytest.raises(ProtocolError, match=re.escape(f"{line!r}: bad checksum at byte 18")):
        decode_reply(line, use_checksum=True)
    with pytest.raises(ProtocolError, match="checksum missing"):
        decode_reply(b"1.500000 -0.250000\r\n", use_checksum=True)
    with pytest.raises(ProtocolError, match="refused the request: invalid property"):
        decode_reply(b"invalid property\r\n")
    with pytest.raises(ProtocolError, match="refused the request: invalid motor 3"):
        decode_reply(b"invalid motor 3\r\n")
    with pytest.raises(ProtocolError, match="non-printable"):
        decode_reply(b"1.5\x00\r\n")


def test_parsers_accept_only_what_the_firmware_prints() -> None:
    assert parse_feedback("1.500000 -0.250000") == (1.5, -0.25)
    assert parse_float("-12.34567", fixed=True) == -12.34567  # a truncated r reply
    assert parse_int("8") == 8
    for text in ("nan 0.000000", "1.500000 inf", "1.5 2", "1.500000  -0.250000", "", "8",
                 "1.500000 -0.250000 3.000000", "0x1.8p0 0.000000"):
        with pytest.raises(ProtocolError):
            parse_feedback(text)
    for text in ("8", "nan", "1e3", " 1.000000", "1_0.0", ""):
        with pytest.raises(ProtocolError):
            parse_float(text, fixed=True)
    for text in ("8.0", "", "0x10", "1 2"):
        with pytest.raises(ProtocolError):
            parse_int(text)


def test_drive_side_line_handling() -> None:
    assert split_request_lines(b"f 0\rr x!u 0\n\npartial") == ([b"f 0", b"r x", b"u 0"], b"partial")
    assert decode_request(b"r vbus_voltage *93") == Request("r vbus_voltage", True)
    assert decode_request(b"r vbus_voltage *94") is None
    assert decode_request(b"f 0 ; a comment") == Request("f 0", False)
    assert decode_request(b"f 0 " + b"x" * 300) is None
    assert format_read_value(-12.345678) == "-12.34567"  # truncated to 9 characters
    assert format_read_value(0.25) == "0.250000"
    assert format_read_value(8) == "8" and format_read_value(True) == "1"
    assert format_feedback(1.5, -0.25) == "1.500000 -0.250000"


# --- the emulator, byte for byte -----------------------------------------------------------------


def test_emulator_error_texts_exact(raw_port) -> None:
    _, port = raw_port
    assert exchange(port, b"x 1\n") == b"unknown command\r\n"
    assert exchange(port, b"f 5\n") == b"invalid motor 5\r\n"
    assert exchange(port, b"f\n") == b"invalid command format\r\n"
    assert exchange(port, b"c 0\n") == b"invalid command format\r\n"
    assert exchange(port, b"r axis0.nope\n") == b"invalid property\r\n"
    assert exchange(port, b"w axis0.current_state 8\n") == b"not implemented\r\n"


def test_emulator_replies_and_checksums(raw_port) -> None:
    emu, port = raw_port
    assert exchange(port, b"f 0\n") == b"0.000000 0.000000\r\n"
    assert exchange(port, b"r axis0.current_state *46\n") == b"1*49\r\n"  # checksummed both ways
    port.write(b"r vbus_voltage *94\n")  # wrong checksum: silently ignored ...
    assert exchange(port, b"r vbus_voltage!") == b"24.000000\r\n"[:9] + b"\r\n"  # ... '!' ends a line
    assert emu.lines_ignored == 1
    reply = exchange(port, b"r axis0.motor.current_control.Iq_measured\n")
    assert len(reply) <= 9 + 2
    assert parse_float(reply.decode().strip(), fixed=True) == pytest.approx(0, abs=0.02)
    assert exchange(port, b"w axis0.requested_state 8\nr axis0.current_state\n") == b"8\r\n"  # w: no reply


def test_emulator_lockstep_advances_one_period_per_c(raw_port) -> None:
    emu, port = raw_port
    port.write(b"w axis0.requested_state 8\nc 0 1.0\nc 0 1.0\nc 0 1.0\n")
    assert exchange(port, b"r axis0.current_state\n") == b"8\r\n"
    assert emu.axis.steps == 3 and emu.plant.t_s == pytest.approx(3 * DT)


def test_byte_log_lines(make_emu) -> None:
    log = io.StringIO()
    emu = make_emu(byte_log=log)
    with serial.Serial(emu.port_name, timeout=0.5) as port:
        assert exchange(port, b"f 0\n") == b"0.000000 0.000000\r\n"
    emu.stop()
    lines = log.getvalue().splitlines()
    assert [line.split(" ", 1)[1] for line in lines] == [r"> f 0\n", r"< 0.000000 0.000000\r\n"]
    assert all(re.fullmatch(r"\d+\.\d{6} [<>] .+", line) for line in lines)
    from hil.capture import parse_serial_line

    assert [parse_serial_line(line)[1:] for line in lines] == [(True, b"f 0\n"),
                                                               (False, b"0.000000 0.000000\r\n")]


# --- driver against the emulator -----------------------------------------------------------------


@pytest.mark.parametrize("use_checksum", [False, True])
def test_closed_loop_end_to_end(make_emu, make_backend, use_checksum) -> None:
    emu = make_emu()
    clock = SimClock()
    backend = make_backend(emu, clock, use_checksum=use_checksum, watchdog_timeout_s=0.5)
    with backend:
        backend.enable()
        assert emu.axis_state == AxisState.CLOSED_LOOP_CONTROL
        assert emu.axis.watchdog_enabled and emu.axis.watchdog_timeout_s == 0.5  # written by enable
        samples = pd_ticks(backend, clock, 300, 0.01)
        seqs = [s.sequence for s in samples]
        assert seqs == list(range(seqs[0], seqs[0] + 300))
        assert all(s.state == DriveState.ENABLED for s in samples)
        assert samples[-1].position_rad == pytest.approx(0.01, abs=3e-4)
        assert backend.rejected_lines == 0
        backend.disable()
        assert emu.wait_for(lambda e: e.axis_state == AxisState.IDLE and not e.axis.watchdog_enabled, 1.0)
    assert emu.axis_error == 0 and emu.lines_ignored == 0


def test_realtime_mode(make_emu, make_backend) -> None:
    """The plant runs on the wall clock (see check_realtime_pd)."""
    emu = make_emu(mode=EmuMode.REALTIME, dt_s=0.002)
    clock = RealClock(spin_s=0.0005)
    check_realtime_pd(emu, make_backend(emu, clock), clock)


def test_idle_after_close_and_after_exception(make_emu, make_backend) -> None:
    emu = make_emu()
    check_idle_after_close_and_after_exception(emu, make_backend(emu))


@pytest.mark.parametrize("garbage", [b"\x00\x7f#%&\xff\r\n", b"nan nan\r\n", b"xx", b"8\r\n",
                                     b"1.000000 2.000000 3.000000\r\n", b"-7.5\r\n7.500000\r\n"])
def test_garbage_is_counted_and_never_a_value(make_emu, make_backend, garbage) -> None:
    """Noise ahead of a reply is rejected and counted; the sample is the drive's own reply
    (noise was a whole line, skipped) or stale (noise corrupted the reply) — never the noise."""
    emu = make_emu()
    backend = make_backend(emu)
    with backend:
        backend.enable()
        good = backend.read()
        backend.write(0.5)  # Iq → 0.5 N·m / 0.6 N·m/A
        emu.inject_garbage(garbage)
        fb = backend.read()
        assert backend.rejected_lines >= 1
        assert fb.sequence in (good.sequence, good.sequence + 1)
        assert abs(fb.position_rad) < 1e-3 and abs(fb.velocity_rad_s) < 0.1  # the plant barely moved
        assert fb.current_a == good.current_a or fb.current_a == pytest.approx(0.5 / 0.6, abs=0.05)
        backend.write(0.5)
        assert backend.read().sequence == fb.sequence + 1  # in step again on the next tick


def test_well_formed_noise_is_rejected_with_checksums(make_emu, make_backend) -> None:
    """Without checksums a noise line shaped like a reply cannot be told apart; with them it can."""
    emu = make_emu()
    backend = make_backend(emu, use_checksum=True)
    with backend:
        backend.enable()
        good = backend.read()
        emu.inject_garbage(b"12.500000 3.000000\r\n")
        fb = backend.read()
        assert backend.rejected_lines == 1 and "checksum missing" in backend.last_rejected
        assert fb.sequence == good.sequence + 1 and abs(fb.position_rad) < 1e-3


def test_lost_reply_gives_stale_sample_after_timeout(make_emu, make_backend) -> None:
    emu = make_emu()
    backend = make_backend(emu, timeout_s=0.03)
    with backend:
        backend.enable()
        first = read_through_dropped_reply(emu, backend, 0.03)
        emu.delay_next(1, 0.2)
        assert backend.read().sequence == first.sequence  # late: stale, then discarded next tick
        assert backend.read().sequence == first.sequence + 1


def test_port_closed_is_a_communication_error(make_emu, make_backend) -> None:
    emu = make_emu()
    backend = make_backend(emu)
    with backend:
        backend.enable()
        backend.read()
        emu.close_port()
        with pytest.raises(CommunicationError, match="odrive_ascii: read from /dev/"):
            backend.read()
        with pytest.raises(CommunicationError, match="write"):
            backend.write(0.0)


def test_axis_error_is_a_fault_with_text(make_emu, make_backend) -> None:
    emu = make_emu()
    backend = make_backend(emu, status_every_ticks=1)
    with backend:
        backend.enable()
        assert backend.read().state == DriveState.ENABLED
        emu.inject_axis_error(AxisError.ESTOP_REQUESTED)
        fb = backend.read()
        assert fb.state == DriveState.FAULT and fb.fault_code == 0x4000
        assert fb.fault_text.startswith("ESTOP_REQUESTED")
        backend.disable()
        with pytest.raises(EnableError, match="ESTOP_REQUESTED"):
            backend.enable()
        backend.reset_fault()
        backend.enable()
        assert backend.read().state == DriveState.ENABLED


def test_drive_watchdog_expires_when_the_driver_stops_sending(make_emu, make_backend) -> None:
    emu = make_emu(mode=EmuMode.REALTIME)  # in lockstep the watchdog waits with the plant
    clock = SimClock()
    backend = make_backend(emu, clock, watchdog_timeout_s=0.05, status_every_ticks=1)
    with backend:
        run_then_go_silent(emu, backend, clock, 30)
        fb = backend.read()
        assert fb.state == DriveState.FAULT and "WATCHDOG_TIMER_EXPIRED" in fb.fault_text


def test_no_drive_is_refused_at_open() -> None:
    """First contact: open asks the firmware version; nobody answers within state_timeout_s."""
    from drivers.errors import CommunicationError

    master, slave = os.openpty()  # a port nobody answers on
    try:
        backend = ODriveAsciiBackend(SimClock(), port=os.ttyname(slave), timeout_s=0.01,
                                     state_timeout_s=0.1)
        with pytest.raises(CommunicationError, match="no reply to 'r fw_version_major'"):
            backend.open()
        assert not backend.is_open
    finally:
        os.close(master)
        os.close(slave)


def test_rate_refused_at_115200_baud_and_1khz(cfg, make_emu) -> None:
    slow = dataclasses.replace(cfg, loop=dataclasses.replace(cfg.loop, rate_hz=1000.0),
                               drive=dataclasses.replace(cfg.drive, baudrate=115200, port="/dev/null"))
    with pytest.raises(ConfigError, match=r"^loop.rate_hz: 1000 Hz is above what odrive_ascii holds "
                                          r"at 115200 baud: at most 105.9 Hz \(87 byte times per tick"):
        ODriveAsciiBackend.from_config(slow, SimClock())
    emu = make_emu()
    backend = ODriveAsciiBackend(SimClock(), port=emu.port_name, baudrate=115200, rate_hz=1000.0)
    with pytest.raises(BackendError, match=r"1000 Hz .* at most 105.9 Hz"):
        backend.open()
    assert not backend.is_open


def test_link_budget_numbers() -> None:
    # f 0 / r ...Iq_measured / r ...current_state; "%f %f" at |pos| < 1e4 turns, 9-char r reply, "13"
    assert tick_lines(0, use_checksum=False, status=True) == ([4, 42, 22], [25, 11, 4], 15)
    # requests end at 4, 46, 68; replies 4→29, 46→57, 68→72; then the 15-byte torque command
    assert tick_byte_times(0, use_checksum=False, status=True) == 87
    assert tick_byte_times(0, use_checksum=False, status=False) == 72
    assert max_rate_for_baud(115200) == pytest.approx(105.93, abs=0.01)
    assert max_rate_for_baud(921600) == pytest.approx(847.45, abs=0.01)
    assert max_rate_for_baud(921600, status=False) == pytest.approx(1024.0, abs=0.01)


def test_paced_link_is_no_faster_than_the_wire(make_emu, make_backend) -> None:
    """With the emulator pacing bytes as a 115200-baud UART, a back-to-back tick takes at least
    its wire time, and the refused 1 kHz is out of reach."""
    emu = make_emu(baudrate=115200)
    backend = make_backend(emu, baudrate=115200, status_every_ticks=1)
    with backend:
        backend.enable()
        t0 = time.perf_counter()
        n = 15
        for _ in range(n):
            assert backend.read().state == DriveState.ENABLED
            backend.write(0.0)
        tick_s = (time.perf_counter() - t0) / n
    assert backend.rejected_lines == 0
    wire_s = 80 * 10 / 115200  # this tick's actual bytes (narrower numbers than the worst case)
    assert tick_s >= 0.9 * wire_s
    assert 1.0 / tick_s < 1000.0


# --- drive-side protection, confirmed disable, firmware version -------------------------------------


def test_watchdog_written_and_read_back(make_emu, make_backend) -> None:
    emu = make_emu()
    with make_backend(emu, watchdog_timeout_s=0.0537) as backend:
        backend.enable()
        assert backend.unprotected == ""
        assert emu.axis.watchdog_enabled and emu.axis.watchdog_timeout_s == pytest.approx(0.0537)


@pytest.mark.parametrize("mode, reason", [
    ("refused", r"could not be configured and read back .*refused the request: invalid property"),
    ("ignored", r"axis0.config.enable_watchdog reads back 0"),
])
def test_watchdog_refused_or_not_stored_refuses_enable(make_emu, make_backend, mode, reason) -> None:
    emu = make_emu(watchdog_config=mode)
    with make_backend(emu) as backend:
        with pytest.raises(EnableError, match=reason) as info:
            backend.enable()
        assert "drive.allow_unprotected: true" in str(info.value) and "\n" not in str(info.value)
        assert emu.axis_state == AxisState.IDLE and not backend.enabled


def test_watchdog_left_to_the_drive_must_read_back_enabled(make_emu, make_backend) -> None:
    """drive.watchdog_timeout_s .inf: the driver writes nothing, but still reads back."""
    with make_backend(make_emu(watchdog_timeout_s=0.2), watchdog_timeout_s=math.inf) as backend:
        backend.enable()  # the drive's own setting is on
        assert backend.unprotected == ""
    with make_backend(make_emu(), watchdog_timeout_s=math.inf) as backend:
        with pytest.raises(EnableError, match=r"reads back 0 and drive.watchdog_timeout_s is \.inf"):
            backend.enable()


def test_opt_out_runs_unprotected_with_a_warning_each_enable(make_emu, make_backend, caplog) -> None:
    emu = make_emu(watchdog_config="refused")
    clock = SimClock()
    with make_backend(emu, clock, allow_unprotected=True) as backend:
        for _ in range(2):
            backend.enable()
            samples = pd_ticks(backend, clock, 5, 0.0)  # no refusal line is taken for a reply
            assert all(s.state == DriveState.ENABLED for s in samples)
            backend.disable()
    assert sum("UNPROTECTED" in r.getMessage() for r in caplog.records) == 2


def test_disable_is_confirmed_by_current_state(make_emu, make_backend) -> None:
    emu = make_emu()
    with make_backend(emu) as backend:
        backend.enable()
        backend.disable()  # returns once the drive has reported IDLE
        assert emu.axis_state == AxisState.IDLE and not backend.enabled


def test_disable_on_an_unplugged_port_is_not_confirmed(make_emu, make_backend) -> None:
    from drivers.errors import CommunicationError

    emu = make_emu()
    backend = make_backend(emu, state_timeout_s=0.1)
    backend.open()
    backend.enable()
    emu.close_port()
    with pytest.raises(CommunicationError):
        backend.disable()
    assert backend.enabled  # never reported disabled without the drive saying so
    backend.close()


@pytest.mark.parametrize("version, accepted", [((0, 5, 1), True), ((0, 6, 3), False), ((0, 4, 12), False)])
def test_firmware_version_read_at_open(make_emu, make_backend, version, accepted) -> None:
    emu = make_emu(firmware=version)
    backend = make_backend(emu)
    if accepted:
        with backend:
            assert (backend.firmware.major, backend.firmware.minor, backend.firmware.revision) == version
        return
    with pytest.raises(BackendError) as info:
        backend.open()
    text = str(info.value)
    assert f"firmware {'.'.join(map(str, version))}: this driver speaks the ASCII protocol of " \
           f"firmware 0.5.x" in text and "\n" not in text
    assert not backend.is_open


def test_run_refuses_a_foreign_firmware_in_one_line(ref_cfg, tmp_path, capsys, make_emu) -> None:
    """``frictionctl run`` against a drive with firmware 0.6: the first contact reads the
    version and refuses it — one line, exit 2, nothing written."""
    import yaml

    from controller import cli
    from controller.schema import to_plain

    emu = make_emu(firmware=(0, 6, 3))
    cfg = dataclasses.replace(ref_cfg, loop=dataclasses.replace(ref_cfg.loop, rate_hz=200.0),
                              drive=dataclasses.replace(ref_cfg.drive, protocol="odrive_ascii",
                                                        port=emu.port_name, baudrate=2000000,
                                                        watchdog_timeout_s=0.05))
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(to_plain(cfg)))
    out = tmp_path / "out"
    rc = cli.main(["run", "--config", str(path), "--scenario", "creep", "--out", str(out)])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and len(err) == 1, err
    assert "drive refused at first contact: odrive_ascii" in err[0] and "firmware 0.6.3" in err[0]
    assert not out.exists() and emu.axis_state == AxisState.IDLE
