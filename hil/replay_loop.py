"""The replay's tick loop (compiled with the hot modules; :mod:`hil.replay` is its interface):
for every recorded tick, the same :class:`TickSignals` the loop filled, the same velocity
estimator and the same :class:`ControlLaw`."""

from __future__ import annotations

import time
from typing import Callable

from controller.compensation import Compensator, TickSignals, make_compensator
from controller.config import Config
from controller.control_law import ControlLaw
from controller.velocity import VelocityEstimator


def replay_ticks(cfg: Config, mode: str, dt: float, cols: dict[str, list[float]], n: int,
                 progress: Callable[[float, float], None] | None = None,
                 reference_from_measurement: bool = False
                 ) -> tuple[list[tuple[float, ...]], float, Compensator]:
    """The loop's estimate-and-control path over n recorded ticks. ``cols`` holds lists:
    t_s, pos_rad, drive_vel_rad_s, pos_ref_rad, vel_ref_rad_s, acc_ref_rad_s2, current_a,
    temperature_c, payload_kg, friction_true_nm, torque_cmd_nm (what the drive was sent),
    sequence (optional: a row repeating the previous sample's number was ridden through on the
    held velocity, as the loop does; its logged position is the loop's extrapolation),
    vel_dt_s (optional: the interval the loop's velocity estimate stepped over; without it
    the nominal periods since the last new sample, exact in lockstep only).
    ``reference_from_measurement``: no reference was recorded (a raw capture): the reference is
    the measured motion itself. Returns (one tuple per tick: friction_hat_nm, z_hat, fc_hat_nm,
    residual_nm, torque_cmd_nm, reidentify, learned_nm; wall seconds of the loop; the
    compensator as the last tick left it, for the alarm's reason and proposed set)."""
    compensator = make_compensator(cfg.controller, mode, cfg.loop.rate_hz)
    law = ControlLaw(cfg.controller, compensator)
    velocity = VelocityEstimator(cfg.controller.velocity.source, cfg.controller.velocity.cutoff_hz)
    lim = cfg.safety.torque_limit_nm
    temperature_default = cfg.plant.temperature_c
    c_t, c_pos, c_dvel = cols["t_s"], cols["pos_rad"], cols["drive_vel_rad_s"]
    c_ref, c_vref, c_aref = cols["pos_ref_rad"], cols["vel_ref_rad_s"], cols["acc_ref_rad_s2"]
    c_cur, c_temp, c_true, c_cmd = (cols["current_a"], cols["temperature_c"],
                                    cols["friction_true_nm"], cols["torque_cmd_nm"])
    payload = cols["payload_kg"]
    c_seq = cols["sequence"] if "sequence" in cols else [float(j) for j in range(n)]
    c_vdt = cols["vel_dt_s"] if "vel_dt_s" in cols else [0.0] * n  # 0: from the row count
    last_seq = -1.0
    held = 0
    vel = 0.0
    sig = TickSignals()
    velocity.reset(0.0)
    law.enable(0.0)
    u_prev = 0.0
    rec: list[tuple[float, ...]] = []
    append = rec.append
    comp = compensator
    every = max(1, n // 50)
    t_wall = time.perf_counter()
    for j in range(n):
        pos = c_pos[j]
        sig.t_s = c_t[j]
        sig.pos_rad = pos
        seq = c_seq[j]
        if j == 0 or seq != last_seq:  # a new sample (the loop's rule, controller/loop.py)
            vdt = c_vdt[j]
            vel = velocity.step(pos, c_dvel[j], vdt if vdt > 0.0 else dt * (held + 1))
            last_seq = seq
            held = 0
        else:
            held += 1
        sig.vel_rad_s = vel
        if reference_from_measurement:
            sig.pos_ref_rad = pos
            sig.vel_ref_rad_s = vel
            sig.acc_ref_rad_s2 = 0.0
        else:
            sig.pos_ref_rad = c_ref[j]
            sig.vel_ref_rad_s = c_vref[j]
            sig.acc_ref_rad_s2 = c_aref[j]
        sig.current_a = c_cur[j]
        sig.torque_cmd_prev_nm = u_prev
        temp = c_temp[j]
        sig.temperature_c = temp if temp == temp else temperature_default
        sig.payload_kg = payload[j]
        sig.true_friction_nm = c_true[j]
        u = law.step(sig, dt)
        u = lim if u > lim else (-lim if u < -lim else u)
        append((comp.friction_hat_nm, comp.z_hat, comp.fc_hat_nm, comp.residual_nm, u,
                1.0 if comp.reidentify else 0.0, comp.learned_nm))
        u_prev = c_cmd[j]  # what the drive was actually sent
        if progress is not None and j % every == 0:
            progress(j, n)
    return rec, time.perf_counter() - t_wall, compensator
