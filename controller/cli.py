"""The ``frictionctl`` command line. Library code raises; only this module turns errors into
one-line messages and exit codes (2: bad input or config, 1: a run that faulted or failed)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Callable, Sequence

from .schema import ConfigError

DEFAULT_CONFIG = "turntable"


class UsageError(Exception):
    """Bad command-line input: printed as one line, exit 2."""


def _print_table(title: str, rows: dict) -> None:
    width = max(len(k) for k in rows) if rows else 0
    print(title)
    for key, value in rows.items():
        if isinstance(value, float):
            value = f"{value:.6g}"
        print(f"  {key:<{width}}  {value}")


def cmd_curves(args: argparse.Namespace) -> int:
    from hil.curves import friction_curves

    from .config import load_config, resolve_config_path

    cfg = load_config(resolve_config_path(args.config))
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    facts = friction_curves(cfg.plant, out / "friction.png", seed=args.seed)
    facts["plot"] = str(out / "friction.png")
    (out / "curves.json").write_text(json.dumps(facts, indent=2))
    _print_table("friction curves (plant truth)", facts)
    return 0


def cmd_demo(args: argparse.Namespace) -> int:
    return cmd_curves(args)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="frictionctl", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def add(name: str, fn: Callable[[argparse.Namespace], int], help_text: str) -> argparse.ArgumentParser:
        p = sub.add_parser(name, help=help_text, description=help_text)
        p.set_defaults(fn=fn)
        return p

    p = add("demo", cmd_demo, "the headline run on the built-in simulated turntable")
    p.add_argument("--config", default=DEFAULT_CONFIG, help="config file or shipped name")
    p.add_argument("--out", default="demo-out", help="output directory")
    p.add_argument("--seed", type=int, default=1)

    p = add("curves", cmd_curves, "open-loop friction curves of the simulated plant")
    p.add_argument("--config", default=DEFAULT_CONFIG, help="config file or shipped name")
    p.add_argument("--out", default="curves-out", help="output directory")
    p.add_argument("--seed", type=int, default=1)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return args.fn(args)
    except (ConfigError, UsageError) as err:
        print(f"frictionctl: error: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("frictionctl: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
