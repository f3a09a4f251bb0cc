"""A CAN drive emulator in a process of its own, for real-time HIL.

A python-can ``virtual`` bus lives inside one process, so the driver and its emulator then share
one interpreter (and its GIL) and the emulator's threads steal the loop's time. Run here, the
emulator has its own interpreter and talks to the driver over python-can's ``udp_multicast``
interface (loopback multicast; needs the ``msgpack`` package), like a drive on a real bus.

    python -m hil.emulator_process --config FILE --protocol {cia402,odrive_can} --channel GROUP
                                   [--seed N] [--rate HZ] [--firmware {0.5.6,0.6.<n>}]

``--firmware`` (odrive_can only): the firmware the emulated drive speaks; without it the
config's ``drive.emulated_firmware``.

It prints ``ready`` once the emulated drive is on the bus, then runs in real time until its
standard input closes (the parent exited or closed the pipe) or it receives SIGTERM.
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from typing import Callable

INTERFACE = "udp_multicast"


def _serve(args: argparse.Namespace) -> int:
    from controller.config import load_config

    cfg = load_config(args.config)
    dt = 1.0 / args.rate if args.rate else cfg.loop.dt_s
    start_emulator: Callable[[], object]
    stop_emulator: Callable[[], None]
    if args.protocol == "cia402":
        from .emu_cia402 import Cia402Emulator, EmulatorMode
        from .hil_session import CIA402_RATED_CURRENT_A

        cia = Cia402Emulator(cfg.plant, channel=args.channel, interface=INTERFACE,
                             node_id=args.node_id, mode=EmulatorMode.REALTIME, period_s=dt,
                             rated_current_a=CIA402_RATED_CURRENT_A,
                             rated_torque_nm=CIA402_RATED_CURRENT_A * cfg.plant.Kt,
                             seed=args.seed)
        start_emulator, stop_emulator = cia.start, cia.close
    else:
        from .emu_odrive_can import ODriveCanEmulator, firmware_from_text
        from .odrive_axis import EmuMode

        from .hil_session import emulated_watchdog_s

        odrive = ODriveCanEmulator(cfg.plant, channel=args.channel, interface=INTERFACE,
                                   node_id=args.node_id, seed=args.seed, mode=EmuMode.REALTIME,
                                   dt_s=dt, watchdog_timeout_s=emulated_watchdog_s(cfg, True),
                                   firmware=firmware_from_text(args.firmware
                                                               or cfg.drive.emulated_firmware))
        start_emulator, stop_emulator = odrive.start, odrive.stop
    done = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: done.set())
    start_emulator()
    try:
        print("ready", flush=True)

        def until_stdin_closes() -> None:  # the parent gone: stop as on SIGTERM
            sys.stdin.read()
            done.set()

        watcher = threading.Thread(target=until_stdin_closes, daemon=True)
        watcher.start()
        done.wait()
    finally:
        stop_emulator()
    return 0


def _firmware(text: str) -> str:
    """``--firmware``: checked as ``drive.emulated_firmware`` is."""
    from controller.config import EMULATED_FIRMWARE

    if EMULATED_FIRMWARE.fullmatch(text) is None:
        raise argparse.ArgumentTypeError(f'must be "0.5.6" or "0.6.<n>", got {text!r}')
    return text


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m hil.emulator_process")
    parser.add_argument("--config", required=True)
    parser.add_argument("--protocol", required=True, choices=("cia402", "odrive_can"))
    parser.add_argument("--channel", required=True, help="multicast group, e.g. 239.74.163.2")
    parser.add_argument("--node-id", type=int, required=True)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--rate", type=float, default=None)
    parser.add_argument("--firmware", type=_firmware, default=None,
                        help="odrive_can: emulated firmware (default: drive.emulated_firmware)")
    return _serve(parser.parse_args(argv))


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
