"""The live view, headless: a UDP receiver checks the JSON stream of a real-clock run against its
log; the plot process renders frames off screen (Agg) from a second run."""

from __future__ import annotations

import json
import math
import socket

import pytest

from controller import cli
from controller.clock import RealClock
from controller.live import LiveView, message, on_loop, parse_address
from controller.reference import make_reference
from controller.runlog import RunLogWriter, read_log
from controller.runner import Session, run_session
from hil.sim_backend import SimBackend


def receiver():
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.bind(("127.0.0.1", 0))
    sock.settimeout(0.0)
    return sock


def drain(sock):
    out = []
    while True:
        try:
            out.append(json.loads(sock.recv(65536)))
        except BlockingIOError:
            return out


def test_udp_stream_of_a_real_clock_run_matches_its_log(tmp_path):
    sock = receiver()
    port = sock.getsockname()[1]
    rc = cli.main(["run", "--scenario", "creep", "--duration", "0.6", "--out", str(tmp_path),
                   "--live-udp", f"127.0.0.1:{port}"])
    # a loaded machine may trip the overrun policy (exit 1): the stream must match the log anyway
    assert rc in (0, 1)
    msgs = drain(sock)
    sock.close()
    log = read_log(tmp_path / "run.fctl")
    # ~30 samples/s of a 0.6 s run (plus the stop ramp): decimated, not per tick
    assert 1 <= len(msgs) <= 0.1 * len(log) + 2
    ticks = [m["tick"] for m in msgs]
    assert ticks == sorted(ticks) and len(set(ticks)) == len(ticks)
    assert msgs[-1]["tick"] == len(log) - 1  # the view ends where the run ended
    for m in msgs:
        row = log.data[m["tick"]]
        for j, name in enumerate(log.columns):
            if math.isfinite(row[j]):
                assert m[name] == row[j], name
            else:
                assert name not in m  # JSON has no NaN: left out
        assert m["error_rad"] == pytest.approx(m["pos_ref_rad"] - m["pos_rad"])


def test_plot_process_renders_frames_headless(ref_cfg, tmp_path):
    import dataclasses

    from controller.config import OverrunPolicy

    # overruns tolerated: on a loaded machine the run must not fault before the view has data
    loop = dataclasses.replace(ref_cfg.loop, overrun=OverrunPolicy(False, 10**6, 10**6))
    ref_cfg = dataclasses.replace(ref_cfg, loop=loop)
    frames = tmp_path / "frames"
    scenario = ref_cfg.scenario("creep")
    clock = RealClock(ref_cfg.loop.spin_s)
    backend = SimBackend(ref_cfg, clock, seed=1, scenario=scenario)
    duration = 1.2
    ref = make_reference(scenario.reference, ref_cfg.plant.encoder.rad_per_count, duration)
    session = Session(backend=backend, clock=clock, reference=ref, duration_s=duration,
                      scenario="creep")
    hook, started = on_loop(status=False, frames_dir=frames), []
    run_session(ref_cfg, session, tmp_path, plot=False,
                on_loop=lambda loop: started.append(hook(loop)) or started[0])
    stats = json.loads((frames / "live.json").read_text())
    log = read_log(tmp_path / "run.fctl")
    (view,) = started[0].helpers
    # every sample the thread took reached the viewer (a loaded machine may fault the run early,
    # so the count is not fixed: ~30 per second of the run)
    assert stats["samples"] == view.samples == view.sinks[0].sent >= 3
    assert view.samples <= 30 * (log["t_s"][-1] + 0.5) + 2  # decimated, not per tick
    assert stats["last_t_s"] == log["t_s"][-1]  # the last row reached the plot process
    pngs = sorted(frames.glob("frame_*.png"))
    assert len(pngs) == stats["frames"] >= 1
    assert all(p.read_bytes()[:4] == b"\x89PNG" for p in pngs)


def test_sampler_never_repeats_a_row_and_reads_the_writer_ring(tmp_path):
    sent = []

    class Sink:
        def send(self, msg):
            sent.append(msg)

        def close(self):
            pass

    with RunLogWriter(tmp_path / "x.fctl", ("t_s", "pos_rad", "pos_ref_rad"), {}) as w:
        assert w.latest() is None
        view = LiveView(w.latest, w.columns, [Sink()], rate_hz=1000.0)
        assert view._sample(-1) == -1 and not sent  # nothing logged yet: nothing sent
        w.append((0.0, 1.0, 1.5))
        w.append((0.001, 2.0, 2.5))
        assert w.latest() == (1, (0.001, 2.0, 2.5))
        assert view._sample(-1) == 1 and view._sample(1) == 1
    assert sent == [{"tick": 1, "t_s": 0.001, "pos_rad": 2.0, "pos_ref_rad": 2.5, "error_rad": 0.5}]
    assert message(("a", "b"), 3, (math.nan, 1.0)) == {"tick": 3, "b": 1.0}


@pytest.mark.parametrize("text, expected", [("9870", ("127.0.0.1", 9870)),
                                            ("10.0.0.2:9871", ("10.0.0.2", 9871))])
def test_parse_address(text, expected):
    assert parse_address(text) == expected


@pytest.mark.parametrize("argv, needle", [
    (["run", "--live-udp", "host:port"], "--live-udp"),
    (["run", "--live-udp", "0"], "port must be 1..65535"),
])
def test_bad_live_address_is_exit_2(argv, needle, capsys):
    with pytest.raises(SystemExit) as err:
        cli.main(argv)
    assert err.value.code == 2 and needle in capsys.readouterr().err


def test_hil_live_needs_realtime(capsys, tmp_path):
    rc = cli.main(["hil", "--protocol", "odrive_can", "--live", "--out", str(tmp_path)])
    assert rc == 2 and "--realtime" in capsys.readouterr().err
    assert not (tmp_path / "run.fctl").exists()


def test_hil_realtime_streams_the_live_view(tmp_path):
    sock = receiver()
    port = sock.getsockname()[1]
    rc = cli.main(["hil", "--protocol", "odrive_can", "--realtime", "--rate", "250", "--duration",
                   "0.5", "--out", str(tmp_path), "--live-udp", str(port)])
    assert rc in (0, 1)  # 1: an overrun fault on a loaded machine; the stream is there either way
    msgs = drain(sock)
    sock.close()
    log = read_log(tmp_path / "run.fctl")
    assert msgs and msgs[-1]["tick"] == len(log) - 1
    assert all(m["t_s"] == log["t_s"][m["tick"]] for m in msgs)
