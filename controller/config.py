"""The configuration schema: frozen dataclasses loaded strictly from YAML.

Every unit is stated once here, in the field comment. ``inf`` means "no limit".
``plant:`` is the simulated truth; ``controller:`` is what the controller believes.
The units stated are a rotary axis' (rad, rad/s, N·m, N·m/A, kg·m², counts/rev). With
``units: linear`` at the top of the file the same keys hold m, m/s, N, N/A, kg (J is the moving
mass), N/m, N·s/m and counts/m (``plant.encoder.counts_per_m``): a linear axis is the same
mathematics (:mod:`controller.units`, which also holds the plausibility bounds per kind of axis).
"""

from __future__ import annotations

import dataclasses
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Optional

from drivers.cia402_pdo import DEFAULT_RPDO, DEFAULT_TPDO, validate_mapping

from .friction import DirectionalParams, FrictionParams, FrictionUncertainty, LuGreParams
from .estimation_config import AdaptationConfig, ObserverConfig, ScheduleConfig, check_anchored
from .gains import PIDGains
from .units import AxisKind, AxisUnits, axis_units
from .schema import ConfigError, load_yaml, parse, parse_dataclass, prefixed, register_parser, require

Protocol = Literal["sim", "cia402", "odrive_can", "odrive_ascii"]
Compensation = Literal["off", "coulomb", "stribeck", "lugre", "lugre_adaptive", "oracle"]
# drive.emulated_firmware: the ODrive CAN firmwares the HIL bench emulates (revision a u8 on CAN)
EMULATED_FIRMWARE = re.compile(r"0\.5\.6|0\.6\.(25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])")


def _parse_friction(value: Any, path: str) -> FrictionParams:
    """A flat LuGre set, or ``{forward: {...}, reverse: {...}}`` for direction-dependent sets."""
    if isinstance(value, dict) and ("forward" in value or "reverse" in value):
        for key in value:
            if key not in ("forward", "reverse"):
                raise ConfigError(f"{path}.{key}", "unknown key (known: forward, reverse)")
        for key in ("forward", "reverse"):
            if key not in value:
                raise ConfigError(f"{path}.{key}", "required key missing (directional set needs both)")
        return DirectionalParams(
            forward=parse_dataclass(LuGreParams, value["forward"], f"{path}.forward"),
            reverse=parse_dataclass(LuGreParams, value["reverse"], f"{path}.reverse"),
        )
    return parse_dataclass(LuGreParams, value, path)


register_parser(FrictionParams, _parse_friction)


# --- plant (the simulated truth) ---------------------------------------------------------------


@dataclass(frozen=True)
class CoggingHarmonic:
    harmonic: int  # [per revolution]
    amplitude_nm: float  # [N·m]
    phase_rad: float = 0.0  # [rad]

    def __post_init__(self) -> None:
        require(self.harmonic >= 1, "harmonic", f"must be >= 1, got {self.harmonic}")
        require(self.amplitude_nm >= 0, "amplitude_nm", f"must be >= 0, got {self.amplitude_nm}")


@dataclass(frozen=True)
class CurrentLoopConfig:
    bandwidth_hz: float = 1000.0  # first-order lag of the drive's current loop [Hz]
    limit_a: float = 10.0  # [A]

    def __post_init__(self) -> None:
        require(self.bandwidth_hz > 0, "bandwidth_hz", f"must be > 0, got {self.bandwidth_hz}")
        require(self.limit_a > 0, "limit_a", f"must be > 0, got {self.limit_a}")


@dataclass(frozen=True)
class CurrentSensorConfig:
    noise_std_a: float = 0.0  # [A], white Gaussian
    resolution_a: float = 0.0  # quantization step [A]; 0 = not quantized

    def __post_init__(self) -> None:
        require(self.noise_std_a >= 0, "noise_std_a", f"must be >= 0, got {self.noise_std_a}")
        require(self.resolution_a >= 0, "resolution_a", f"must be >= 0, got {self.resolution_a}")


@dataclass(frozen=True)
class EncoderConfig:
    counts_per_rev: int = 2**24  # rotary axis [counts/rev]
    counts_per_m: Optional[float] = None  # linear axis (units: linear, required there) [counts/m]

    def __post_init__(self) -> None:
        require(self.counts_per_rev >= 4, "counts_per_rev", f"must be >= 4, got {self.counts_per_rev}")
        if self.counts_per_m is not None:
            require(math.isfinite(self.counts_per_m) and self.counts_per_m > 0, "counts_per_m",
                    f"must be > 0 and finite, got {self.counts_per_m}")

    @property
    def rad_per_count(self) -> float:
        """One count in the axis' length unit: rad (counts_per_rev) or m (counts_per_m)."""
        if self.counts_per_m is not None:
            return 1.0 / self.counts_per_m
        return 2.0 * math.pi / self.counts_per_rev


@dataclass(frozen=True)
class PlantConfig:
    J: float  # rotor + platter inertia [kg·m²]
    Kt: float  # torque constant [N·m/A]
    friction: FrictionParams  # true LuGre friction
    cogging: tuple[CoggingHarmonic, ...] = ()  # torque ripple over angle
    load_torque_nm: float = 0.0  # constant load [N·m]
    unbalance_nm: float = 0.0  # unbalance amplitude m·g·r [N·m], torque = amp·sin(θ + phase)
    unbalance_phase_rad: float = 0.0  # [rad]
    current_loop: CurrentLoopConfig = field(default_factory=CurrentLoopConfig)
    current_sensor: CurrentSensorConfig = field(default_factory=CurrentSensorConfig)
    encoder: EncoderConfig = field(default_factory=EncoderConfig)
    # Fc drift over time: breakpoints (t [s], Fc scale [-]), linear between, held after the last.
    fc_profile: tuple[tuple[float, float], ...] = ()
    temperature_c: float = 25.0  # reported drive temperature [°C]
    # Internal step: at most a twentieth of the bristle period 2π·sqrt(J/sigma0), and at least
    # this many substeps per control period.
    min_substeps: int = 4

    def __post_init__(self) -> None:
        require(math.isfinite(self.J) and self.J > 0, "J", f"must be > 0 and finite, got {self.J}")
        check_torque_constant(self.Kt, None)
        require(self.min_substeps >= 1, "min_substeps", f"must be >= 1, got {self.min_substeps}")
        last_t = -math.inf
        for i, (t, scale) in enumerate(self.fc_profile):
            require(t > last_t, f"fc_profile[{i}]", f"times must increase ({t} after {last_t})")
            require(scale > 0, f"fc_profile[{i}]", f"scale must be > 0, got {scale}")
            last_t = t


# --- controller (what it believes) --------------------------------------------------------------


@dataclass(frozen=True)
class VelocityEstimatorConfig:
    source: Literal["encoder", "drive"] = "encoder"  # encoder difference, or the drive's own
    cutoff_hz: float = 100.0  # first-order low-pass on the encoder difference [Hz]

    def __post_init__(self) -> None:
        require(self.cutoff_hz > 0, "cutoff_hz", f"must be > 0, got {self.cutoff_hz}")


@dataclass(frozen=True)
class ControllerConfig:
    J: float  # believed inertia [kg·m²] (inertia feedforward, momentum observer)
    Kt: float  # believed torque constant [N·m/A]
    friction: FrictionParams  # believed friction
    pid: PIDGains
    compensation: Compensation = "off"
    inertia_feedforward: bool = True  # add J·a_ref
    velocity: VelocityEstimatorConfig = field(default_factory=VelocityEstimatorConfig)
    # regularised sign width for static feedforward from the reference velocity [rad/s]
    feedforward_v_eps: float = 0.0
    observer: ObserverConfig = field(default_factory=ObserverConfig)  # lugre, lugre_adaptive
    adaptation: AdaptationConfig = field(default_factory=AdaptationConfig)  # lugre_adaptive
    schedule: Optional[ScheduleConfig] = None  # parameter sets blended by lugre_adaptive
    # standard errors of the believed set and J (a params file's uncertainty:, applied with it
    # by --params; null: not stated): how far the feedforward model's damping term is trusted
    # (observer.ff_clamp_margin_nm)
    friction_se: Optional[FrictionUncertainty] = None

    def __post_init__(self) -> None:
        require(math.isfinite(self.J) and self.J > 0, "J", f"must be > 0 and finite, got {self.J}")
        check_torque_constant(self.Kt, None)
        require(self.feedforward_v_eps >= 0, "feedforward_v_eps",
               f"must be >= 0, got {self.feedforward_v_eps}")
        if self.schedule is not None:  # a schedule is anchored to the believed set
            check_anchored(self.schedule, self.friction)


def believing(controller: ControllerConfig, friction: FrictionParams, **changes: Any
              ) -> ControllerConfig:
    """``controller`` believing ``friction`` (and ``changes``, e.g. ``J``): the stated uncertainty
    of the set it replaces is dropped, as it never outlives its set (``friction_se``)."""
    return dataclasses.replace(controller, friction=friction, friction_se=None, **changes)


# --- loop, safety, logging, drive ---------------------------------------------------------------


@dataclass(frozen=True)
class OverrunPolicy:
    warn: bool = True
    max_consecutive: int = 5  # fault after this many overruns in a row
    max_per_second: int = 50  # fault after this many missed deadlines within one second

    def __post_init__(self) -> None:
        require(self.max_consecutive >= 1, "max_consecutive", f"must be >= 1, got {self.max_consecutive}")
        require(self.max_per_second >= 1, "max_per_second", f"must be >= 1, got {self.max_per_second}")


@dataclass(frozen=True)
class LoopConfig:
    rate_hz: float = 1000.0  # [Hz]
    spin_s: float = 0.0002  # busy-wait the last part of each period [s] (sleep before it)
    rt_priority: Optional[int] = None  # SCHED_FIFO priority 1..99; null = do not request
    cpu_affinity: Optional[tuple[int, ...]] = None  # CPUs to pin to; null = do not pin
    lock_memory: bool = True  # mlockall where permitted
    overrun: OverrunPolicy = field(default_factory=OverrunPolicy)

    def __post_init__(self) -> None:
        require(0 < self.rate_hz <= 20000, "rate_hz", f"must be in (0, 20000], got {self.rate_hz}")
        require(self.spin_s >= 0, "spin_s", f"must be >= 0, got {self.spin_s}")
        # spinning a whole period never sleeps: the log writer and bus threads starve
        require(self.spin_s < 1.0 / self.rate_hz, "spin_s",
                f"must be shorter than the period 1/rate_hz = {1.0 / self.rate_hz:g} s, got {self.spin_s:g}")
        if self.rt_priority is not None:
            require(1 <= self.rt_priority <= 99, "rt_priority", f"must be 1..99, got {self.rt_priority}")

    @property
    def dt_s(self) -> float:
        return 1.0 / self.rate_hz


@dataclass(frozen=True)
class SafetyConfig:
    torque_limit_nm: float = 5.0  # [N·m], command clamp and fault above it when measured
    velocity_limit_rad_s: float = 2.0  # [rad/s]
    following_error_floor_rad: float = 0.005  # [rad]
    following_error_per_speed_s: float = 0.1  # limit = floor + this·|v_ref| [rad per rad/s]
    standstill_window_rad: float = 0.002  # reference at rest: |pos − ref| must stay within [rad]
    standstill_after_s: float = 0.5  # reference at rest this long before the window applies [s]
    stale_ticks: int = 5  # no new feedback sample for this many ticks => fault
    stop_ramp_s: float = 0.05  # SS1: time to decelerate to standstill (bounded by stop_decel) [s]
    max_temperature_c: float = math.inf  # [°C]
    # SS1 deceleration bound [rad/s²]; null: 0.5·torque_limit_nm / controller.J (controller/stop.py)
    stop_decel_rad_s2: Optional[float] = None
    hold_s: float = 0.0  # controlled hold: standstill held this long before the disable [s]

    def __post_init__(self) -> None:
        # Documented ranges (README, configuration reference): every limit finite — a safety
        # limit of .inf is no limit — and inside what any axis of its kind could mean (the
        # bounds that depend on the kind: Config, which knows ``units``).
        check_safety_ranges(self, None)
        require(math.isfinite(self.hold_s) and 0 <= self.hold_s <= 600, "hold_s",
                f"must be finite and in [0, 600] s, got {self.hold_s}")
        if self.stop_decel_rad_s2 is not None:
            require(math.isfinite(self.stop_decel_rad_s2) and self.stop_decel_rad_s2 > 0,
                    "stop_decel_rad_s2", f"must be finite and > 0 (or null: the rule), "
                                         f"got {self.stop_decel_rad_s2}")
        require(isinstance(self.stale_ticks, int) and 1 <= self.stale_ticks <= MAX_STALE_TICKS,
                "stale_ticks", f"must be 1..{MAX_STALE_TICKS}, got {self.stale_ticks}")
        require(not math.isnan(self.max_temperature_c) and -40 < self.max_temperature_c,
                "max_temperature_c", f"must be > -40 °C (.inf: no temperature limit), "
                                     f"got {self.max_temperature_c}")


def safety_ranges(axis: AxisUnits | None) -> tuple[tuple[str, float, float], ...]:
    """(field, low, high) of each SafetyConfig limit for a kind of axis; low is exclusive
    unless the field may be 0. Force, speed and length bounds are the axis' own
    (:mod:`controller.units`: what any such axis could mean; unbounded for ``None``, the kind
    not known yet); times are the same for both."""
    force, speed, length = ((axis.max_force, axis.max_speed, axis.max_length) if axis is not None
                            else (math.inf, math.inf, math.inf))
    return (
        ("torque_limit_nm", 0.0, force),
        ("velocity_limit_rad_s", 0.0, speed),
        ("following_error_floor_rad", 0.0, length),
        ("following_error_per_speed_s", 0.0, 10.0),
        ("standstill_window_rad", 0.0, length),
        ("standstill_after_s", 0.0, 60.0),
        ("stop_ramp_s", 0.0, 10.0),
    )


_MAY_BE_ZERO = frozenset({"following_error_per_speed_s", "standstill_after_s", "stop_ramp_s"})
MAX_STALE_TICKS = 1000


def check_safety_ranges(safety: "SafetyConfig", axis: AxisUnits | None, prefix: str = "") -> None:
    """Every limit finite (a safety limit of .inf is no limit) and in its range for ``axis``
    (``None``: the section alone, before the kind of axis is known: sign and times only)."""
    for name, low, high in safety_ranges(axis):
        value = getattr(safety, name)
        zero_ok = name in _MAY_BE_ZERO
        range_text = (f"{'[' if zero_ok else '('}{low:g}, {high:g}]" if math.isfinite(high)
                      else f"{'>=' if zero_ok else '>'} {low:g}")
        require(math.isfinite(value) and low <= value <= high and (low > 0 or zero_ok or value > 0),
                prefix + name, f"must be finite and {'in ' if math.isfinite(high) else ''}"
                               f"{range_text}, got {value}")


def check_torque_constant(Kt: float, axis: AxisUnits | None, name: str = "Kt") -> None:
    """A torque (force) constant above the axis' bound is a unit mistake (mN·m/A for N·m/A);
    ``axis`` None: the section alone, before the kind of axis is known (> 0 and finite)."""
    if axis is None:
        require(math.isfinite(Kt) and Kt > 0, name, f"must be > 0 and finite, got {Kt}")
        return
    unit, top = axis.of("N·m/A"), axis.max_force_constant
    require(math.isfinite(Kt) and 0 < Kt <= top, name,
            f"must be > 0 and <= {top:g} {unit}, got {Kt}"
            + (f" (m{unit}? the unit is {unit})" if Kt > top else ""))


@dataclass(frozen=True)
class LoggingConfig:
    chunk_s: float = 0.05  # the writer flushes this much at a time, polling every chunk_s/2 [s]
    buffer_s: float = 2.0  # ring of ticks between loop and writer [s]; full => fault

    def __post_init__(self) -> None:
        require(self.chunk_s > 0, "chunk_s", f"must be > 0, got {self.chunk_s}")
        require(self.buffer_s >= 2 * self.chunk_s, "buffer_s", f"must be >= 2·chunk_s, got {self.buffer_s}")


@dataclass(frozen=True)
class DriveConfig:
    protocol: Protocol = "sim"
    interface: str = "virtual"  # python-can interface (socketcan, pcan, virtual, ...)
    channel: str = "vcan0"  # python-can channel
    bitrate: int = 1000000  # [bit/s]
    node_id: int = 1  # CANopen 1..127; ODrive 0..63
    port: str = ""  # serial port (odrive_ascii)
    baudrate: int = 115200  # [baud]
    axis: int = 0  # ODrive axis number (ASCII)
    timeout_s: float = 0.002  # per-exchange receive timeout [s]
    heartbeat_timeout_s: float = 0.5  # [s]
    watchdog_timeout_s: float = 0.005  # drive-side watchdog [s]; .inf = leave the watchdog alone
    eds_path: str = ""  # CiA 402: EDS of the drive; "" = built-in minimal object dictionary
    counts_per_rev: int = 16777216  # CiA 402: position actual 0x6064 [counts/rev]
    heartbeat_period_s: float = 0.1  # CiA 402: drive producer time 0x1017, master heartbeat [s]
    master_node_id: int = 127  # CiA 402: node id of the master heartbeat (0x700+id)
    cyclic_feedback: bool = False  # odrive_can: drive sends encoder/Iq at the loop rate (no requests)
    checksum: bool = False  # odrive_ascii: append and require the *checksum on every line
    status_every_ticks: int = 10  # odrive_ascii: poll the axis state every N ticks (0 = never)
    # a disable (and a CiA 402 fault reset) must be confirmed by the drive's reported state within
    # this [s]; ODrive CAN confirms by heartbeat, so it must exceed the drive's heartbeat period
    state_timeout_s: float = 0.5
    # true: enable even when the drive-side watchdog / heartbeat consumer cannot be configured and
    # read back (a warning at every enable); false: refuse to enable then
    allow_unprotected: bool = False
    # CiA 402 PDO mapping: per PDO, objects by name or 0xIIII[:SS] (drivers/cia402_pdo.py CATALOG)
    tpdo: tuple[tuple[str, ...], ...] = DEFAULT_TPDO
    rpdo: tuple[tuple[str, ...], ...] = DEFAULT_RPDO
    # HIL bench (hil, faults), odrive_can only (the ASCII emulator stays 0.5.6): the firmware the
    # emulated drive speaks, "0.5.6" or "0.6.<n>"; a real drive's is read at open
    emulated_firmware: str = "0.5.6"

    def __post_init__(self) -> None:
        require(0 <= self.node_id <= 127, "node_id", f"must be 0..127, got {self.node_id}")
        require(self.timeout_s > 0, "timeout_s", f"must be > 0, got {self.timeout_s}")
        require(0 < self.heartbeat_period_s < self.heartbeat_timeout_s, "heartbeat_period_s",
                f"must be in (0, heartbeat_timeout_s), got {self.heartbeat_period_s}")
        require(1 <= self.master_node_id <= 127, "master_node_id",
                f"must be 1..127, got {self.master_node_id}")
        require(self.counts_per_rev >= 4, "counts_per_rev", f"must be >= 4, got {self.counts_per_rev}")
        require(math.isfinite(self.state_timeout_s) and 0 < self.state_timeout_s <= 10,
                "state_timeout_s", f"must be finite and in (0, 10] s, got {self.state_timeout_s}")
        require(EMULATED_FIRMWARE.fullmatch(self.emulated_firmware) is not None, "emulated_firmware",
                f'must be "0.5.6" or "0.6.<n>" (n 0..255), got {self.emulated_firmware!r}')
        validate_mapping(self.tpdo, self.rpdo)  # ValueError "tpdo[i][j]: ..." → drive.tpdo[i][j]


# --- scenarios ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class ReferenceConfig:
    kind: Literal["constant_velocity", "sine", "steps", "scan", "hold"]
    velocity_rad_s: float = 0.0  # constant_velocity; scan cruise speed [rad/s]
    amplitude_rad: float = 0.0  # sine amplitude [rad]
    frequency_hz: float = 0.0  # sine frequency [Hz]
    step_rad: float = 0.0  # steps: size of each step [rad]
    step_counts: int = 0  # steps: size in encoder counts (used when step_rad is 0)
    dwell_s: float = 0.5  # steps/scan: rest between moves [s]
    distance_rad: float = 0.0  # scan: travel each way [rad]
    max_velocity_rad_s: float = 0.05  # steps profile limit [rad/s]
    max_accel_rad_s2: float = 1.0  # steps/scan profile limit [rad/s²]
    max_jerk_rad_s3: float = math.inf  # steps/scan: inf = trapezoidal, finite = jerk-limited [rad/s³]
    start_s: float = 0.0  # the reference holds still before this [s]

    def __post_init__(self) -> None:
        for name in ("max_velocity_rad_s", "max_accel_rad_s2", "max_jerk_rad_s3"):
            require(getattr(self, name) > 0, name, f"must be > 0, got {getattr(self, name)}")
        require(self.dwell_s >= 0, "dwell_s", f"must be >= 0, got {self.dwell_s}")
        require(self.start_s >= 0, "start_s", f"must be >= 0, got {self.start_s}")
        if self.kind == "sine":
            require(self.frequency_hz > 0, "frequency_hz", f"must be > 0 for a sine, got {self.frequency_hz}")
        if self.kind == "steps":
            require(self.step_rad != 0 or self.step_counts != 0, "step_rad",
                    "steps need step_rad or step_counts non-zero")
        if self.kind in ("steps", "scan"):
            require(math.isfinite(self.max_accel_rad_s2) or math.isfinite(self.max_jerk_rad_s3),
                    "max_accel_rad_s2", "must be finite when max_jerk_rad_s3 is inf")
        if self.kind == "scan":
            require(self.distance_rad > 0, "distance_rad", f"must be > 0 for a scan, got {self.distance_rad}")
            require(self.velocity_rad_s > 0, "velocity_rad_s", f"must be > 0 for a scan, got {self.velocity_rad_s}")


DEFAULT_PAYLOAD_RADIUS_M = 0.1  # [m], a rotary payload's radius of gyration when not given


@dataclass(frozen=True)
class PlantChange:
    """A step change at time ``at_s`` (the schedule scenario): the plant changes, and the
    operator-declared scheduling variables (payload) change with it."""

    at_s: float  # [s]
    payload_kg: Optional[float] = None  # new payload mass [kg]
    # rotary: radius of gyration of the payload [m], ΔJ = m·r² (null: 0.1 m); linear: must be
    # null, the payload's mass adds to the moving mass (ΔM = m)
    payload_radius_m: Optional[float] = None
    temperature_c: Optional[float] = None  # new drive temperature [°C]
    fc_scale: Optional[float] = None  # new factor on the plant's Fc and Fs [-]

    def __post_init__(self) -> None:
        require(self.at_s >= 0, "at_s", f"must be >= 0, got {self.at_s}")
        if self.payload_kg is not None:
            require(self.payload_kg >= 0, "payload_kg", f"must be >= 0, got {self.payload_kg}")
        if self.payload_radius_m is not None:
            require(math.isfinite(self.payload_radius_m) and self.payload_radius_m >= 0,
                    "payload_radius_m", f"must be >= 0 and finite, got {self.payload_radius_m}")

    def added_inertia(self, units: AxisKind) -> float:
        """What the payload adds to J [kg·m²] or to the moving mass [kg] (0 without one)."""
        if self.payload_kg is None:
            return 0.0
        if units == "linear":
            return self.payload_kg
        r = DEFAULT_PAYLOAD_RADIUS_M if self.payload_radius_m is None else self.payload_radius_m
        return self.payload_kg * r * r
        if self.fc_scale is not None:
            require(self.fc_scale > 0, "fc_scale", f"must be > 0, got {self.fc_scale}")


# Faults a scenario can inject (``faults:``). The plant's (any backend's plant; ``load_step``
# needs ``torque_nm``) and the drive links' (each emulator injects them at the protocol level;
# which backend takes which: ``hil.fault_injection.SUPPORTED``).
FaultName = Literal[
    "stale", "nan_current", "drive_fault", "blocked_rotor", "inverted_sign", "load_step",
    "frame_loss", "bus_off", "error_frames", "rtr", "idle_ignored", "heartbeat_stop",
    "serial_unplug", "line_noise",
]
_COUNTED_FAULTS = ("frame_loss", "error_frames")


@dataclass(frozen=True)
class ScenarioFault:
    """One injected fault: ``kind`` from the first tick at or after ``at_s`` of the run."""

    at_s: float  # [s] from the start of the run
    kind: FaultName
    torque_nm: Optional[float] = None  # load_step: the added load torque [N·m] (opposes +rad)
    frames: int = 0  # frame_loss / error_frames: how many frames (frame_loss 0 = all from then on)

    def __post_init__(self) -> None:
        require(math.isfinite(self.at_s) and self.at_s >= 0, "at_s",
                f"must be a finite time >= 0 s, got {self.at_s}")
        if self.kind == "load_step":
            require(self.torque_nm is not None, "torque_nm", "required for kind load_step")
        else:
            require(self.torque_nm is None, "torque_nm", f"only for kind load_step, not {self.kind}")
        if self.torque_nm is not None:
            require(math.isfinite(self.torque_nm) and abs(self.torque_nm) <= 1e4, "torque_nm",
                    f"must be finite, |torque_nm| <= 1e4 N·m, got {self.torque_nm}")
        if self.kind in _COUNTED_FAULTS:
            require(0 <= self.frames <= 1_000_000, "frames", f"must be 0..1000000, got {self.frames}")
            require(self.kind != "error_frames" or self.frames > 0, "frames",
                    "error_frames needs frames >= 1")
        else:
            require(self.frames == 0, "frames", f"only for kinds {', '.join(_COUNTED_FAULTS)}, "
                                                f"not {self.kind}")


@dataclass(frozen=True)
class ScenarioConfig:
    reference: ReferenceConfig
    duration_s: float = 10.0  # [s]
    fc_profile: Optional[tuple[tuple[float, float], ...]] = None  # overrides plant.fc_profile
    changes: tuple[PlantChange, ...] = ()
    faults: tuple[ScenarioFault, ...] = ()  # injected faults (sim and hil)
    description: str = ""

    def __post_init__(self) -> None:
        require(self.duration_s > 0, "duration_s", f"must be > 0, got {self.duration_s}")
        for i, fault in enumerate(self.faults):
            require(fault.at_s < self.duration_s, f"faults[{i}].at_s",
                    f"must be before the end of the scenario ({self.duration_s:g} s), got {fault.at_s:g}")


# --- the whole file -----------------------------------------------------------------------------


@dataclass(frozen=True)
class Config:
    plant: PlantConfig
    controller: ControllerConfig
    loop: LoopConfig = field(default_factory=LoopConfig)
    safety: SafetyConfig = field(default_factory=SafetyConfig)
    logging: LoggingConfig = field(default_factory=LoggingConfig)
    drive: DriveConfig = field(default_factory=DriveConfig)
    scenarios: dict[str, ScenarioConfig] = field(default_factory=dict)
    description: str = ""
    # rotary: rad, rad/s, N·m, N·m/A, kg·m², counts/rev; linear: m, m/s, N, N/A, kg, counts/m —
    # the same keys (``velocity_rad_s`` holds m/s, ``torque_limit_nm`` N, ``J`` the moving mass)
    units: AxisKind = "rotary"

    def __post_init__(self) -> None:
        self._check_units()
        # Against the loop period: stale feedback is detected within 1 s at most (the drive
        # watchdog against the period is each driver's check; see also check_real_clock).
        dt = self.loop.dt_s
        stale_s = self.safety.stale_ticks * dt
        require(self.safety.stale_ticks * dt <= 1.0, "safety.stale_ticks",
                f"{self.safety.stale_ticks} ticks at {self.loop.rate_hz:g} Hz is {stale_s:g} s "
                f"without feedback: must be <= 1 s")

    @property
    def axis(self) -> AxisUnits:
        """Unit names and plausibility bounds of this kind of axis (:mod:`controller.units`)."""
        return axis_units(self.units)

    def _check_units(self) -> None:
        """What depends on the kind of axis: the force-constant and safety bounds, the encoder's
        scale, a payload's inertia, and where the axis can run."""
        axis = self.axis
        check_torque_constant(self.plant.Kt, axis, "plant.Kt")
        check_torque_constant(self.controller.Kt, axis, "controller.Kt")
        check_safety_ranges(self.safety, axis, "safety.")
        linear = self.units == "linear"
        if linear:
            require(self.plant.encoder.counts_per_m is not None, "plant.encoder.counts_per_m",
                    "required with units: linear (counts per metre of the scale)")
            require(self.drive.protocol == "sim", "drive.protocol",
                    f"units: linear runs on the simulated drive only (sim), got "
                    f"{self.drive.protocol!r}: the drivers and emulators speak revolutions")
        else:
            require(self.plant.encoder.counts_per_m is None, "plant.encoder.counts_per_m",
                    "a rotary axis counts per revolution: counts_per_rev (or units: linear)")
        for name, sc in self.scenarios.items():
            for i, ch in enumerate(sc.changes):
                require(not (linear and ch.payload_radius_m is not None),
                        f"scenarios.{name}.changes[{i}].payload_radius_m",
                        "a linear axis' payload adds its mass: leave the radius out")

    def check_real_clock(self) -> None:
        """Checks that only hold on the real clock (``run``, ``hil --realtime``): a receive wait
        must end before the stale-feedback check fires (stale_ticks periods), or a lost answer
        blocks the loop instead of being detected. (Lockstep runs wait on the wall clock for a
        simulated period, so a long timeout there costs nothing.)"""
        stale_s = self.safety.stale_ticks * self.loop.dt_s
        if self.drive.protocol != "sim" and not self.drive.timeout_s < stale_s:
            raise ConfigError("drive.timeout_s", f"must be shorter than safety.stale_ticks periods "
                                                 f"({stale_s:g} s) on the real clock, got "
                                                 f"{self.drive.timeout_s}")
        # an ODrive watchdog is fed by the loop's traffic: waiting out one lost reply must not
        # starve it (the drive would fault on a single lost frame)
        watchdog = self.drive.watchdog_timeout_s
        if (self.drive.protocol in ("odrive_can", "odrive_ascii") and math.isfinite(watchdog)
                and not self.drive.timeout_s < watchdog):
            raise ConfigError("drive.timeout_s", f"must be shorter than drive.watchdog_timeout_s "
                                                 f"({watchdog:g} s) on the real clock, got "
                                                 f"{self.drive.timeout_s}: one lost reply would "
                                                 f"starve the drive watchdog")

    def scenario(self, name: str) -> ScenarioConfig:
        if name not in self.scenarios:
            known = ", ".join(sorted(self.scenarios)) or "none"
            raise ConfigError(f"scenarios.{name}", f"no such scenario (known: {known})")
        return self.scenarios[name]


def config_from_mapping(data: Any) -> Config:
    return parse(Config, data, "")


def load_config(path: str | Path) -> Config:
    """Load and validate a config file. Raises ConfigError (one line, with the key path)."""
    data = load_yaml(path)
    if data is None:
        raise ConfigError("", f"{path}: empty config")
    return config_from_mapping(data)


def shipped_config_dir() -> Path:
    """The shipped YAML files: the ``configs`` folder installed beside this package (found by
    path, never by ``import configs``, which a user's own ``configs`` package would shadow)."""
    return Path(__file__).resolve().parent.parent / "configs"


def shipped_config_names() -> list[str]:
    return sorted(p.stem for p in shipped_config_dir().glob("*.yaml"))


def resolve_config_path(name_or_path: str | Path) -> Path:
    """A path to an existing file, or the name of a shipped config (``turntable``)."""
    p = Path(name_or_path)
    if p.is_file():
        return p
    if p.is_dir():
        raise ConfigError("", f"{p}: is a directory, not a config file")
    name = str(name_or_path)
    shipped = shipped_config_dir() / (name if name.endswith((".yaml", ".yml")) else f"{name}.yaml")
    if "/" not in name and shipped.is_file():
        return shipped
    raise ConfigError("", f"{name_or_path}: no such file, and no shipped config of that name "
                          f"(shipped: {', '.join(shipped_config_names())})")


__all__ = [
    "Config", "ConfigError", "ControllerConfig", "PlantConfig", "PIDGains", "load_config",
    "config_from_mapping", "resolve_config_path", "prefixed", "believing",
]
