"""Hunting guard of the disturbance-observer term: the term's own oscillation in the position
loop is smoothed away, its mean kept.

The DOB feeds the low-passed residual forward at a bandwidth far above the position loop's
(``observer.dob_bandwidth_hz``, 20·f_p), so that a start or a reversal is corrected within a few
ticks. Where the friction the loop feels through the term falls steeply with speed (a believed
Stribeck region a ramp crosses, a believed inertia far off) that fast path closes a loop of its
own: the term swings between its bounds at a few times f_p and the axis hunts with it (traced on
seed 3's mc8 of ``bench compensation``: ±0.13 N·m, the bound, at 110 Hz with f_p 28 Hz, through
every start of the scan; 6.6× oracle). What the term is there for, the model's error, changes no
faster than the reference, that is within the position loop's band; and the reversal it corrects
is one swing, not a train of them.

So the guard splits the term into its mean (a first-order low-pass at f_p) and the fast rest,
and counts the fast rest's half-cycles: one that is shorter than 1/(2·f_p) (faster than the
loop) and peaks above ``observer.dob_hunting_nm`` counts, anything else restarts the count.
From :data:`HALF_CYCLES` in a row on, the fast rest's weight falls with the loop's time constant
1/(2π·f_p); otherwise it returns to 1 with ``observer.dob_hunting_recover_s``. The output is
mean + weight·fast: a hunting term is replaced by its mean, which still carries the model's
error (the weight on the whole term instead lost the mismatched reversals: seed 1's mc3
0.66 → 1.19 µrad, the term's mean through the reversal gone with its swing).
"""

from __future__ import annotations

import math
from typing import Final

from .fastmath import expm1

# Two full periods: a reversal's correction (one swing and its overshoot) is at most three.
HALF_CYCLES: Final = 4


class HuntingGuard:
    """The DOB term with its oscillation faster than the position loop removed once it
    hunts (module docstring). A pure step with explicit ``dt_s``."""

    def __init__(self, threshold_nm: float, loop_bandwidth_hz: float, recover_s: float) -> None:
        self.threshold_nm = threshold_nm  # a half-cycle's peak above this counts [N·m]
        self._tau = 1.0 / (2.0 * math.pi * loop_bandwidth_hz)  # the loop's time constant [s]
        self._half_max = 0.5 / loop_bandwidth_hz  # a half-cycle shorter than this counts [s]
        self._recover_s = recover_s
        self.mean_nm = 0.0  # the term's mean (low-pass at the loop's bandwidth) [N·m]
        self.fast_weight = 1.0  # weight of the term's fast rest in the output [-]
        self.half_cycles = 0  # counted half-cycles in a row
        self._sign = 0  # sign of the fast rest in the current half-cycle
        self._peak = 0.0  # its peak |fast rest| so far [N·m]
        self._length_s = 0.0  # its length so far [s]
        self._dt = -1.0
        self._mean_gain = 0.0
        self._decay = 1.0
        self._recover_gain = 0.0

    @property
    def hunting(self) -> bool:
        return self.half_cycles >= HALF_CYCLES

    def step(self, term: float, dt_s: float) -> float:
        if dt_s != self._dt:
            self._dt = dt_s
            self._mean_gain = -expm1(-dt_s / self._tau)
            self._decay = math.exp(-dt_s / self._tau)
            self._recover_gain = -expm1(-dt_s / self._recover_s)
        mean = self.mean_nm
        mean += self._mean_gain * (term - mean)
        self.mean_nm = mean
        fast = term - mean
        sign = 1 if fast > 0.0 else (-1 if fast < 0.0 else 0)
        if sign != 0 and sign != self._sign:  # a half-cycle ended
            if self._sign != 0:
                if self._peak > self.threshold_nm and self._length_s < self._half_max:
                    self.half_cycles += 1
                else:
                    self.half_cycles = 0
            self._sign = sign
            self._peak = 0.0
            self._length_s = 0.0
        size = fast if fast >= 0.0 else -fast
        if size > self._peak:
            self._peak = size
        self._length_s += dt_s
        if self._length_s >= self._half_max:  # too slow to count: the train is broken
            self.half_cycles = 0
        w = self.fast_weight
        if self.half_cycles >= HALF_CYCLES:
            w *= self._decay
        elif w != 1.0:
            w += self._recover_gain * (1.0 - w)
            if w > 1.0 - 1e-12:  # back: the term passes exactly
                w = 1.0
        self.fast_weight = w
        return term if w == 1.0 else mean + w * fast
