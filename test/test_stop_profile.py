"""The jerk-limited stop of decelerate_on_cancel (`stop_phases`, `deceleration_plan`):
against joint_trajectory_controller's constant deceleration a (time |v|/a plus a control
cycle, distance v²/(2a)) it takes at most 1.2 times as long and as far, its deceleration
never exceeds a, and q, q̇, q̈ stay continuous; over many velocities and limits, and from a
non-zero acceleration."""

import math

import numpy as np
import pytest

from robot_dynamics.trajectories.sampler import (deceleration_plan, JointTrajectorySampler,
                                                 TrajectoryCommand, TrajectoryPoint)
from robot_dynamics.trajectories.splines import (STOP_RAMP_SHARE, STOP_RAMP_TIME, stop_duration,
                                                 stop_phases)

RNG = np.random.default_rng(20261127)
# velocities from 1 µrad/s to 100 rad/s, limits from 0.01 to 100 rad/s², both signs
V = np.concatenate([10.0 ** RNG.uniform(-6.0, 2.0, 300) * RNG.choice([-1.0, 1.0], 300),
                    [1e-12, -1e-9, 0.56, 1.42, 100.0]])
A = np.concatenate([10.0 ** RNG.uniform(-2.0, 2.0, 300), [1.0, 3.0, 0.5, 1.0, 0.01]])


def integrate(v0, a0, phases):
    """(times, positions, velocities, accelerations) at the phase boundaries, exactly."""
    t, p, v, a = [0.0], [0.0], [v0], [a0]
    for h, jerk in phases:
        p.append(p[-1] + h * (v[-1] + h * (0.5 * a[-1] + h * jerk / 6.0)))
        v.append(v[-1] + h * (a[-1] + 0.5 * h * jerk))
        a.append(a[-1] + h * jerk)
        t.append(t[-1] + h)
    return np.array(t), np.array(p), np.array(v), np.array(a)


@pytest.mark.parametrize('v0, limit', list(zip(V, A)))
def test_from_a_constant_velocity_both_bounds_hold_and_the_limit_is_reached_not_exceeded(
        v0, limit):
    phases = stop_phases(v0, 0.0, limit)
    t, p, v, a = integrate(v0, 0.0, phases)
    jtc_time, jtc_distance = abs(v0) / limit, v0 * v0 / (2.0 * limit)
    # JTC's time plus one cycle: the bound holds without the cycle already
    assert jtc_time <= t[-1] <= 1.2 * jtc_time * (1.0 + 1e-12)
    assert t[-1] == pytest.approx(stop_duration(v0, 0.0, limit), rel=1e-12)
    assert np.sign(p[-1]) == np.sign(v0)                # no reversal
    assert jtc_distance * (1.0 - 1e-9) <= abs(p[-1]) <= 1.2 * jtc_distance * (1.0 + 1e-9)
    assert abs(v[-1]) <= 1e-9 * abs(v0) and abs(a[-1]) <= 1e-9 * limit
    # q̈ is piecewise linear: its extremes are at the phase boundaries, and it reaches −a
    assert np.max(np.abs(a)) <= limit * (1.0 + 1e-12)
    assert np.max(np.abs(a)) == pytest.approx(limit, rel=1e-9)
    # the jerk ramps are short but not steps: each a fraction of the stop
    ramps = [h for h, jerk in phases if jerk != 0.0]
    assert len(ramps) == 2 and all(0.1 * jtc_time <= h <= 0.2 * jtc_time for h in ramps)


def sample_plan(plan, n_samples=4001):
    times = np.linspace(plan.start, plan.end, n_samples)
    samples = np.array([np.stack(plan.sample(t)) for t in times])      # (N, 3, n)
    return times, samples[:, 0], samples[:, 1], samples[:, 2]


def test_a_plan_of_many_joints_stays_continuous_and_within_the_limits():
    """All joints of one plan (the pieces between every joint's phase boundaries): each
    starts at its state, never exceeds its limit (or its |q̈0|), has no step in q, q̇ or q̈,
    never turns back, and rests at `final` from its own end on."""
    n = 40
    v0 = V[:n]
    a0 = np.where(np.arange(n) % 3 == 0, 0.0, RNG.uniform(-2.0, 2.0, n) * A[:n])
    limit = A[:n]
    q0 = RNG.uniform(-1.0, 1.0, n)
    plan = deceleration_plan(q0, v0, limit, 5.0, a0)
    q, qd, qdd = plan.sample(5.0)
    np.testing.assert_allclose(q, q0, atol=1e-12)
    np.testing.assert_allclose(qd, v0, rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(qdd, a0, rtol=1e-12, atol=1e-15)
    times, q, qd, qdd = sample_plan(plan)
    assert np.all(np.abs(qdd) <= np.maximum(limit, np.abs(a0)) * (1.0 + 1e-9))
    # steps: between samples h apart q̈ changes at most J·h (J = the largest jerk of the
    # joint's phases), q̇ at most max|q̈|·h
    h = times[1] - times[0]
    jerk = np.array([max((abs(j) for _, j in stop_phases(v, a, d)), default=0.0)
                     for v, a, d in zip(v0, a0, limit)])
    assert np.all(np.abs(np.diff(qdd, axis=0)) <= jerk * h * (1.0 + 1e-6) + 1e-9)
    assert np.all(np.abs(np.diff(qd, axis=0)) <= np.maximum(limit, np.abs(a0)) * h * 1.000001)
    # the direction of travel (of v0, or of a0 from rest) is never reversed
    direction = np.where(v0 != 0.0, np.sign(v0), np.sign(a0))
    assert np.all(qd * direction >= -1e-9 * np.maximum(np.abs(v0), 1e-3))
    # each joint rests at `final` after its own stop, and the plan after all of them
    ends = np.array([stop_duration(v, a, d) for v, a, d in zip(v0, a0, limit)])
    for i in range(n):
        after = times - 5.0 >= ends[i] + 1e-9
        np.testing.assert_allclose(q[after, i], plan.final[i], rtol=0, atol=1e-9)
        assert not qd[after, i].any() or np.max(np.abs(qd[after, i])) < 1e-12
    assert plan.end == pytest.approx(5.0 + ends.max(), abs=1e-12)
    q, qd, qdd = plan.sample(plan.end + 1.0)
    np.testing.assert_array_equal(q, plan.final)
    assert not qd.any() and not qdd.any()


@pytest.mark.parametrize('v0, a0, limit', [
    (1.0, 1.5, 2.0),        # accelerating at the cancel: ramps down through 0 to −a
    (-0.5, 3.0, 4.0),       # braking, but slower than the limit allows
    (-5.0, 3.0, 4.0),       # the same, faster: the ramp floor does not count
    (1.0, -3.0, 2.0),       # braking harder than the limit: ramps back to −a
    (0.01, -3.0, 2.0),      # braking so hard that a0 -> 0 alone reaches rest
    (0.0, -0.9, 1.0),       # at a velocity turning point
    (2.0, 5.0, 1.0),        # |a0| above the limit, along the motion
    (3.0, 0.8, 1.0),        # a cancel while speeding up
])
def test_from_an_acceleration_the_stop_is_continuous_and_ends_at_rest(v0, a0, limit):
    phases = stop_phases(v0, a0, limit)
    t, p, v, a = integrate(v0, a0, phases)
    assert phases and all(h > 0.0 for h, _ in phases)
    assert abs(v[-1]) < 1e-12 and abs(a[-1]) < 1e-12
    assert np.max(np.abs(a)) <= max(limit, abs(a0)) * (1.0 + 1e-12)
    direction = np.sign(v0) if v0 else np.sign(a0)
    assert np.all(v * direction >= -1e-12)
    # a deceleration beyond the limit is never increased, and is left within one ramp
    if -a0 * direction > limit:
        assert phases[0][1] * direction > 0.0
    # against JTC from the same velocity: braking already, the stop takes at most its 1.2
    # bound plus the ramp floor; along the motion (an acceleration JTC drops in one step)
    # the ramp through 0 adds k (1 + r + r²/2) |v0| / a, r = |a0| / a, while k |v0| >= the
    # floor's STOP_RAMP_TIME |a0|
    r, k = abs(a0) / limit, STOP_RAMP_SHARE
    if v0 and a0 * direction < 0.0:
        assert t[-1] <= 1.2 * abs(v0) / limit + STOP_RAMP_TIME * r
    elif v0 and k * abs(v0) >= STOP_RAMP_TIME * abs(a0):
        assert t[-1] == pytest.approx((1.0 + k * (1.0 + r + 0.5 * r * r)) * abs(v0) / limit)


@pytest.mark.parametrize('v0', [0.0, 1e-320, -5e-324])
def test_a_joint_at_rest_or_too_slow_for_a_finite_jerk_holds_at_once(v0):
    assert stop_phases(v0, 0.0, 1.0) == []
    assert stop_duration(v0, 0.0, 1.0) == 0.0
    plan = deceleration_plan([0.3], [v0], [1.0], 2.0)
    assert plan.end == 2.0 and plan.final[0] == 0.3 and not plan.hold


def test_the_issue_example_the_sampler_stops_within_both_bounds_on_a_control_grid():
    """A cancel at 0.56 rad/s with a = 0.5 rad/s², sampled every 10 ms as the controller
    does: rest within 1.2 (|v|/a + one cycle) of the cancel, 1.2 v²/(2a) further on; the
    previous profile took 1.88 s and 1.67 v²/(2a)."""
    cycle, v, a = 0.01, 0.56, 0.5
    sampler = JointTrajectorySampler(['j'], max_deceleration_on_cancel=[a])
    sampler.hold([0.0], 0.0)
    # a constant-velocity trajectory (positions and velocities: cubic segments, linear here)
    sampler.accept(TrajectoryCommand(('j',), tuple(
        TrajectoryPoint(t, (v * t,), (v,)) for t in (1.0, 2.0, 3.0))), 0.0)
    sampler.stop(1.505)
    start = sampler.sample(1.505)
    assert start.velocities[0] == pytest.approx(v) and start.accelerations[0] == 0.0
    t = 1.505
    while sampler.sample(t).velocities[0] != 0.0:
        t = round(t + cycle, 9)
    assert t - 1.505 <= 1.2 * (v / a + cycle)
    distance = sampler.sample(t).positions[0] - start.positions[0]
    assert v * v / (2.0 * a) <= distance <= 1.2 * v * v / (2.0 * a)
    assert max(abs(sampler.sample(1.505 + k * cycle).accelerations[0])
               for k in range(200)) <= a
    assert math.isclose(stop_duration(v, 0.0, a), 1.15 * v / a, rel_tol=1e-12)


@pytest.mark.parametrize('v0, a0, limit', [
    (1.0, 0.0, 1e-300),         # the jerk underflows
    (1e-200, 0.0, 1e-200),      # the peak deceleration underflows
    (1.0, -1e-170, 1e-170),     # braking: the ramp's jerk underflows (it would turn back)
    (1e6, 0.0, 1e-300),
    (1e-300, 0.0, 1e6),
    (1.0, 0.0, 1e-160),         # representable: a very long stop
])
def test_limits_floating_point_cannot_represent_hold_at_once_instead_of_raising(
        v0, a0, limit):
    """Whatever the (finite, > 0) limit and state: a stop that comes to rest without turning
    back, or none (hold), never an exception in the cancel or cmd_timeout path."""
    phases = stop_phases(v0, a0, limit)
    assert all(math.isfinite(h) and h > 0.0 and math.isfinite(j) for h, j in phases)
    if phases:
        _, _, v, a = integrate(v0, a0, phases)
        assert abs(v[-1]) <= 1e-9 * abs(v0) and np.all(v * np.sign(v0) >= -1e-9 * abs(v0))
    plan = deceleration_plan([0.3], [v0], [limit], 2.0, [a0])
    q, qd, _ = plan.sample(2.0)
    assert np.isfinite(plan.final).all() and q[0] == 0.3
    assert qd[0] == (v0 if phases else 0.0)         # moving on, or held
