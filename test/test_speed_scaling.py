"""Speed scaling without ROS: the trajectory time s(t) under a factor f that moves at a rate
limit (robot_dynamics/speed_scaling.py), and the sampler's reference under it
(q̇_d = f q_d', q̈_d = f² q_d'' + ḟ q_d'). Expected values come from numerical integration
and differentiation of what the code returns, or from the unscaled trajectory."""

import math

import numpy as np
import pytest

from robot_dynamics.trajectories.speed_scaling import check_factor, MAX_RAMPS, ScaledTime
from robot_dynamics.trajectories.sampler import (deceleration_plan, JointTrajectorySampler,
                                                 OutsideTrajectory, TrajectoryCommand,
                                                 TrajectoryPoint)

JOINTS = ('j1', 'j2')
Q0 = np.array([0.2, -0.3])
NOW = 500.0


def move(duration=2.0, start=0.0):
    """Rest to rest, positions, velocities and accelerations given (a quintic)."""
    points = []
    for k in range(1, 21):
        tau = k / 20.0
        s = 10 * tau**3 - 15 * tau**4 + 6 * tau**5
        ds = (30 * tau**2 - 60 * tau**3 + 30 * tau**4) / duration
        dds = (60 * tau - 180 * tau**2 + 120 * tau**3) / duration**2
        delta = np.array([0.8, -0.5])
        points.append(TrajectoryPoint(k * duration / 20.0, tuple(Q0 + s * delta),
                                      tuple(ds * delta), tuple(dds * delta)))
    return TrajectoryCommand(JOINTS, tuple(points), start)


def sampler(**kwargs):
    s = JointTrajectorySampler(JOINTS, **kwargs)
    s.hold(Q0, NOW)
    return s


def integral_of_factor(clock, t0, t1, steps=20000):
    """∫ f dt on [t0, t1] by the trapezoidal rule on f as the clock reports it."""
    t = np.linspace(t0, t1, steps + 1)
    f = np.array([clock.factor(x) for x in t])
    return float(np.sum(0.5 * (f[1:] + f[:-1]) * np.diff(t)))


# --- the time mapping ------------------------------------------------------------------

def test_at_factor_one_the_trajectory_time_is_the_clock_bit_for_bit():
    clock = ScaledTime()
    clock.start(NOW)
    times = NOW + np.random.default_rng(3).uniform(-10.0, 1e4, 1000)
    assert all(clock.at(t) == (t, 1.0, 0.0) for t in times)
    clock.request(1.0, NOW + 5.0)          # the same factor again: still exact
    assert all(clock.at(t)[0] == t for t in times)


def test_a_constant_factor_advances_the_trajectory_time_at_that_fraction():
    clock = ScaledTime(factor=0.25)
    clock.start(10.0)
    for t in (10.0, 10.5, 13.0, 100.0):
        assert clock.at(t)[0] == pytest.approx(10.0 + 0.25 * (t - 10.0), abs=1e-12)


def test_a_new_factor_is_reached_along_a_ramp_at_the_rate_limit_and_s_integrates_f():
    clock = ScaledTime(rate_limit=2.0)
    clock.start(0.0)
    clock.request(0.5, 1.0)                 # from 1 at t = 1 s: 0.25 s of ramp
    clock.request(0.0, 2.0)                 # then 0.25 s more
    clock.request(1.0, 3.0)                 # and back up in 0.5 s
    expected_f = {0.9: 1.0, 1.1: 0.8, 1.25: 0.5, 1.9: 0.5, 2.125: 0.25, 2.5: 0.0,
                  3.25: 0.5, 3.5: 1.0, 9.0: 1.0}
    for t, f in expected_f.items():
        assert clock.factor(t) == pytest.approx(f, abs=1e-12), t
    for t in (0.5, 1.1, 1.3, 2.1, 2.6, 3.2, 3.7, 5.0):
        assert clock.at(t)[0] == pytest.approx(integral_of_factor(clock, 0.0, t), abs=1e-6)
    # ḟ is the derivative of f, ±rate_limit on a ramp and 0 elsewhere
    for t in (1.1, 2.1, 3.2, 1.9, 2.6, 4.0):
        h = 1e-6
        slope = (clock.factor(t + h) - clock.factor(t - h)) / (2 * h)
        assert clock.at(t)[2] == pytest.approx(slope, abs=1e-6)
        assert abs(clock.at(t)[2]) in (0.0, 2.0)
    # paused: s stands still
    assert clock.at(2.9)[0] == clock.at(2.6)[0]


def test_a_change_during_a_ramp_starts_from_where_the_factor_is():
    clock = ScaledTime(rate_limit=1.0)
    clock.start(0.0)
    clock.request(0.0, 0.0)                  # 1 -> 0 over 1 s
    clock.request(1.0, 0.4)                  # at f = 0.6 turn back up: 1 again at 0.8 s
    assert clock.factor(0.4) == pytest.approx(0.6)
    assert clock.factor(0.6) == pytest.approx(0.8)
    assert clock.factor(0.8) == pytest.approx(1.0)
    assert clock.at(2.0)[0] == pytest.approx(integral_of_factor(clock, 0.0, 2.0), abs=1e-6)


@pytest.mark.parametrize('value', [math.nan, math.inf, -math.inf, -0.1, 1.0001, 2.0, 'fast',
                                   None])
def test_factors_outside_0_1_or_not_finite_are_refused_naming_the_value(value):
    clock = ScaledTime()
    clock.start(0.0)
    clock.request(0.5, 1.0)
    with pytest.raises(ValueError) as error:
        clock.request(value, 2.0)
    assert repr(value) in str(error.value) or str(value) in str(error.value)
    assert clock.requested == 0.5 and clock.factor(5.0) == 0.5
    with pytest.raises(ValueError):
        check_factor(value)
    with pytest.raises(ValueError):
        ScaledTime(factor=value)


@pytest.mark.parametrize('value', [1.000000000001, 1.0 + 1e-6, 1.0 + 5e-7])
def test_a_factor_within_1e_6_above_1_is_taken_as_1(value):
    assert check_factor(value) == 1.0
    clock = ScaledTime(factor=value)
    assert clock.initial == 1.0
    clock.start(0.0)
    clock.request(0.0, 1.0)
    clock.request(value, 2.0)               # a bridge's 1 + ε after a pause: resumes
    assert clock.requested == 1.0 and clock.factor(10.0) == 1.0
    with pytest.raises(ValueError, match=r'1\.000002'):
        check_factor(1.0 + 2e-6)


def test_the_rate_limit_must_be_a_finite_positive_number():
    for rate in (0.0, -1.0, math.nan, math.inf):
        with pytest.raises(ValueError, match='rate_limit'):
            ScaledTime(rate_limit=rate)


def test_a_clock_that_went_back_drops_the_later_ramps():
    clock = ScaledTime(rate_limit=4.0)
    clock.start(100.0)
    clock.request(0.5, 101.0)
    clock.request(0.0, 1.0)                  # simulated time restarted at 0
    assert clock.factor(1.0) == 1.0         # before 101 s the factor was 1
    assert clock.factor(1.25) == pytest.approx(0.0)
    assert clock.factor(200.0) == 0.0


def test_many_changes_keep_a_bounded_history_and_the_present_right():
    clock = ScaledTime(rate_limit=1e3)
    clock.start(0.0)
    for k in range(3 * MAX_RAMPS):
        clock.request(0.25 if k % 2 else 0.75, 0.01 * (k + 1))
    assert len(clock._ramps) <= MAX_RAMPS
    t_last = 0.01 * 3 * MAX_RAMPS                  # the last change: to 0.25, in 0.5 ms
    assert clock.at(t_last + 1.0)[0] - clock.at(t_last + 0.5)[0] == pytest.approx(0.125)
    assert clock.factor(t_last + 0.1) == 0.25


# --- the sampler's reference under it ----------------------------------------------------

def test_the_reference_is_the_trajectory_at_the_trajectory_time_with_scaled_derivatives():
    plain, scaled = sampler(), sampler()
    plain.accept(move(), NOW)
    scaled.accept(move(), NOW)
    scaled.set_speed_scaling_factor(0.5, NOW)   # ramp 1 -> 0.5 over the first 0.25 s
    for t in np.linspace(NOW + 0.3, NOW + 3.0, 40):
        s, f, fdot = scaled.scaled_time.at(t)
        assert f == 0.5 and fdot == 0.0
        unscaled = plain.sample(s)
        ref = scaled.sample(t)
        np.testing.assert_allclose(ref.positions, unscaled.positions, atol=1e-12)
        np.testing.assert_allclose(ref.velocities, 0.5 * unscaled.velocities, atol=1e-12)
        np.testing.assert_allclose(ref.accelerations, 0.25 * unscaled.accelerations,
                                   atol=1e-12)
        assert ref.speed_scaling_factor == 0.5


def test_velocity_and_acceleration_are_the_derivatives_also_while_the_factor_moves():
    s, plain = sampler(speed_scaling_rate_limit=1.5), sampler()
    s.accept(move(), NOW)
    plain.accept(move(), NOW)
    s.set_speed_scaling_factor(0.2, NOW + 0.3)      # a ramp over 0.53 s
    h = 1e-6
    largest = 0.0
    for t in np.linspace(NOW + 0.32, NOW + 0.8, 30):  # inside the ramp
        plus, minus, mid = s.sample(t + h), s.sample(t - h), s.sample(t)
        np.testing.assert_allclose((plus.positions - minus.positions) / (2 * h),
                                   mid.velocities, atol=1e-6)
        np.testing.assert_allclose((plus.velocities - minus.velocities) / (2 * h),
                                   mid.accelerations, atol=1e-5)
        # what dropping ḟ would change: far more than the tolerance above
        largest = max(largest, np.max(np.abs(1.5 * plain.sample(s.trajectory_time(t))
                                             .velocities)))
    assert largest > 0.3


def test_factor_zero_pauses_holding_the_reference_still_and_one_resumes_it():
    s = sampler(speed_scaling_rate_limit=4.0)
    s.accept(move(2.0), NOW)
    s.set_speed_scaling_factor(0.0, NOW + 0.8)       # stopped from NOW + 1.05 on
    paused = s.sample(NOW + 1.1)
    for t in (NOW + 1.5, NOW + 10.0, NOW + 100.0):
        ref = s.sample(t)
        np.testing.assert_array_equal(ref.positions, paused.positions)
        assert not ref.velocities.any() and not ref.accelerations.any()
        assert ref.speed_scaling_factor == 0.0
        assert s.status(t) == 'running'
    s.set_speed_scaling_factor(1.0, NOW + 100.0)
    # the remaining trajectory time after the pause, plus the ramps' lost time
    t_end = NOW + 100.25 + (NOW + 2.0 - s.trajectory_time(NOW + 100.25))
    assert s.status(t_end - 1e-6) == 'running' and s.status(t_end + 1e-6) == 'finished'
    np.testing.assert_allclose(s.sample(t_end + 1.0).positions, move(2.0).points[-1].positions)


def test_the_reference_acceleration_stays_within_the_stated_bound_through_1_05_0_1():
    rate = 2.0
    s = sampler(speed_scaling_rate_limit=rate)
    plain = sampler()
    s.accept(move(2.0), NOW)
    plain.accept(move(2.0), NOW)
    times = np.arange(NOW, NOW + 8.0, 0.001)
    unscaled = [plain.sample(t) for t in times[times <= NOW + 2.0]]
    max_dq = np.max([np.abs(r.velocities) for r in unscaled], axis=0)
    max_ddq = np.max([np.abs(r.accelerations) for r in unscaled], axis=0)
    changes = {NOW + 0.5: 0.5, NOW + 1.2: 0.0, NOW + 2.0: 1.0}
    velocities = []
    for t in times:
        for when, factor in list(changes.items()):
            if t >= when:
                s.set_speed_scaling_factor(factor, when)
                del changes[when]
        ref = s.sample(t)
        velocities.append(ref.velocities)
        assert np.all(np.abs(ref.velocities) <= max_dq + 1e-12)
        assert np.all(np.abs(ref.accelerations) <= max_ddq + rate * max_dq + 1e-9)
    # continuous velocity: no step larger than one millisecond of the acceleration bound
    steps = np.max(np.abs(np.diff(velocities, axis=0)), axis=0)
    assert np.all(steps <= 0.001 * (max_ddq + rate * max_dq) + 1e-9)
    assert s.status(times[-1]) == 'finished'


def test_query_answers_what_the_cycle_took_at_that_time_also_after_changes():
    s = sampler(speed_scaling_rate_limit=3.0)
    s.accept(move(2.0), NOW)
    taken = {}
    for k, t in enumerate(np.arange(NOW, NOW + 3.0, 0.01)):
        if k == 40:
            s.set_speed_scaling_factor(0.3, t)
        if k == 150:
            s.set_speed_scaling_factor(0.9, t)
        taken[t] = s.sample(t)
    for t in list(taken)[5::17]:
        try:
            answer = s.query(t)
        except OutsideTrajectory:
            assert s.trajectory_time(t) >= NOW + 2.0
            continue
        np.testing.assert_array_equal(answer.positions, taken[t].positions)
        np.testing.assert_array_equal(answer.velocities, taken[t].velocities)
        np.testing.assert_array_equal(answer.accelerations, taken[t].accelerations)
    with pytest.raises(OutsideTrajectory, match='trajectory time'):
        s.query(NOW + 50.0)


def test_a_future_stamp_is_waited_for_in_trajectory_time_as_jtc_does():
    s = sampler(speed_scaling_factor=0.5)
    s.accept(move(1.0, start=NOW + 1.0), NOW)
    assert s.status(NOW + 1.9) == 'waiting'        # 1 s of trajectory time = 2 s of clock
    assert s.status(NOW + 2.1) == 'running'
    assert s.status(NOW + 3.9) == 'running' and s.status(NOW + 4.1) == 'finished'


def test_a_trajectory_that_ends_in_the_past_is_judged_on_the_clock():
    from robot_dynamics.trajectories.sampler import EndsInThePast
    s = sampler(speed_scaling_factor=0.1)
    with pytest.raises(EndsInThePast):
        s.accept(move(1.0, start=NOW - 2.0), NOW)
    s.accept(move(1.0, start=NOW - 0.5), NOW)      # ends on the clock at NOW + 0.5: taken
    assert s.status(NOW) == 'running'


def test_an_initial_factor_set_before_the_first_hold_applies_from_it():
    s = JointTrajectorySampler(JOINTS)
    s.set_speed_scaling_factor(0.5, None)
    s.hold(Q0, NOW)
    assert s.speed_scaling_factor(NOW) == 0.5
    assert s.trajectory_time(NOW + 2.0) == pytest.approx(NOW + 1.0)


# --- a stop (decelerate_on_cancel) under speed scaling -----------------------------------

DECELERATION = np.array([3.0, 2.0])


def clock_acceleration(s, t0, t1, step=1e-3):
    """q̈ on the clock by differences of the sampled q̇ (sampling in time order)."""
    times = np.arange(t0, t1, step)
    velocities = np.array([s.sample(t).velocities for t in times])
    return times, velocities, np.diff(velocities, axis=0) / step


@pytest.mark.parametrize('factor', [1.0, 0.5, 0.2])
def test_a_stop_decelerates_within_the_limit_on_the_clock_whatever_the_factor(factor):
    s = sampler(max_deceleration_on_cancel=DECELERATION, speed_scaling_factor=factor)
    s.accept(move(2.0), NOW)
    t_stop = NOW + 0.8 / factor                 # the same point of the move
    before = s.sample(t_stop)
    assert np.max(np.abs(before.velocities)) > 0.1 * factor
    s.stop(t_stop)
    times, velocities, accelerations = clock_acceleration(s, t_stop, t_stop + 4.0)
    assert np.all(np.abs(accelerations) <= DECELERATION + 1e-6)
    np.testing.assert_allclose(velocities[0], before.velocities, atol=1e-9)   # no step
    assert not np.any(velocities[-1])
    # shorter than a stop planned from the trajectory-time velocity with the plain limit
    # (what running the stop in trajectory time without care would cover)
    travel = np.abs(s.sample(times[-1]).positions - before.positions)
    if factor < 1.0:
        s_state = plain_state(factor, t_stop)
        naive = deceleration_plan(s_state.positions, s_state.velocities, DECELERATION, 0.0,
                                  s_state.accelerations).final
        assert np.all(travel < np.abs(naive - before.positions))


def plain_state(factor, t):
    """The unscaled trajectory's reference at the trajectory time that factor gives at t."""
    plain = sampler()
    plain.accept(move(2.0), NOW)
    return plain.sample(NOW + factor * (t - NOW))


def test_a_factor_that_comes_during_a_stop_applies_after_it():
    s = sampler(max_deceleration_on_cancel=DECELERATION, speed_scaling_rate_limit=4.0)
    s.accept(move(2.0), NOW)
    s.set_speed_scaling_factor(0.5, NOW + 0.5)
    s.stop(NOW + 1.0)
    s.set_speed_scaling_factor(0.0, NOW + 1.01)     # would cut the stop short on the clock
    times, velocities, accelerations = clock_acceleration(s, NOW + 1.0, NOW + 3.0)
    assert np.all(np.abs(accelerations) <= DECELERATION + 1e-6)
    rest = times[np.flatnonzero(~velocities.any(axis=1))[0]]    # the stop's end
    assert rest > NOW + 1.05                                    # after the new factor came
    for t in np.linspace(NOW + 1.0, rest - 0.01, 20):
        assert s.speed_scaling_factor(t) == 0.5                 # frozen during the stop
    assert s.speed_scaling_factor(times[-1] + 0.5) == 0.0       # then the new one


def test_a_stop_while_paused_stays_where_the_reference_stood_when_the_factor_returns():
    s = sampler(max_deceleration_on_cancel=DECELERATION, speed_scaling_rate_limit=4.0)
    s.accept(move(2.0), NOW)
    s.set_speed_scaling_factor(0.0, NOW + 0.8)       # paused from NOW + 1.05
    paused = s.sample(NOW + 1.5).positions
    s.stop(NOW + 1.5)
    s.set_speed_scaling_factor(1.0, NOW + 2.0)
    for t in (NOW + 2.5, NOW + 5.0):
        ref = s.sample(t)
        np.testing.assert_array_equal(ref.positions, paused)
        assert not ref.velocities.any()
    assert s.speed_scaling_factor(NOW + 5.0) == 1.0
