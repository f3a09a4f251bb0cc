"""The ``frictionctl`` command line. Library code raises; only this module turns errors into
one-line messages and exit codes (2: bad input or config, 1: a run that faulted or failed)."""

from __future__ import annotations

import argparse
import dataclasses
import math
import os
import json
import sys
from pathlib import Path
from typing import Callable, Sequence

from drivers.errors import FrictionctlError

from .executor import add_executor_arguments, int_argument, spec_from_args
from .schema import ConfigError

DEFAULT_CONFIG = "turntable"


class UsageError(Exception):
    """Bad command-line input: printed as one line, exit 2."""


class _Parser(argparse.ArgumentParser):
    """argparse, but a usage error is one line (the usage itself is in --help)."""

    def error(self, message: str):  # type: ignore[override]
        command = self.prog.removeprefix("frictionctl").strip()
        where = f"{command}: " if command else ""
        self.exit(2, f"frictionctl: error: {where}{message} (see --help)\n")


def _duration(text: str) -> float:
    """--duration: seconds, finite and > 0."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not (math.isfinite(value) and value > 0):
        raise argparse.ArgumentTypeError(f"must be finite and > 0 s, got {text}")
    return value


_seed = int_argument(0)


def _existing_file(text: str) -> Path:
    path = Path(text)
    if not path.is_file():
        raise UsageError(f"{path}: {'is a directory' if path.is_dir() else 'no such file'}")
    return path


def cmd_curves(args: argparse.Namespace) -> int:
    from hil.curves import friction_curves

    from .config import load_config, resolve_config_path

    cfg = load_config(resolve_config_path(args.config))
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    facts = friction_curves(cfg.plant, out / "friction.png", seed=args.seed, axis=cfg.axis)
    facts["plot"] = str(out / "friction.png")
    (out / "curves.json").write_text(json.dumps(facts, indent=2))
    from .runner import print_summary

    print_summary(facts, "friction curves (plant truth)")
    return 0


class Progress:
    """A one-line progress bar on stderr for sim runs longer than a few seconds."""

    def __init__(self, label: str, enabled: bool = True) -> None:
        self.label = label
        self.enabled = enabled and sys.stderr.isatty()

    def __call__(self, t_s: float, total_s: float) -> None:
        if not self.enabled or total_s <= 3.0:
            return
        frac = min(1.0, t_s / total_s)
        bar = "#" * int(30 * frac)
        print(f"\r{self.label} [{bar:<30}] {t_s:6.1f}/{total_s:.1f} s", end="", file=sys.stderr)
        if frac >= 1.0 - 1e-9:
            print(file=sys.stderr)

    def done(self) -> None:
        if self.enabled:
            print("\r" + " " * 70 + "\r", end="", file=sys.stderr)


def _load(args: argparse.Namespace, *, params: bool = True):
    """The config of --config, with --params (an identified set) applied where the command has it."""
    from .config import load_config, resolve_config_path

    cfg = load_config(resolve_config_path(args.config))
    path = getattr(args, "params", None) if params else None
    if path:
        from .params_file import apply_params, load_params_file

        identified = load_params_file(_existing_file(path))
        cfg = apply_params(cfg, identified)
        print(f"frictionctl: {path}: applied as controller.friction"
              + (f" and controller.J ({identified.J:.5g} kg·m²)" if identified.J is not None else ""),
              file=sys.stderr)
    return cfg


def _rotary_only(cfg, what: str) -> None:
    """The drivers and their emulators speak revolutions (turns, counts per revolution): a
    linear axis runs on the simulated drive only."""
    if cfg.units != "rotary":
        raise UsageError(f"{what}: the drive protocols speak revolutions; a linear axis "
                         f"(units: linear in {cfg.description or 'the config'!r}) runs on the "
                         f"simulated drive only (sim, run with drive.protocol sim, identify "
                         f"--backend sim)")


def _exit_code(summary: dict) -> int:
    return 1 if summary.get("faults") else 0


def cmd_sim(args: argparse.Namespace) -> int:
    from .runner import print_summary

    from hil.scenarios import sim_run

    cfg = _load(args)
    if args.duration is not None and args.duration <= 0:
        raise UsageError(f"--duration: must be > 0, got {args.duration:g}")
    if args.rate is not None:  # the config as it stands, at another loop rate (no retune)
        if not 0 < args.rate <= 20000:
            raise UsageError(f"--rate: must be in (0, 20000] Hz, got {args.rate:g}")
        cfg = dataclasses.replace(cfg, loop=dataclasses.replace(cfg.loop, rate_hz=args.rate))
    progress = Progress(f"sim {args.scenario}")
    summary = sim_run(cfg, args.scenario, Path(args.out), compensation=args.compensation,
                      duration_s=args.duration, seed=args.seed, plot=not args.no_plot,
                      progress=progress)
    progress.done()
    print_summary(summary, f"sim {args.scenario} · compensation {summary['compensation']}")
    return _exit_code(summary)


def cmd_run(args: argparse.Namespace) -> int:
    from drivers.registry import backend_class

    from .clock import RealClock
    from .reference import make_reference
    from .rt import realtime_setup
    from .runner import Session, print_summary, run_session

    from .latch import latch_from_summary, refuse_if_latched, state_dir

    cfg = _load(args)
    cfg.check_real_clock()
    latch_dir = state_dir(args.state_dir)
    refuse_if_latched(latch_dir)  # before anything opens: a latched fault enables nothing
    scenario = cfg.scenario(args.scenario)
    duration = args.duration if args.duration is not None else scenario.duration_s
    for message in realtime_setup(cfg.loop):
        print(f"frictionctl: {message}", file=sys.stderr)
    clock = RealClock(cfg.loop.spin_s)
    cls = backend_class(cfg.drive.protocol)
    capture = _run_capture(args, cfg)  # before the drive link opens
    backend = None
    try:
        if cfg.drive.protocol == "sim":
            backend = cls(cfg, clock, seed=args.seed, scenario=scenario)
        else:
            backend = cls.from_config(cfg, clock, **(capture.backend_kwargs if capture else {}))
        if cfg.drive.protocol != "sim":
            _first_contact(cfg, backend)  # the link opens, or one line and exit 2: no log written
        reference = make_reference(scenario.reference, cfg.plant.encoder.rad_per_count, duration)
        session = Session(backend=backend, clock=clock, reference=reference, duration_s=duration,
                          scenario=args.scenario, seed=args.seed, compensation=args.compensation)
        summary = run_session(cfg, session, Path(args.out), on_loop=_live_hook(args, status=True))
    finally:
        if backend is not None:
            backend.close()  # disables first if still enabled; safe to call twice
        if capture is not None:
            capture.stop()
    print_summary(summary, f"run {args.scenario} on {cfg.drive.protocol}")
    _latch(latch_from_summary(latch_dir, summary, command="run", protocol=cfg.drive.protocol,
                              scenario=args.scenario))
    return _exit_code(summary)


def _latch(path: Path | None) -> None:
    if path is not None:
        print(f"frictionctl: the fault is latched in {path}: the next run refuses to enable "
              f"until `frictionctl reset`", file=sys.stderr)


def cmd_reset(args: argparse.Namespace) -> int:
    """Show and clear a latched fault; with --drive, also reset the configured drive's fault."""
    from .latch import clear_latch, describe, read_latch, state_dir

    directory = state_dir(args.state_dir)
    record = read_latch(directory)
    print(f"latched: {describe(record)}" if record else f"no fault latched in {directory}")
    if args.drive:
        from drivers.registry import backend_class

        from .clock import RealClock

        cfg = _load(args)
        if cfg.drive.protocol == "sim":
            raise UsageError("--drive: drive.protocol is sim: there is no drive fault to reset")
        backend = backend_class(cfg.drive.protocol).from_config(cfg, RealClock(cfg.loop.spin_s))
        try:
            backend.open()
            backend.reset_fault()
            print(f"drive fault reset on {cfg.drive.protocol}")
        finally:
            backend.close()
    if record is not None:
        clear_latch(directory)
        print("cleared")
    return 0


def _first_contact(cfg, backend) -> None:
    """Open the drive link before anything else: a bus, channel, port or node that is not there
    is one line naming the setting, with a hint (exit 2), not a 0-tick run."""
    d = cfg.drive
    if d.protocol == "odrive_ascii":
        setting, hint = f"drive.port {d.port!r}", "is the adapter plugged in, the path right (ls /dev/tty*)?"
    else:
        setting = f"drive.interface {d.interface!r} / drive.channel {d.channel!r}"
        hint = ("is the interface up (ip link show), its driver installed, the bitrate "
                f"{d.bitrate} right?")
        if d.interface == "virtual":
            print("frictionctl: warning: drive.interface is 'virtual', python-can's in-process test "
                  "bus: only an emulator in this process can answer", file=sys.stderr)
    from drivers.errors import BackendError, CommunicationError

    try:
        backend.open()
    except Exception as err:  # noqa: BLE001 - vendor and OS errors included: all are "no link"
        backend.close()
        first = str(err).splitlines()[0] if str(err) else type(err).__name__
        if isinstance(err, BackendError) and not isinstance(err, CommunicationError):
            # the drive answered and was refused (firmware, PDO mapping read back): not the link
            raise UsageError(f"drive refused at first contact: {first}") from None
        raise UsageError(f"{setting}: cannot open the link to the drive: {first} ({hint})") from None


def _run_capture(args: argparse.Namespace, cfg):
    """``run --capture FILE``: the recorder of the drive link (stopped after the run), or None."""
    if not args.capture:
        return None
    from hil.capture import RunCapture

    return RunCapture(cfg, Path(args.capture))


def _live_hook(args: argparse.Namespace, *, status: bool):
    """The on_loop hook of a real-clock run: the status line, plus the live view if asked."""
    from .live import on_loop

    return on_loop(status=status, udp=args.live_udp, plot=args.live)


def _address(text: str) -> tuple[str, int]:
    from .live import parse_address

    try:
        return parse_address(text)
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err)) from None


def _add_live_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--live", action="store_true",
                   help="live plot window (matplotlib, its own process, ~30 samples/s)")
    p.add_argument("--live-udp", type=_address, default=None, metavar="[HOST:]PORT",
                   help="stream ~30 samples/s as JSON over UDP, e.g. to PlotJuggler's UDP server "
                        "(port 9870; timestamp field t_s)")


def cmd_hil(args: argparse.Namespace) -> int:
    from hil.hil_session import bench_config, hil_run

    from .runner import print_summary

    if (args.live or args.live_udp) and not args.realtime:
        raise UsageError("--live/--live-udp need --realtime (a lockstep run ends before a view "
                         "could follow it; plot its report.png instead)")
    cfg = _load(args)
    _rotary_only(cfg, f"hil --protocol {args.protocol}")
    if args.rate is not None and not 0 < args.rate <= 20000:
        raise UsageError(f"--rate: must be in (0, 20000] Hz, got {args.rate:g}")
    cfg, notes = bench_config(cfg, args.protocol, args.rate)
    for note in notes:
        print(f"frictionctl: {note}", file=sys.stderr)
    latch_dir = None
    if args.realtime:  # the real clock latches like `run`; lockstep does not
        from .latch import refuse_if_latched, state_dir
        from .rt import realtime_setup

        latch_dir = state_dir(args.state_dir)
        refuse_if_latched(latch_dir)
        for message in realtime_setup(cfg.loop):
            print(f"frictionctl: {message}", file=sys.stderr)
    progress = Progress(f"hil {args.protocol} {args.scenario}")
    summary = hil_run(cfg, args.protocol, args.scenario, Path(args.out), duration_s=args.duration,
                      compensation=args.compensation, seed=args.seed, realtime=args.realtime,
                      capture=Path(args.capture) if args.capture else None,
                      progress=None if args.realtime else progress,
                      on_loop=_live_hook(args, status=True) if args.realtime else None,
                      separate_process=args.process)
    progress.done()
    print_summary(summary, f"hil {args.protocol} {args.scenario}")
    if latch_dir is not None:
        from .latch import latch_from_summary

        _latch(latch_from_summary(latch_dir, summary, command="hil --realtime",
                                  protocol=args.protocol, scenario=args.scenario))
    return _exit_code(summary)


def cmd_faults(args: argparse.Namespace) -> int:
    from hil.fault_campaign import (HEADER, markdown_row, row_cells, run_campaign, select,
                                    write_rows)

    cfg = _load(args)
    cases = select(args.protocol)
    out = Path(args.out)
    print(f"fault campaign: {len(cases)} cases, lockstep, seed {args.seed} "
          f"(frictionctl faults{' --protocol ' + args.protocol if args.protocol else ''})")
    print(markdown_row(HEADER))
    print("|" + "---|" * len(HEADER), flush=True)
    rows = run_campaign(cfg, out, cases, seed=args.seed,
                        on_row=lambda row: print(markdown_row(row_cells(row)), flush=True))
    write_rows(out, rows)
    failed = [r.case for r in rows if not r.passed]
    print(f"{len(rows) - len(failed)}/{len(rows)} cases pass"
          + (f"; failed: {', '.join(failed)}" if failed else "") + f" (rows in {out / 'campaign.json'})")
    return 1 if failed else 0


def cmd_plot(args: argparse.Namespace) -> int:
    from .report import plot_run

    log = _existing_file(args.log)
    out = Path(args.out) if args.out else log.with_suffix(".png")
    plot_run(log, out)
    print(out)
    return 0


def cmd_export(args: argparse.Namespace) -> int:
    from .runlog import export_csv, read_log

    run = read_log(_existing_file(args.log))
    if run.problem:
        print(f"frictionctl: warning: {run.problem}", file=sys.stderr)
    written = export_csv(run, args.csv, named_codes=args.codes == "names", units=args.units)
    print(f"{args.csv}: {run.data.shape[0]} rows, {len(run.columns)} columns"
          + (f" (units and code names: {written[1]})" if len(written) > 1 else ""))
    return 0


def cmd_demo(args: argparse.Namespace) -> int:
    """Creep and reversal, PID alone vs LuGre compensation (oracle: the ceiling)."""
    from hil.bench_compensation import format_table, plot_comparison, run_matrix
    from hil.curves import friction_curves

    cfg = _load(args)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    modes = ("off", "lugre_adaptive", "oracle")
    results = run_matrix(cfg, ("creep", "reversal"), modes, out, seed=args.seed)
    print(format_table(results))
    png = plot_comparison(results, out / "comparison.png")
    for per_mode in results.values():
        for s in per_mode.values():
            from .report import plot_run

            plot_run(Path(s["log"]), Path(s["log"]).with_name("report.png"))
    curves = friction_curves(cfg.plant, out / "friction.png", seed=args.seed, axis=cfg.axis)
    gains = {sc: results[sc]["off"]["rms_error_rad"] / results[sc]["lugre_adaptive"]["rms_error_rad"]
             for sc in results}
    print("lugre_adaptive cuts the rms tracking error " +
          ", ".join(f"{g:.1f}x on {sc}" for sc, g in gains.items()) + " against PID alone")
    print(f"plots: {png}, {out}/<scenario>/<mode>/report.png, {out}/friction.png "
          f"(plant pre-sliding slope {curves['presliding_slope_nm_per_rad']:.3g} "
          f"{curves['units']['presliding_slope_nm_per_rad']})")
    from .compiled import hot_path_line

    print(hot_path_line())
    return 1 if any(s["faults"] for r in results.values() for s in r.values()) else 0


def _warn_revision(summaries: list[dict]) -> None:
    """A log recorded by another control law replays with differences: say so, per log."""
    for s in summaries:
        if s.get("revision_warning"):
            print(f"frictionctl: warning: {s.get('log')}: {s['revision_warning']}", file=sys.stderr)


def cmd_replay(args: argparse.Namespace) -> int:
    from hil.capture import CAPTURE_SUFFIXES
    from hil.replay import ReplayTask, batch_out_dirs, format_batch, replay_task

    from .executor import run_map
    from .runner import print_summary

    from .params_file import load_params_file

    params = load_params_file(_existing_file(args.params)) if args.params else None
    sources = [_existing_file(log) for log in args.log]
    is_capture = any(s.suffix.lower() in CAPTURE_SUFFIXES for s in sources)
    capture_cfg = _load(args, params=False) if is_capture else None
    if capture_cfg is not None:
        _rotary_only(capture_cfg, "replay of a drive capture")
    outs = batch_out_dirs(sources, Path(args.out))
    for src, out in zip(sources, outs):  # a run's own folder: its summary.json would be lost
        if out.resolve() == src.resolve().parent:
            raise UsageError(f"--out {args.out}: is the folder of {src}; the replay would "
                             "overwrite the run's summary.json (and proposed_params.yaml): "
                             "name another")
    tasks = [ReplayTask(src, out, params=params, compensation=args.compensation, plot=not args.no_plot,
                        capture_cfg=capture_cfg if src.suffix.lower() in CAPTURE_SUFFIXES else None,
                        protocol=args.protocol)
             for src, out in zip(sources, outs)]
    spec = spec_from_args(args)
    if len(tasks) == 1 and spec.jobs == 1 and spec.cluster is None:
        progress = Progress("replay")
        summary = replay_task(tasks[0], progress)
        progress.done()
        print_summary(summary, f"replay of {args.log[0]}")
        _warn_revision([summary])
        return 0
    summaries = run_map(replay_task, tasks, spec)
    print(format_batch(summaries))
    _warn_revision(summaries)
    print(f"{len(summaries)} replays ({spec.description}): {args.out}/<k>-<name>/summary.json")
    return 0


def cmd_identify(args: argparse.Namespace) -> int:
    """Identification experiments on a backend (or a fit from a log) → DIR/params.yaml."""
    import threading

    from hil.identify import IdentificationError, identify, identify_from_log

    from .friction import DirectionalParams

    cfg = _load(args)
    out = Path(args.out)
    if args.from_log:
        result = identify_from_log([_existing_file(log) for log in args.from_log], cfg, out)
    else:
        from drivers.backend import Clock
        from drivers.registry import backend_class

        from .clock import RealClock, SimClock

        clock: Clock
        if args.backend == "sim":
            from hil.sim_backend import SimBackend

            clock = SimClock()
            backend = SimBackend(cfg, clock, seed=args.seed)
        else:
            from .rt import realtime_setup

            _rotary_only(cfg, f"identify --backend {args.backend}")
            for message in realtime_setup(cfg.loop):
                print(f"frictionctl: {message}", file=sys.stderr)
            clock = RealClock(cfg.loop.spin_s)
            backend = backend_class(args.backend).from_config(cfg, clock)
        stop = threading.Event()
        import signal

        previous = {sig: signal.signal(sig, lambda *_: stop.set())
                    for sig in (signal.SIGINT, signal.SIGTERM)}
        progress = Progress("identify")
        try:
            result = identify(cfg, backend, clock, out, progress=progress, stop_event=stop)
        except IdentificationError as err:
            progress.done()
            print(f"frictionctl: identification failed: {err}", file=sys.stderr)
            return 1
        finally:
            backend.close()
            for sig, handler in previous.items():
                signal.signal(sig, handler)
        progress.done()
    p = result.friction
    print(f"identified friction ({'per direction' if result.directional else 'both directions'}):")
    sets = (("forward", p.forward), ("reverse", p.reverse)) if isinstance(p, DirectionalParams) \
        else (("", p),)
    for label, q in sets:
        print(f"  {label:<8}" + "  ".join(f"{k} {v:.5g}" for k, v in q.as_dict().items()))
    if result.J is not None:
        print(f"  J {result.J:.5g} kg·m² (± {result.J_se:.2g})")
    print(f"wrote {out / 'params.yaml'} (apply it with --params, or paste its friction: block as "
          "controller.friction" + (" and J as controller.J)" if result.J is not None else ")"))
    if args.check:
        from hil.bench_identify import check_identified

        if args.backend != "sim" and not args.from_log:
            raise UsageError("--check compares against the simulated plant's truth: --backend sim")
        checks = check_identified(cfg, out / "params.yaml", out / "check", seed=args.seed,
                                  spec=spec_from_args(args))
        micro = cfg.axis.micro_length  # µrad or µm
        for sc, c in checks.items():
            what = "second-half rms" if sc == "scan" else "rms"
            print(f"check {sc}: lugre_adaptive {what} {c['identified'] * 1e6:.3f} {micro} with the identified "
                  f"set (--params), {c['true'] * 1e6:.3f} with the true set, oracle "
                  f"{c['oracle'] * 1e6:.3f}: {c['vs_oracle']:.2f}× oracle (goal <= 1.5), "
                  f"{c['vs_true']:.2f}× the true set")
    return 0


BENCHMARKS = {
    "lugre": "hil.bench_lugre",
    "loop": "hil.bench_loop",
    "compensation": "hil.bench_compensation",
    "log": "hil.bench_log",
    "replay": "hil.bench_replay",
}


def cmd_bench(args: argparse.Namespace) -> int:
    import importlib

    module = importlib.import_module(BENCHMARKS[args.which])
    return module.main(args.rest)


def _verbosity_options(p: argparse.ArgumentParser, default: object) -> None:
    """-v/-q, on the top level and on every command (either place works)."""
    p.add_argument("-v", "--verbose", action="count", default=default,
                   help="more log lines (-v: info, -vv: debug)")
    p.add_argument("-q", "--quiet", action="count", default=default,
                   help="fewer log lines (-q: errors only)")


def _package_version() -> str:
    try:
        from importlib.metadata import PackageNotFoundError, version

        return version("frictionctl")
    except PackageNotFoundError:  # running from a checkout that is not installed
        from . import __version__

        return __version__


def setup_logging(verbose: int, quiet: int) -> None:
    """Library log lines through one handler with the program's prefix, at the chosen level."""
    import logging

    level = {-1: logging.ERROR, 0: logging.WARNING, 1: logging.INFO}.get(
        max(-1, min(verbose - quiet, 2)), logging.DEBUG)
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("frictionctl: %(levelname)s: %(name)s: %(message)s"))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
    logging.captureWarnings(True)  # warnings.warn lines too, once each, through the handler


def cmd_config(args: argparse.Namespace) -> int:
    """``config show|write``: the shipped configs, as they are, to stdout or a new file."""
    from .config import load_config, resolve_config_path, shipped_config_names

    if args.action == "list":
        for name in shipped_config_names():
            print(name)
        return 0
    path = resolve_config_path(args.name)
    load_config(path)  # a file that does not load is not shown as if it were a config
    text = path.read_text(encoding="utf-8")
    if args.action == "show":
        sys.stdout.write(text)
        return 0
    target = Path(args.out or f"{Path(path).stem}.yaml")
    if target.exists() and not args.force:
        raise UsageError(f"{target}: exists (--force to overwrite)")
    target.write_text(text, encoding="utf-8")
    print(f"wrote {target}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="frictionctl",
                     description="Friction compensation for precision turntables and stages: "
                                 "simulation, HIL bench, real drives, replay and identification.")
    parser.add_argument("--version", action="version", version=f"frictionctl {_package_version()}")
    _verbosity_options(parser, 0)
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND",
                                parser_class=_Parser)

    def add(name: str, fn: Callable[[argparse.Namespace], int], help_text: str) -> argparse.ArgumentParser:
        p = sub.add_parser(name, help=help_text, description=help_text)
        p.set_defaults(fn=fn)
        _verbosity_options(p, argparse.SUPPRESS)
        return p

    def common(p: argparse.ArgumentParser, out_default: str) -> None:
        p.add_argument("--config", default=DEFAULT_CONFIG,
                       help="config file, or the name of a shipped config (default: turntable)")
        p.add_argument("--out", default=out_default, help=f"output directory (default: {out_default})")
        p.add_argument("--seed", type=_seed, default=1, help="random seed of the simulated plant")

    modes = ("off", "coulomb", "stribeck", "lugre", "lugre_adaptive", "oracle")

    p = add("demo", cmd_demo, "the headline runs (creep, reversal; off, lugre_adaptive, oracle) on "
                               "a simulated axis: the turntable, or --config linear_stage")
    common(p, "demo-out")

    p = add("sim", cmd_sim, "one lockstep simulation run of a scenario")
    common(p, "sim-out")
    p.add_argument("--scenario", default="creep", help="scenario name from the config")
    p.add_argument("--compensation", choices=modes, default=None,
                   help="override controller.compensation")
    p.add_argument("--duration", type=_duration, default=None, help="seconds (default: the scenario's)")
    p.add_argument("--no-plot", action="store_true", help="skip report.png")
    p.add_argument("--rate", type=float, default=None,
                   help="loop rate [Hz] (default: loop.rate_hz; the PID as configured)")
    p.add_argument("--params", default=None, metavar="FILE",
                   help="an identified set (identify's params.yaml, a run's proposed_params.yaml, "
                        "or a config) applied over controller.friction (and controller.J if it has J)")

    p = add("run", cmd_run, "drive a real (or paced simulated) axis on the real clock")
    common(p, "run-out")
    p.add_argument("--scenario", required=True,
                   help="scenario name from the config (required: a real axis moves only on "
                        "purpose; a scenario with reference kind `hold` holds position)")
    p.add_argument("--compensation", choices=modes, default=None,
                   help="friction compensation mode (default: controller.compensation)")
    p.add_argument("--duration", type=_duration, default=None,
                   help="seconds (default: the scenario's)")
    p.add_argument("--params", default=None, metavar="FILE",
                   help="an identified set (identify's params.yaml, a run's proposed_params.yaml, "
                        "or a config) applied over controller.friction (and controller.J if it has J)")
    p.add_argument("--state-dir", default=None, metavar="DIR",
                   help="where a latched fault is kept (default: $FRICTIONCTL_STATE_DIR, else "
                        "$XDG_STATE_HOME/frictionctl or ~/.local/state/frictionctl)")
    p.add_argument("--capture", default=None, metavar="FILE",
                   help="record the drive link: CAN in a python-can format by extension (.log "
                        "candump, .asc, .blf, .csv; replay reads it), serial (odrive_ascii) as "
                        "text lines (.txt)")
    _add_live_options(p)

    p = add("hil", cmd_hil, "the real driver against its protocol-level emulator (HIL bench)")
    common(p, "hil-out")
    p.add_argument("--protocol", required=True, choices=("cia402", "odrive_can", "odrive_ascii"),
                   help="the drive protocol: its real driver runs against its emulator")
    p.add_argument("--scenario", default="creep", help="scenario name from the config (default: creep)")
    p.add_argument("--compensation", choices=modes, default=None,
                   help="friction compensation mode (default: controller.compensation)")
    p.add_argument("--duration", type=_duration, default=None, help="seconds (default: the scenario's)")
    p.add_argument("--rate", type=float, default=None, help="loop rate [Hz] (default: loop.rate_hz)")
    p.add_argument("--params", default=None, metavar="FILE",
                   help="an identified set (identify's params.yaml, a run's proposed_params.yaml, "
                        "or a config) applied over controller.friction (and controller.J if it has J)")
    p.add_argument("--realtime", action="store_true", help="real clock; the emulator follows wall time")
    p.add_argument("--state-dir", default=None, metavar="DIR",
                   help="--realtime: where a latched fault is kept (as for run)")
    p.add_argument("--process", action="store_true",
                   help="with --realtime, CAN: the emulator in its own process over udp_multicast "
                        "(needs msgpack)")
    p.add_argument("--capture", default=None,
                   help="raw traffic: CAN in a python-can format by extension (.log candump, .asc); "
                        "serial as text lines (t, > or <, the bytes escaped)")
    _add_live_options(p)

    p = add("faults", cmd_faults, "the fault campaign: every injectable fault on the sim and "
                                  "through each driver against its emulator, each checked "
                                  "against its expected row; exit 1 if any case fails")
    common(p, "faults-out")
    p.add_argument("--protocol", choices=("sim", "cia402", "odrive_can", "odrive_ascii"),
                   default=None, help="only the cases of this backend (default: all)")

    p = add("plot", cmd_plot, "plot a run log")
    p.add_argument("log", help="run log (run.fctl)")
    p.add_argument("--out", default=None, help="PNG path (default: next to the log)")

    p = add("export", cmd_export, "export a run log to CSV")
    p.add_argument("log", help="run log (run.fctl)")
    p.add_argument("--csv", required=True, help="CSV path")
    p.add_argument("--units", choices=("sidecar", "row", "none"), default="sidecar",
                   help="column units: in CSV.json beside the file (default, with the code names "
                        "and the run header), as the second line, or not at all")
    p.add_argument("--codes", choices=("names", "numbers"), default="names",
                   help="fault / drive_state as names (FOLLOWING_ERROR, ENABLED; default) or numbers")

    p = add("replay", cmd_replay, "feed logged runs through the estimator again (what-if)")
    p.add_argument("log", nargs="+", help="run logs (run.fctl) or CAN captures (.log, .asc, .blf); "
                                          "several: one folder each under --out")
    p.add_argument("--params", default=None, metavar="FILE",
                   help="what-if parameters (params.yaml, proposed_params.yaml or a config): "
                        "friction, and J if the file has it")
    p.add_argument("--compensation", choices=modes, default=None,
                   help="default: the logged mode (lugre for a capture)")
    p.add_argument("--out", default="replay-out", help="output directory")
    p.add_argument("--config", default=DEFAULT_CONFIG,
                   help="for a capture: the config (Kt, counts/rev, node id, parameters)")
    p.add_argument("--protocol", choices=("cia402", "odrive_can"), default=None,
                   help="for a capture: its protocol (default: inferred from its frames)")
    p.add_argument("--no-plot", action="store_true", help="skip replay.png (the slowest part)")
    add_executor_arguments(p)

    p = add("identify", cmd_identify, "identification experiments → params.yaml (sweep, "
                                          "breakaway, pre-sliding, sigma1), or a fit from a log")
    common(p, "identify-out")
    p.add_argument("--backend", default="sim", choices=("sim", "cia402", "odrive_can", "odrive_ascii"),
                   help="where to run the experiments (real drives use the config's drive section)")
    p.add_argument("--from-log", default=None, metavar="LOG", nargs="+",
                   help="fit the Stribeck curve from recorded run logs instead of running "
                        "experiments: a recorded sweep's constant-velocity stretches, or the "
                        "quasi-steady sliding of any motion (sine, scan)")
    p.add_argument("--check", action="store_true",
                   help="sim: lugre_adaptive with the identified set applied as --params, against the "
                        "oracle and the true set on creep, reversal and scan")
    add_executor_arguments(p)  # where the --check runs go

    p = add("bench", cmd_bench, "benchmarks that print figures (lugre, loop, compensation, log, replay)")
    p.add_argument("which", choices=sorted(BENCHMARKS), help="which benchmark")
    p.add_argument("rest", nargs=argparse.REMAINDER, help="options of that benchmark (--help)")

    p = add("reset", cmd_reset, "show and clear a fault latched by run or hil --realtime")
    p.add_argument("--state-dir", default=None, metavar="DIR",
                   help="where the latched fault is kept (default: as for run)")
    p.add_argument("--drive", action="store_true",
                   help="also reset the fault of the drive in --config (drive.protocol)")
    p.add_argument("--config", default=DEFAULT_CONFIG,
                   help="with --drive: config file or shipped config name (default: turntable)")

    p = add("config", cmd_config, "the shipped configs: list them, show one, or write one out "
                                  "to edit")
    p.add_argument("action", choices=("list", "show", "write"), help="what to do")
    p.add_argument("name", nargs="?", default=DEFAULT_CONFIG,
                   help="shipped config name or a config file (default: turntable)")
    p.add_argument("--out", default=None, help="write: target file (default: NAME.yaml here)")
    p.add_argument("--force", action="store_true", help="write: overwrite an existing file")

    p = add("curves", cmd_curves, "open-loop friction curves of the simulated plant")
    common(p, "curves-out")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    setup_logging(args.verbose, args.quiet)
    try:
        return args.fn(args)
    except (ConfigError, UsageError, FrictionctlError) as err:
        print(f"frictionctl: error: {err}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # the reader went away (``| head``): not an error of ours
        sys.stdout = open(os.devnull, "w")  # noqa: SIM115 - silences the flush at exit
        return 0
    except OSError as err:  # a path the user gave: missing, a directory, not writable, …
        where = f"{err.filename}: " if err.filename else ""
        print(f"frictionctl: error: {where}{err.strerror or err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("frictionctl: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
