"""Live view of a running loop: a decimated stream of the logged rows, to a matplotlib window in
its own process and/or as JSON over UDP (PlotJuggler's "UDP Server" with the JSON protocol).

Nothing is added to the loop's tick. A sampler thread (:class:`LiveView`) reads the last row
the loop handed to the run log (:meth:`controller.runlog.RunLogWriter.latest`: one
``struct.unpack_from`` of the ring, no lock) ``rate_hz`` times a second, turns it into a
``{column: value}`` message and gives it to each sink without waiting:

- :class:`UdpJsonSink`: one datagram per message from a non-blocking socket; a full socket
  buffer drops the message (counted), never blocks.
- :class:`PlotSink`: the same datagrams to a viewer process of its own (``python -m
  controller.live``, a separate interpreter: no GIL or lock shared with the loop) that keeps a
  sliding window and redraws it a few times a second. With ``frames_dir`` it renders off
  screen (Agg) to PNG frames instead of a window: the headless mode the tests use.

Cost to the loop process: the sampler thread wakes ``rate_hz`` times a second and holds the
GIL for one unpack, one dict, one ``json.dumps`` and one ``sendto`` per sink (tens of µs); it never runs in
the loop's thread and never waits for a sink.
"""

from __future__ import annotations

import json
import math
import os
import socket
import sys
import threading
import time
from pathlib import Path
from typing import Any, Callable, Sequence

DEFAULT_RATE_HZ = 30.0
PLOTJUGGLER_PORT = 9870  # PlotJuggler's UDP server default
WINDOW_S = 10.0
FRAME_EVERY_S = 0.5  # headless frames: one every this many seconds of run time, and a last one
REDRAW_S = 0.1  # window mode: at most 10 redraws a second


def parse_address(text: str) -> tuple[str, int]:
    """``PORT`` or ``HOST:PORT`` (host default 127.0.0.1)."""
    host, _, port = text.rpartition(":")
    try:
        number = int(port)
    except ValueError:
        raise ValueError(f"not [HOST:]PORT: {text!r}") from None
    if not 0 < number < 65536:
        raise ValueError(f"port must be 1..65535, got {number}")
    return (host or "127.0.0.1"), number


def message(columns: Sequence[str], tick: int, row: Sequence[float]) -> dict[str, Any]:
    """The JSON object of one sample: the tick, every finite column, and ``error_rad``
    (reference − position). Non-finite values are left out (JSON has no NaN)."""
    msg: dict[str, Any] = {"tick": tick}
    for name, value in zip(columns, row):
        if math.isfinite(value):
            msg[name] = value
    if "pos_ref_rad" in msg and "pos_rad" in msg:
        msg["error_rad"] = msg["pos_ref_rad"] - msg["pos_rad"]
    return msg


class UdpJsonSink:
    """JSON datagrams to ``address`` (PlotJuggler: Streaming → UDP Server, protocol JSON, port
    9870; "use field as timestamp": ``t_s``)."""

    def __init__(self, address: tuple[str, int]) -> None:
        self.address = address
        self.sent = 0
        self.dropped = 0
        self._sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self._sock.setblocking(False)

    def send(self, msg: dict[str, Any]) -> None:
        try:
            self._sock.sendto(json.dumps(msg, separators=(",", ":")).encode(), self.address)
            self.sent += 1
        except OSError:  # BlockingIOError (buffer full), nobody listening (ICMP), …
            self.dropped += 1

    def close(self) -> None:
        self._sock.close()


class PlotSink(UdpJsonSink):
    """A live matplotlib plot in its own process (``python -m controller.live``): the process
    listens on a local UDP port and this sink streams to it like any other JSON receiver. It
    is a plain subprocess, not ``multiprocessing`` (whose spawn would re-import the user's
    ``__main__``); closing its stdin says the run ended (it then draws its last frame)."""

    def __init__(self, units: dict[str, str] | None = None, *, title: str = "frictionctl",
                 window_s: float = WINDOW_S, frames_dir: Path | None = None,
                 start_timeout_s: float = 30.0) -> None:
        import subprocess

        root = str(Path(__file__).resolve().parents[1])
        env = dict(os.environ)
        env["PYTHONPATH"] = root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
        cmd = [sys.executable, "-m", "controller.live", "--listen", "127.0.0.1:0", "--title", title,
               "--window", f"{window_s:g}", "--units", json.dumps(dict(units or {}))]
        if frames_dir is not None:
            cmd += ["--frames", str(frames_dir)]
        self.frames_dir = frames_dir
        self._proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env,
                                      text=True)
        assert self._proc.stdout is not None
        line = _readline(self._proc.stdout, start_timeout_s)
        if not line.startswith("port "):
            self._proc.kill()
            self._proc.wait()
            raise RuntimeError(f"live plot process did not start: {line.strip() or 'no output'}")
        super().__init__(("127.0.0.1", int(line.split()[1])))

    def close(self, timeout_s: float = 30.0) -> None:
        import subprocess

        super().close()
        assert self._proc.stdin is not None and self._proc.stdout is not None
        try:
            self._proc.stdin.close()  # end of run: the viewer draws its last frame and exits
        except OSError:
            pass
        try:
            self._proc.wait(timeout_s)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait()
        self._proc.stdout.close()

    @property
    def exitcode(self) -> int | None:
        return self._proc.poll()


def _readline(stream, timeout_s: float) -> str:
    """One line from a pipe, or "" after ``timeout_s``."""
    import selectors

    with selectors.DefaultSelector() as sel:
        sel.register(stream, selectors.EVENT_READ)
        if not sel.select(timeout_s):
            return ""
    return stream.readline()


class LiveView:
    """The sampler thread: ``source()`` → (tick, row) or None, at ``rate_hz``, to every sink."""

    def __init__(self, source: Callable[[], tuple[int, tuple[float, ...]] | None],
                 columns: Sequence[str], sinks: Sequence[Any], rate_hz: float = DEFAULT_RATE_HZ) -> None:
        if not 0.0 < rate_hz <= 1000.0:
            raise ValueError(f"live view rate must be in (0, 1000] Hz, got {rate_hz}")
        self.source = source
        self.columns = tuple(columns)
        self.sinks = list(sinks)
        self.period_s = 1.0 / rate_hz
        self.samples = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="live-view", daemon=True)

    def start(self) -> "LiveView":
        self._thread.start()
        return self

    def _run(self) -> None:
        last = -1
        while not self._stop.wait(self.period_s):
            last = self._sample(last)
        self._sample(last)  # the last row, so the view ends where the run ended

    def _sample(self, last: int) -> int:
        got = self.source()
        if got is None or got[0] == last:
            return last
        tick, row = got
        msg = message(self.columns, tick, row)
        for sink in self.sinks:
            sink.send(msg)
        self.samples += 1
        return tick

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=2.0)
        for sink in self.sinks:
            sink.close()


class _Helpers:
    """What ``on_loop`` returns: everything started for one run, stopped together after it."""

    def __init__(self, helpers: list[Any]) -> None:
        self.helpers = helpers

    def stop(self) -> None:
        for h in reversed(self.helpers):
            h.stop()


def on_loop(*, status: bool = True, udp: tuple[str, int] | None = None, plot: bool = False,
            frames_dir: Path | None = None, rate_hz: float = DEFAULT_RATE_HZ) -> Callable[[Any], _Helpers]:
    """An ``on_loop`` hook for :func:`controller.runner.run_session`: the status line (real
    clock) and, when asked, the live view of the loop's run log."""

    def start(loop) -> _Helpers:
        helpers: list[Any] = []
        if status:
            from .status import StatusLine

            helpers.append(StatusLine.start_for(loop))
        writer = loop.log_sink
        if (udp or plot or frames_dir) and writer is not None and hasattr(writer, "latest"):
            sinks: list[Any] = []
            if udp:
                sinks.append(UdpJsonSink(udp))
            if plot or frames_dir:
                title = f"frictionctl · {loop.cfg.loop.rate_hz:g} Hz · {loop.compensator.mode}"
                sinks.append(PlotSink(getattr(writer, "units", {}), title=title, frames_dir=frames_dir))
            helpers.append(LiveView(writer.latest, writer.columns, sinks, rate_hz).start())
        return _Helpers(helpers)

    return start


# --- the plot process -----------------------------------------------------------------------------


def _scale(unit: str) -> tuple[float, str]:
    return (1e6, "µ" + unit) if unit in ("rad", "m") else (1.0, unit or "-")


def plot_process_main(sock: socket.socket, units: dict[str, str], title: str, window_s: float,
                      frames_dir: str | None, end: threading.Event) -> None:
    """The viewer: read JSON datagrams from ``sock`` until ``end`` is set, keep the last
    ``window_s`` seconds, redraw a window (or render PNG frames to ``frames_dir``, Agg)."""
    import collections

    import matplotlib

    if frames_dir is not None:
        matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    interactive = frames_dir is None and matplotlib.get_backend().lower() not in ("agg", "pdf", "svg",
                                                                                  "ps", "cairo")
    if frames_dir is None and not interactive:
        print("frictionctl: live plot: no display (matplotlib backend "
              f"{matplotlib.get_backend()}): nothing to show; use --live-udp", file=sys.stderr)
    length = units.get("pos_rad", "rad")
    f_err, u_err = _scale(length)
    force = units.get("torque_cmd_nm", "N·m")
    traces = {  # panel → [(label, key, scale)]
        f"tracking error [{u_err}]": [("error", "error_rad", f_err)],
        f"velocity [{units.get('vel_rad_s', 'rad/s')}]": [("estimate", "vel_rad_s", 1.0),
                                                           ("reference", "vel_ref_rad_s", 1.0)],
        f"{'force' if force == 'N' else 'torque'} [{force}]": [("command", "torque_cmd_nm", 1.0),
                                                             ("feedforward", "torque_ff_nm", 1.0)],
        f"friction [{force}]": [("estimate", "friction_hat_nm", 1.0),
                                ("plant (true)", "friction_true_nm", 1.0)],
    }
    keep: collections.deque = collections.deque()  # (t, msg), the window
    fig, axes = plt.subplots(len(traces), 1, sharex=True, figsize=(9, 8))
    fig.suptitle(title)
    lines = {}
    for ax, (ylabel, series) in zip(axes, traces.items()):
        for label, key, scale in series:
            style = "k--" if label in ("reference", "plant (true)") else "-"
            (lines[(key, scale)],) = ax.plot([], [], style, lw=0.9, label=label)
        ax.set_ylabel(ylabel)
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=7, loc="upper left")
    axes[-1].set_xlabel("t [s]")
    stats: dict[str, Any] = {"samples": 0, "first_t_s": None, "last_t_s": None, "frames": 0,
                             "bad": 0}
    frames = Path(frames_dir) if frames_dir else None
    if frames is not None:
        frames.mkdir(parents=True, exist_ok=True)

    def draw() -> None:
        if not keep:
            return
        ts = [t for t, _ in keep]
        for (key, scale), line in lines.items():
            line.set_data(ts, [m.get(key, math.nan) * scale for _, m in keep])
        for ax in axes:
            ax.relim()
            ax.autoscale_view()
        axes[-1].set_xlim(max(ts[0], ts[-1] - window_s), ts[-1] + 1e-9)

    def save() -> None:
        assert frames is not None
        draw()
        fig.savefig(frames / f"frame_{stats['frames']:04d}.png", dpi=60)
        stats["frames"] += 1

    def receive(block: bool) -> bool:
        """Take every datagram waiting (the first with a short wait if ``block``)."""
        got = False
        sock.settimeout(0.1 if block else 0.0)
        while True:
            try:
                data = sock.recv(65536)
            except (BlockingIOError, socket.timeout):
                return got
            sock.settimeout(0.0)
            try:
                msg = json.loads(data)
                t = float(msg["t_s"])
            except (ValueError, KeyError, TypeError):
                stats["bad"] += 1
                continue
            keep.append((t, msg))
            stats["samples"] += 1
            if stats["first_t_s"] is None:
                stats["first_t_s"] = t
            stats["last_t_s"] = t
            got = True

    next_frame_t = -math.inf
    last_draw = 0.0
    while not end.is_set():
        if not receive(block=True):
            continue
        while keep and keep[-1][0] - keep[0][0] > window_s:
            keep.popleft()
        if frames is not None and keep[-1][0] >= next_frame_t:
            save()
            next_frame_t = keep[-1][0] + FRAME_EVERY_S
        elif interactive and time.monotonic() - last_draw > REDRAW_S and plt.fignum_exists(fig.number):
            draw()
            plt.pause(0.001)
            last_draw = time.monotonic()
    receive(block=False)  # what arrived before the end
    while keep and keep[-1][0] - keep[0][0] > window_s:
        keep.popleft()
    if frames is not None:
        save()
        (frames / "live.json").write_text(json.dumps(stats))
    elif interactive and plt.fignum_exists(fig.number):
        draw()
        plt.pause(0.5)
    plt.close(fig)


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m controller.live --listen [HOST:]PORT``: a live plot of a JSON stream (from
    ``--live-udp`` or the ``--live`` of a run). Ends when stdin closes (or at Ctrl-C)."""
    import argparse

    p = argparse.ArgumentParser(prog="python -m controller.live", description=main.__doc__)
    p.add_argument("--listen", default=f"127.0.0.1:{PLOTJUGGLER_PORT}", help="[HOST:]PORT (0: any)")
    p.add_argument("--title", default="frictionctl live")
    p.add_argument("--window", type=float, default=WINDOW_S, help="seconds shown")
    p.add_argument("--units", default="{}", help="JSON {column: unit} (the run log's units)")
    p.add_argument("--frames", default=None, help="render PNG frames here instead of a window")
    args = p.parse_args(argv)
    host, _, port = args.listen.rpartition(":")
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 20)
    sock.bind((host or "127.0.0.1", int(port)))
    print(f"port {sock.getsockname()[1]}", flush=True)
    end = threading.Event()

    def watch_stdin() -> None:
        try:
            while sys.stdin.read(4096):
                pass
        finally:
            end.set()

    threading.Thread(target=watch_stdin, daemon=True).start()
    try:
        plot_process_main(sock, json.loads(args.units), args.title, args.window, args.frames, end)
    except KeyboardInterrupt:
        return 130
    finally:
        sock.close()
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
