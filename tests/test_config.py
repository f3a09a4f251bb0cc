"""Tests of strict config loading (controller/config.py, controller/schema.py) and of the CLI's
one-line error contract for bad configs."""

from __future__ import annotations

import copy
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

import configs
from controller.config import ConfigError, config_from_mapping, load_config
from controller.friction import DirectionalParams, LuGreParams


@pytest.fixture(scope="module")
def base() -> dict:
    """The shipped reference config as a plain mapping (mutate a deep copy)."""
    return yaml.safe_load(configs.path("turntable").read_text(encoding="utf-8"))


def _error(base: dict, mutate) -> ConfigError:
    data = copy.deepcopy(base)
    mutate(data)
    with pytest.raises(ConfigError) as info:
        config_from_mapping(data)
    message = str(info.value)
    assert "\n" not in message, message  # one line
    return info.value


def _set(*path_and_value):
    *path, value = path_and_value

    def mutate(data):
        node = data
        for key in path[:-1]:
            node = node[key]
        node[path[-1]] = value

    return mutate


def _delete(*path):
    def mutate(data):
        node = data
        for key in path[:-1]:
            node = node[key]
        del node[path[-1]]

    return mutate


# --- shipped configs ------------------------------------------------------------------------------


def test_shipped_names_include_turntable():
    names = configs.names()
    assert "turntable" in names
    assert configs.path("turntable") == configs.path("turntable.yaml")


@pytest.mark.parametrize("name", configs.names())
def test_every_shipped_config_loads(name):
    path = configs.path(name)
    assert path.exists()
    cfg = load_config(path)
    assert cfg.plant.J > 0 and cfg.controller.J > 0
    assert isinstance(cfg.plant.friction, (LuGreParams, DirectionalParams))
    assert isinstance(cfg.controller.friction, (LuGreParams, DirectionalParams))
    for scenario in cfg.scenarios:
        assert cfg.scenario(scenario).duration_s > 0


def test_reference_config_values(base):
    cfg = config_from_mapping(copy.deepcopy(base))
    f = cfg.plant.friction
    assert f == LuGreParams(Fc=0.20, Fs=0.28, vs=0.01, sigma0=3.0e4, sigma1=0.08, sigma2=0.04, delta=2.0)
    assert f.passivity_margin == pytest.approx(0.008)  # the yaml comment's claim
    assert cfg.plant.encoder.counts_per_rev == 2**24
    assert cfg.plant.cogging[0].harmonic == 36
    assert cfg.controller.compensation == "off"
    assert cfg.loop.rt_priority is None and cfg.loop.cpu_affinity is None
    with pytest.raises(ConfigError, match=r"^scenarios\.nope: no such scenario"):
        cfg.scenario("nope")


# --- errors name the key path ---------------------------------------------------------------------


def test_fs_below_fc_message(base):
    err = _error(base, _set("plant", "friction", "Fs", 0.1))
    assert str(err).startswith("plant.friction.Fs: must be >= Fc")
    assert "0.1" in str(err)
    assert err.path == "plant.friction.Fs"


def test_unknown_key_is_named(base):
    err = _error(base, _set("plant", "frictoin", {"Fc": 1.0}))
    assert str(err).startswith("plant.frictoin: unknown key")
    assert "friction" in str(err)  # the known keys are listed
    assert str(_error(base, _set("plantt", {}))).startswith("plantt: unknown key")
    assert str(_error(base, _set("plant", "friction", "sigma3", 1.0))).startswith("plant.friction.sigma3: unknown key")
    assert str(_error(base, _set("loop", "overrun", "max_consec", 3))).startswith("loop.overrun.max_consec: unknown key")


def test_missing_required_key(base):
    assert str(_error(base, _delete("plant", "J"))).startswith("plant.J: required key missing")
    assert str(_error(base, _delete("controller", "friction", "sigma0"))).startswith(
        "controller.friction.sigma0: required key missing")
    assert str(_error(base, _delete("controller"))).startswith("controller: required key missing")


@pytest.mark.parametrize(
    "path, value, expected",
    [
        (("plant", "J"), "heavy", "plant.J: must be a number"),
        (("plant", "J"), True, "plant.J: must be a number"),
        (("plant", "J"), float("nan"), "plant.J: must not be NaN"),
        (("plant", "J"), 0.0, "plant.J: must be > 0"),
        (("plant", "friction", "Fc"), "0.2", "plant.friction.Fc: must be a number"),
        (("plant", "friction", "Fc"), -0.2, "plant.friction.Fc: must be > 0"),
        (("plant", "friction", "Fc"), float("inf"), "plant.friction.Fc: must be finite"),
        (("plant", "friction", "sigma0"), 0, "plant.friction.sigma0: must be > 0"),
        (("plant", "friction", "delta"), 0.0, "plant.friction.delta: must be > 0"),
        (("controller", "friction", "sigma1"), -1.0, "controller.friction.sigma1: must be >= 0"),
        (("plant", "friction"), 3.0, "plant.friction: must be a mapping"),
        (("plant", "current_loop"), 5, "plant.current_loop: must be a mapping"),
        (("plant", "current_loop", "limit_a"), -1.0, "plant.current_loop.limit_a: must be > 0"),
        (("plant", "encoder", "counts_per_rev"), 1.5, "plant.encoder.counts_per_rev: must be an integer"),
        (("plant", "encoder", "counts_per_rev"), 2, "plant.encoder.counts_per_rev: must be >= 4"),
        (("plant", "cogging"), {"harmonic": 36}, "plant.cogging: must be a list"),
        (("plant", "fc_profile", ), [[0.0, 1.0, 2.0]], "plant.fc_profile[0]: must be a list of 2 items"),
        (("controller", "pid", "kp"), -1.0, "controller.pid.kp: must be >= 0"),
        (("controller", "inertia_feedforward"), "yes", "controller.inertia_feedforward: must be true or false"),
        (("controller", "compensation"), "lugree", "controller.compensation: must be one of"),
        (("controller", "velocity", "source"), "gps", "controller.velocity.source: must be one of"),
        (("loop", "rate_hz"), 0.0, "loop.rate_hz: must be in (0, 20000]"),
        (("loop", "rt_priority"), 100, "loop.rt_priority: must be 1..99"),
        (("loop", "rt_priority"), "high", "loop.rt_priority: must be an integer"),
        (("loop", "cpu_affinity"), [0, "a"], "loop.cpu_affinity[1]: must be an integer"),
        (("loop", "overrun", "max_consecutive"), 0, "loop.overrun.max_consecutive: must be >= 1"),
        (("logging", "buffer_s"), 0.05, "logging.buffer_s: must be >= 2"),
        (("drive", "protocol"), "ethercat", "drive.protocol: must be one of"),
        (("drive", "node_id"), 300, "drive.node_id: must be 0..127"),
        (("drive", "emulated_firmware"), "0.7.1", 'drive.emulated_firmware: must be "0.5.6" or "0.6.<n>"'),
        (("drive", "emulated_firmware"), 0.6, "drive.emulated_firmware: must be a string"),
        (("scenarios", "creep", "reference", "kind"), "zigzag", "scenarios.creep.reference.kind: must be one of"),
        (("scenarios", "reversal", "reference", "frequency_hz"), 0.0,
         "scenarios.reversal.reference.frequency_hz: must be > 0"),
        (("scenarios", "creep", "duration_s"), -1.0, "scenarios.creep.duration_s: must be > 0"),
        (("scenarios", "creep", "bogus"), 1, "scenarios.creep.bogus: unknown key"),
    ],
    ids=lambda x: ".".join(x) if isinstance(x, tuple) else None,
)
def test_bad_values_name_their_key_path(base, path, value, expected):
    err = _error(base, _set(*path, value))
    assert str(err).startswith(expected), str(err)
    # a scalar type or range error shows the offending value
    scalar = isinstance(value, (int, float, str)) and not isinstance(value, bool)
    if scalar and value == value and "unknown key" not in expected and "mapping" not in expected:
        shown = {str(value), repr(value)} | ({str(float(value))} if isinstance(value, int) else set())
        assert any(text in str(err) for text in shown), str(err)


def test_nested_list_paths(base):
    err = _error(base, _set("plant", "cogging", 0, "harmonic", 0))
    assert str(err).startswith("plant.cogging[0].harmonic: must be >= 1")
    err = _error(base, _set("plant", "cogging", 1, "harmonic", "two"))
    assert str(err).startswith("plant.cogging[1].harmonic: must be an integer")
    err = _error(base, _set("plant", "cogging", 1, "amplitude_nm", -0.1))
    assert str(err).startswith("plant.cogging[1].amplitude_nm: must be >= 0")
    err = _error(base, _set("plant", "cogging", 0, "phase", 0.1))
    assert str(err).startswith("plant.cogging[0].phase: unknown key")


def test_fc_profile_validation_names_the_list_item(base):
    err = _error(base, _set("plant", "fc_profile", [[0.0, 1.0], [0.0, 2.0]]))
    assert str(err).startswith("plant.fc_profile[1]: times must increase"), str(err)


def test_fc_profile_validation_is_an_error(base):
    """Whatever the path spelling, bad drift profiles are rejected with the item named."""
    err = _error(base, _set("plant", "fc_profile", [[0.0, 1.0], [0.0, 2.0]]))
    assert str(err).startswith("plant") and "fc_profile[1]" in str(err) and "times must increase" in str(err)
    err = _error(base, _set("plant", "fc_profile", [[0.0, 1.0], [1.0, -2.0]]))
    assert "fc_profile[1]" in str(err) and "scale must be > 0" in str(err)


def test_inf_spellings_accepted(base):
    for spelling in (".inf", "inf", float("inf")):
        data = copy.deepcopy(base)
        data["safety"]["max_temperature_c"] = spelling
        assert config_from_mapping(data).safety.max_temperature_c == float("inf")


# --- directional friction ------------------------------------------------------------------------


def test_directional_friction_parses(base):
    data = copy.deepcopy(base)
    fwd = dict(data["plant"]["friction"])
    rev = dict(fwd, Fc=0.25, Fs=0.35, sigma2=0.06)
    data["plant"]["friction"] = {"forward": fwd, "reverse": rev}
    data["controller"]["friction"] = {"forward": fwd, "reverse": rev}
    cfg = config_from_mapping(data)
    for f in (cfg.plant.friction, cfg.controller.friction):
        assert isinstance(f, DirectionalParams)
        assert f.forward == LuGreParams(**fwd)
        assert f.reverse.Fc == 0.25 and f.reverse.Fs == 0.35 and f.reverse.sigma2 == 0.06
        assert f.for_velocity(0.1) is f.forward and f.for_velocity(-0.1) is f.reverse


def test_directional_friction_errors(base):
    fwd = dict(base["plant"]["friction"])
    bad_rev = dict(fwd, Fs=0.1)
    err = _error(base, _set("plant", "friction", {"forward": fwd, "reverse": bad_rev}))
    assert str(err).startswith("plant.friction.reverse.Fs: must be >= Fc")
    err = _error(base, _set("plant", "friction", {"forward": fwd}))
    assert str(err).startswith("plant.friction.reverse: required key missing")
    err = _error(base, _set("plant", "friction", {"forward": fwd, "reverse": fwd, "sideways": fwd}))
    assert str(err).startswith("plant.friction.sideways: unknown key")
    err = _error(base, _set("plant", "friction", {"forward": dict(fwd, Fcc=1.0), "reverse": fwd}))
    assert str(err).startswith("plant.friction.forward.Fcc: unknown key")


# --- YAML pitfalls and files ---------------------------------------------------------------------


def test_bare_off_gives_a_helpful_message(base, tmp_path):
    text = configs.path("turntable").read_text(encoding="utf-8")
    assert 'compensation: "off"' in text
    bad = tmp_path / "bare_off.yaml"
    bad.write_text(text.replace('compensation: "off"', "compensation: off"), encoding="utf-8")
    with pytest.raises(ConfigError) as info:
        load_config(bad)
    message = str(info.value)
    assert message.startswith("controller.compensation: must be one of")
    assert "off" in message and "quote" in message
    # the mapping route says the same
    assert "quote" in str(_error(base, _set("controller", "compensation", False)))


def test_invalid_yaml_and_empty_and_missing_files(tmp_path):
    broken = tmp_path / "broken.yaml"
    broken.write_text("plant:\n  J: [0.08\n", encoding="utf-8")
    with pytest.raises(ConfigError) as info:
        load_config(broken)
    assert str(info.value).startswith(str(broken)) and "line" in str(info.value)
    assert "\n" not in str(info.value)

    empty = tmp_path / "empty.yaml"
    empty.write_text("# nothing\n", encoding="utf-8")
    with pytest.raises(ConfigError, match="empty config"):
        load_config(empty)

    with pytest.raises(ConfigError, match="cannot read"):
        load_config(tmp_path / "absent.yaml")

    not_mapping = tmp_path / "list.yaml"
    not_mapping.write_text("- 1\n- 2\n", encoding="utf-8")
    with pytest.raises(ConfigError, match="must be a mapping"):
        load_config(not_mapping)


def test_only_safe_yaml_is_accepted(tmp_path):
    evil = tmp_path / "evil.yaml"
    evil.write_text("plant: !!python/object/apply:os.system ['echo hi']\n", encoding="utf-8")
    with pytest.raises(ConfigError):
        load_config(evil)


def test_round_trip_through_a_file(base, tmp_path):
    path = tmp_path / "copy.yaml"
    path.write_text(yaml.safe_dump(base), encoding="utf-8")
    assert load_config(path) == load_config(configs.path("turntable"))


# --- the CLI's error contract ---------------------------------------------------------------------


def _run_cli(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "controller.cli", *args], cwd=cwd,
                          capture_output=True, text=True, timeout=60)


def test_cli_bad_config_is_one_line_exit_2(base, tmp_path):
    data = copy.deepcopy(base)
    data["plant"]["friction"]["Fs"] = 0.1
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump(data), encoding="utf-8")
    out = tmp_path / "out"
    result = _run_cli("curves", "--config", str(bad), "--out", str(out), cwd=tmp_path)
    assert result.returncode == 2, result.stderr
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("frictionctl: error: plant.friction.Fs: must be >= Fc")
    assert "Traceback" not in result.stderr
    assert not out.exists()  # failed before doing anything


def test_cli_unknown_key_and_missing_file(base, tmp_path):
    data = copy.deepcopy(base)
    data["plant"]["frictoin"] = data["plant"].pop("friction")
    bad = tmp_path / "typo.yaml"
    bad.write_text(yaml.safe_dump(data), encoding="utf-8")
    result = _run_cli("curves", "--config", str(bad), "--out", str(tmp_path / "o"), cwd=tmp_path)
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1
    assert result.stderr.startswith("frictionctl: error: plant.frictoin: unknown key")

    result = _run_cli("curves", "--config", str(tmp_path / "nope.yaml"), "--out", str(tmp_path / "o"),
                      cwd=tmp_path)
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1 and result.stderr.startswith("frictionctl: error: ")
    assert "Traceback" not in result.stderr


def test_every_drive_key_is_documented_in_the_readme_with_its_default():
    """The configuration reference's drive.* table has one row per DriveConfig field, and the
    default it states is the schema's."""
    import dataclasses
    import re
    from pathlib import Path

    from controller.config import DriveConfig

    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text(encoding="utf-8")
    section = readme[readme.index("`drive.*` (`controller/config.py`"):]
    rows = {m.group(1): m.group(2) for m in re.finditer(r"^\| `(\w+)` \| ([^|]+) \|", section, re.M)}
    fields = {f.name: f.default for f in dataclasses.fields(DriveConfig)}
    assert set(fields) <= set(rows), f"undocumented: {sorted(set(fields) - set(rows))}"
    for name, default in fields.items():
        stated = rows[name].strip()
        if isinstance(default, bool):
            assert stated == str(default).lower(), name
        elif isinstance(default, (int, float)):
            assert float(stated) == default, name
        elif isinstance(default, str):
            assert stated == f"`{default}`" if default else stated == '`""`', name
        else:  # the PDO lists
            listed = [[e.strip() for e in pdo.split(",")] for pdo in re.findall(r"\[([^\[\]]+)\]", stated)]
            assert listed == [list(p) for p in default], name
