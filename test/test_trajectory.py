"""JointTrajectorySampler: interpolation, timing, replacement and rejection (JTC semantics)."""

from types import SimpleNamespace

import numpy as np
import pytest

from robot_dynamics.trajectories.splines import (clamped_spline_knots, cubic_coefficients,
                                                 quintic_coefficients)
from robot_dynamics.trajectories.sampler import (JointTrajectorySampler, OutsideTrajectory,
                                                 TrajectoryCommand, TrajectoryPoint,
                                                 TrajectoryRejected)

JOINTS = ('j1', 'j2', 'j3')
Q0 = np.array([0.1, -0.4, 0.8])
NOW = 1000.0                                    # controller clock, seconds


def sampler(**kwargs):
    s = JointTrajectorySampler(JOINTS, **kwargs)
    s.hold(Q0, NOW)
    return s


def state(s, t):
    r = s.sample(t)
    return np.concatenate([r.positions, r.velocities, r.accelerations])


def command(times, positions, velocities=None, accelerations=None, names=JOINTS, start=0.0):
    points = []
    for k, t in enumerate(times):
        v = () if velocities is None else tuple(velocities[k])
        a = () if accelerations is None else tuple(accelerations[k])
        points.append(TrajectoryPoint(t, tuple(positions[k]), v, a))
    return TrajectoryCommand(tuple(names), tuple(points), start)


RNG = np.random.default_rng(7)
TIMES = [0.4, 1.0, 1.3, 2.2]
P = Q0 + RNG.uniform(-1.0, 1.0, (4, 3))
V = RNG.uniform(-1.0, 1.0, (4, 3))
A = RNG.uniform(-2.0, 2.0, (4, 3))
V[-1] = 0.0                                     # the last point at rest
A[-1] = 0.0
KINDS = {'quintic': (P, V, A), 'cubic': (P, V, None), 'positions': (P, None, None)}


def running(kind='quintic', **kwargs):
    s = sampler(**kwargs)
    s.accept(command(TIMES, *KINDS[kind]), NOW)
    return s


def finite_difference_consistent(s, t0, t1, steps=400):
    """q̇ and q̈ are the derivatives of q and q̇ on (t0, t1): central differences agree."""
    h = 1e-6
    for t in np.linspace(t0, t1, steps + 2)[1:-1]:
        plus, minus, mid = s.sample(t + h), s.sample(t - h), s.sample(t)
        np.testing.assert_allclose((plus.positions - minus.positions) / (2 * h),
                                   mid.velocities, atol=1e-5)
        np.testing.assert_allclose((plus.velocities - minus.velocities) / (2 * h),
                                   mid.accelerations, atol=1e-4)


# --- polynomial building blocks ---------------------------------------------------------------

def _poly(c, tau):
    q = sum(c[j] * tau**j for j in range(6))
    qd = sum(j * c[j] * tau**(j - 1) for j in range(1, 6))
    qdd = sum(j * (j - 1) * c[j] * tau**(j - 2) for j in range(2, 6))
    return q, qd, qdd


def test_quintic_segment_meets_position_velocity_acceleration_at_both_ends():
    p0, v0, a0, p1, v1, a1 = RNG.uniform(-2, 2, (6, 3))
    c = quintic_coefficients(p0, v0, a0, p1, v1, a1, 0.7)
    for tau, expected in ((0.0, (p0, v0, a0)), (0.7, (p1, v1, a1))):
        for got, want in zip(_poly(c, tau), expected):
            np.testing.assert_allclose(got, want, atol=1e-12)


def test_cubic_segment_meets_position_and_velocity_at_both_ends():
    p0, v0, p1, v1 = RNG.uniform(-2, 2, (4, 3))
    c = cubic_coefficients(p0, v0, p1, v1, 1.3)
    for tau, (p, v) in ((0.0, (p0, v0)), (1.3, (p1, v1))):
        got = _poly(c, tau)
        np.testing.assert_allclose(got[0], p, atol=1e-12)
        np.testing.assert_allclose(got[1], v, atol=1e-12)


def test_clamped_spline_is_twice_continuously_differentiable_at_the_knots():
    times = np.array([0.0, 0.5, 0.9, 2.0, 2.2, 3.0])
    positions = RNG.uniform(-1, 1, (6, 2))
    v, a = clamped_spline_knots(times, positions, np.array([0.3, -0.2]), np.zeros(2))
    assert np.allclose(v[0], [0.3, -0.2]) and np.allclose(v[-1], 0.0)
    for k in range(1, 5):       # q̈ at the end of segment k-1 equals q̈ at the start of k
        h = times[k] - times[k - 1]
        left = _poly(cubic_coefficients(positions[k - 1], v[k - 1], positions[k], v[k], h), h)
        np.testing.assert_allclose(left[2], a[k], atol=1e-9)


# --- interpolation ---------------------------------------------------------------------------

@pytest.mark.parametrize('kind', ['quintic', 'cubic', 'positions'])
def test_reference_passes_through_every_point_on_time(kind):
    s = running(kind)
    positions, velocities, accelerations = KINDS[kind]
    for k, t in enumerate(TIMES):
        r = s.sample(NOW + t)
        np.testing.assert_allclose(r.positions, positions[k], atol=1e-10)
        if velocities is not None:
            np.testing.assert_allclose(r.velocities, velocities[k], atol=1e-9)
        if accelerations is not None:
            np.testing.assert_allclose(r.accelerations, accelerations[k], atol=1e-8)


@pytest.mark.parametrize('kind', ['quintic', 'cubic', 'positions'])
def test_reference_is_smooth_inside_every_segment(kind):
    s = running(kind)
    knots = [0.0] + TIMES
    for t0, t1 in zip(knots[:-1], knots[1:]):
        finite_difference_consistent(s, NOW + t0, NOW + t1, steps=40)


@pytest.mark.parametrize('kind', ['quintic', 'positions'])
def test_acceleration_is_continuous_across_knots_for_quintic_and_position_only(kind):
    s = running(kind)
    eps = 1e-9
    for t in [0.0] + TIMES:
        np.testing.assert_allclose(state(s, NOW + t - eps), state(s, NOW + t + eps), atol=1e-5)


def test_position_only_reference_ends_at_rest_and_starts_from_the_held_state():
    s = running('positions')
    end = s.sample(NOW + TIMES[-1])
    assert np.allclose(end.velocities, 0.0) and np.allclose(end.accelerations, 0.0)
    start = s.sample(NOW)
    np.testing.assert_allclose(start.positions, Q0)
    assert np.allclose(start.velocities, 0.0) and np.allclose(start.accelerations, 0.0)


def test_after_the_last_point_the_reference_holds_it_with_zero_velocity():
    s = running('quintic')
    for t in (TIMES[-1] + 1e-6, TIMES[-1] + 5.0):
        r = s.sample(NOW + t)
        np.testing.assert_allclose(r.positions, P[-1], atol=1e-12)
        assert not r.velocities.any() and not r.accelerations.any()
    np.testing.assert_allclose(s.goal_positions, P[-1])
    assert s.status(NOW + TIMES[-1] + 0.1) == 'finished'
    assert s.status(NOW + 0.5) == 'running'


def test_non_zero_final_velocity_is_accepted_and_then_held_at_rest():
    s = sampler()
    velocities = V.copy()
    velocities[-1] = [0.5, 0.0, -0.5]
    s.accept(command(TIMES, P, velocities, A), NOW)
    np.testing.assert_allclose(s.sample(NOW + TIMES[-1]).velocities, velocities[-1], atol=1e-9)
    assert not s.sample(NOW + TIMES[-1] + 0.01).velocities.any()


def test_non_zero_final_velocity_is_rejected_when_not_allowed():
    s = sampler(allow_nonzero_velocity_at_trajectory_end=False)
    velocities = V.copy()
    velocities[-1] = [0.0, 0.0, -0.5]
    with pytest.raises(TrajectoryRejected, match=r"points\[3\]\.velocities\[2\].*'j3'"):
        s.accept(command(TIMES, P, velocities, A), NOW)


def test_joints_in_any_order_are_mapped_by_name():
    ordered = running('quintic')
    order = [2, 0, 1]
    shuffled = sampler()
    shuffled.accept(command(TIMES, P[:, order], V[:, order], A[:, order],
                            names=[JOINTS[i] for i in order]), NOW)
    for t in np.linspace(NOW, NOW + 2.5, 11):
        np.testing.assert_allclose(state(shuffled, t), state(ordered, t), atol=1e-12)


# --- timing -------------------------------------------------------------------------------

def test_first_point_at_time_zero_replaces_the_start_state():
    s = sampler()
    s.accept(command([0.0, 1.0], P[:2], V[:2], A[:2]), NOW)
    r = s.sample(NOW)
    np.testing.assert_allclose(r.positions, P[0])
    np.testing.assert_allclose(r.velocities, V[0])


def test_future_start_holds_the_current_reference_until_the_start_time():
    s = sampler()
    s.accept(command(TIMES, *KINDS['quintic'], start=NOW + 3.0), NOW)
    assert s.status(NOW + 1.0) == 'waiting'
    for t in (NOW, NOW + 1.5, NOW + 3.0):
        np.testing.assert_allclose(s.sample(t).positions, Q0)
    np.testing.assert_allclose(s.sample(NOW + 3.0 + TIMES[1]).positions, P[1], atol=1e-10)
    assert s.status(NOW + 3.5) == 'running'


def test_future_start_lets_the_running_trajectory_continue_until_then():
    s = running('quintic')
    old = running('quintic')
    s.accept(command([1.0], [Q0], start=NOW + 1.1), NOW + 0.2)
    for t in np.linspace(NOW + 0.2, NOW + 1.1, 7):
        np.testing.assert_allclose(state(s, t), state(old, t), atol=1e-12)
    assert s.status(NOW + 0.5) == 'waiting'
    np.testing.assert_allclose(s.sample(NOW + 2.1).positions, Q0, atol=1e-12)


def test_later_future_start_lets_an_earlier_waiting_trajectory_run_until_then():
    s = sampler()
    first = sampler()
    first.accept(command([1.0], [P[0]], start=NOW + 1.0), NOW)
    s.accept(command([1.0], [P[0]], start=NOW + 1.0), NOW)
    s.accept(command([1.0], [P[1]], start=NOW + 1.5), NOW + 0.1)
    for t in np.linspace(NOW, NOW + 1.5, 9):
        np.testing.assert_allclose(state(s, t), state(first, t), atol=1e-12)
    np.testing.assert_allclose(s.sample(NOW + 2.5).positions, P[1], atol=1e-12)
    np.testing.assert_allclose(s.goal_positions, P[1])


def test_many_replacements_keep_sampling_cheap_and_correct():
    s = sampler()
    for k in range(300):
        s.accept(command([0.5], [Q0 + 0.001 * k], start=NOW + k * 0.01 + 0.005), NOW + k * 0.01)
    depth, plan = 0, s._plan
    while plan is not None:
        depth, plan = depth + 1, plan.previous
    assert depth <= 2                           # replaced plans whose time has passed are dropped
    np.testing.assert_allclose(s.sample(NOW + 10.0).positions, Q0 + 0.299, atol=1e-12)


def test_trajectory_that_ends_in_the_past_is_rejected():
    s = sampler()
    with pytest.raises(TrajectoryRejected, match='start_time.*past'):
        s.accept(command(TIMES, P, start=NOW - 10.0), NOW)
    assert s.status(NOW) == 'holding'


def test_past_start_that_ends_in_the_future_skips_past_points_without_a_jump():
    s = sampler()
    s.accept(command(TIMES, P, V, A, start=NOW - 1.1), NOW)    # points 0 and 1 are past
    np.testing.assert_allclose(s.sample(NOW).positions, Q0)
    np.testing.assert_allclose(s.sample(NOW - 1.1 + TIMES[2]).positions, P[2], atol=1e-10)
    np.testing.assert_allclose(s.sample(NOW - 1.1 + TIMES[3]).positions, P[3], atol=1e-10)


@pytest.mark.parametrize('times, index', [([0.5, 0.5, 1.0, 2.0], 1), ([0.5, 1.0, 0.9, 2.0], 2)])
def test_time_from_start_must_strictly_increase(times, index):
    s = sampler()
    with pytest.raises(TrajectoryRejected, match=rf'points\[{index}\]\.time_from_start'):
        s.accept(command(times, P), NOW)


@pytest.mark.parametrize('bad', [-0.1, float('nan'), float('inf')])
def test_negative_or_non_finite_first_time_is_rejected(bad):
    s = sampler()
    with pytest.raises(TrajectoryRejected, match=r'points\[0\]\.time_from_start'):
        s.accept(command([bad, 1.0], P[:2]), NOW)


# --- replacement ---------------------------------------------------------------------------

@pytest.mark.parametrize('kind', ['quintic', 'positions'])
def test_new_trajectory_replaces_the_running_one_without_a_jump(kind):
    s = running('quintic')
    switch = NOW + 0.7
    before = state(s, switch)
    s.accept(command([0.5, 1.5], *(x[:2] if x is not None else None for x in KINDS[kind])),
             switch)
    np.testing.assert_allclose(state(s, switch), before, atol=1e-12)
    finite_difference_consistent(s, switch, switch + 0.5, steps=20)


def test_cubic_replacement_keeps_position_and_velocity_continuous():
    s = running('quintic')
    switch = NOW + 0.7
    before = s.sample(switch)
    s.accept(command([0.5, 1.5], P[:2], V[:2]), switch)
    after = s.sample(switch + 1e-9)
    np.testing.assert_allclose(after.positions, before.positions, atol=1e-7)
    np.testing.assert_allclose(after.velocities, before.velocities, atol=1e-6)


def test_hold_cancels_the_running_trajectory():
    s = running('quintic')
    s.hold([0.0, 0.0, 0.0], NOW + 0.5)
    assert s.status(NOW + 0.6) == 'holding'
    np.testing.assert_allclose(s.sample(NOW + 1.0).positions, 0.0)


def test_empty_trajectory_stops_at_the_current_reference_position():
    s = running('quintic')
    stop = NOW + 0.8
    where = s.sample(stop).positions
    s.accept(TrajectoryCommand((), ()), stop)
    assert s.status(stop + 0.1) == 'holding'
    for t in (stop, stop + 2.0):
        r = s.sample(t)
        np.testing.assert_allclose(r.positions, where)
        assert not r.velocities.any() and not r.accelerations.any()
    np.testing.assert_allclose(s.goal_positions, where)


def test_empty_trajectory_also_cancels_a_trajectory_waiting_to_start():
    s = sampler()
    s.accept(command(TIMES, P, start=NOW + 1.0), NOW)
    s.accept(TrajectoryCommand(('unknown',), ()), NOW + 0.5)
    assert s.status(NOW + 5.0) == 'holding'
    np.testing.assert_allclose(s.sample(NOW + 5.0).positions, Q0)


# --- partial goals ---------------------------------------------------------------------------

def test_partial_goal_is_rejected_unless_allowed():
    s = sampler()
    with pytest.raises(TrajectoryRejected, match=r"joint_names.*'j2'.*allow_partial"):
        s.accept(command(TIMES, P[:, [0, 2]], names=('j1', 'j3')), NOW)


def test_partial_goal_moves_the_named_joints_and_holds_the_others():
    s = sampler()
    s.allow_partial_joints_goal = True          # may change at runtime
    s.accept(command(TIMES, P[:, [2, 0]], V[:, [2, 0]], A[:, [2, 0]], names=('j3', 'j1')), NOW)
    for t in np.linspace(NOW, NOW + 3.0, 13):
        r = s.sample(t)
        assert r.positions[1] == pytest.approx(Q0[1], abs=1e-12)
        assert r.velocities[1] == pytest.approx(0.0, abs=1e-12)
    end = s.sample(NOW + 3.0).positions
    np.testing.assert_allclose(end[[0, 2]], P[-1, [0, 2]], atol=1e-12)


# --- rejections leave the running motion undisturbed -----------------------------------------

def _pos(k, j, value):
    p = P.copy()
    p[k, j] = value
    return p


REJECTIONS = {
    'unknown joint': (command(TIMES, P, names=('j1', 'x', 'j3')),
                      r"joint_names\[1\]: unknown joint 'x'"),
    'duplicate joint': (command(TIMES, P, names=('j1', 'j1', 'j3')),
                        r"joint_names\[1\]: duplicate joint 'j1'"),
    'no joint names': (command(TIMES, P, names=()), 'joint_names: empty'),
    'short positions': (command(TIMES, [p[:2] if k == 2 else p for k, p in enumerate(P)]),
                        r'points\[2\]\.positions: 2 values for 3 joints'),
    'short velocities': (command(TIMES, P, [v[:1] if k == 1 else v for k, v in enumerate(V)]),
                         r'points\[1\]\.velocities: 1 values for 3 joints'),
    'long accelerations': (command(TIMES, P, V, [list(a) + [0.0] for a in A]),
                           r'points\[0\]\.accelerations: 4 values for 3 joints'),
    'nan position': (command(TIMES, _pos(3, 1, float('nan'))),
                     r"points\[3\]\.positions\[1\] \(joint 'j2'\): not finite"),
    'inf velocity': (command(TIMES, P, np.where(np.eye(4, 3) > 0, np.inf, V)),
                     r"points\[0\]\.velocities\[0\] \(joint 'j1'\): not finite"),
    'huge velocity': (command(TIMES, P, np.where(np.eye(4, 3) > 0, 1e308, V)),
                      r"points\[0\]\.velocities\[0\] \(joint 'j1'\): 1e\+308 is beyond"),
    'nan start time': (command(TIMES, P, start=float('nan')), 'start_time: not finite'),
    'below position_min': (command(TIMES, _pos(2, 0, -5.0)),
                           r"points\[2\]\.positions\[0\] \(joint 'j1'\): -5.0 outside"),
    'above position_max': (command(TIMES, _pos(1, 2, 5.0)),
                           r"points\[1\]\.positions\[2\] \(joint 'j3'\): 5.0 outside"),
    'accelerations without velocities': (command(TIMES, P, None, A),
                                         r'accelerations: given without velocities'),
    'velocities on some points only': (
        TrajectoryCommand(JOINTS, (TrajectoryPoint(0.5, tuple(P[0]), tuple(V[0])),
                                   TrajectoryPoint(1.0, tuple(P[1])))),
        r'points\[1\]\.velocities: empty but points\[0\] has velocities'),
    'text position': (TrajectoryCommand(JOINTS, (TrajectoryPoint(1.0, ('a', 'b', 'c')),)),
                      r'points\[0\]\.positions: not numbers'),
}


@pytest.mark.parametrize('case', sorted(REJECTIONS))
def test_invalid_trajectory_is_rejected_naming_the_field_and_motion_continues(case):
    bad, message = REJECTIONS[case]
    s = running('quintic', position_min=[-3.0] * 3, position_max=[3.0] * 3)
    reference = running('quintic')
    with pytest.raises(TrajectoryRejected, match=message):
        s.accept(bad, NOW + 0.5)
    assert s.status(NOW + 0.6) == 'running'
    for t in np.linspace(NOW + 0.5, NOW + 3.0, 11):
        np.testing.assert_allclose(state(s, t), state(reference, t), atol=0.0)


def test_accept_before_any_hold_is_rejected_and_sample_raises():
    s = JointTrajectorySampler(JOINTS)
    with pytest.raises(TrajectoryRejected, match='no current reference'):
        s.accept(command(TIMES, P), NOW)
    with pytest.raises(RuntimeError, match='hold'):
        s.sample(NOW)


def test_hold_rejects_non_finite_positions_naming_the_joint():
    s = sampler()
    with pytest.raises(ValueError, match=r"positions\[1\] \(joint 'j2'\)"):
        s.hold([0.0, float('nan'), 0.0], NOW)


# --- goal checking -------------------------------------------------------------------------

def test_at_goal_only_after_the_end_and_within_both_tolerances():
    s = running('quintic')
    end = NOW + TIMES[-1]
    still = np.zeros(3)
    assert not s.at_goal(P[-1], still, end - 0.1, 0.01, 0.01)          # still running
    assert s.at_goal(P[-1] + 0.005, still, end + 0.1, 0.01, 0.01)
    assert not s.at_goal(P[-1] + [0.0, 0.02, 0.0], still, end + 0.1, 0.01, 0.01)
    assert not s.at_goal(P[-1], [0.0, 0.0, 0.05], end + 0.1, 0.01, 0.01)
    per_joint = [0.01, 0.03, 0.01]
    assert s.at_goal(P[-1] + [0.0, 0.02, 0.0], still, end + 0.1, per_joint, 0.01)


def test_at_goal_treats_zero_tolerance_as_not_enforced_like_jtc():
    s = running('quintic')
    far = P[-1] + 1.0
    assert s.at_goal(far, [1.0, 1.0, 1.0], NOW + 10.0, 0.0, 0.0)


def test_at_goal_with_scalar_tolerances_equals_the_per_joint_form():
    """One float tolerance takes a list-of-floats shortcut; it must decide as the same
    tolerance given for every joint (numpy path), NaN and zero included."""
    s = running('quintic')
    after = NOW + TIMES[-1] + 0.1
    rng = np.random.default_rng(3)
    tolerances = [0.0, 0.005, 0.01, 0.02, float('nan')]
    for _ in range(30):
        q = P[-1] + rng.uniform(-0.02, 0.02, 3)
        qd = rng.uniform(-0.02, 0.02, 3)
        for goal in tolerances:
            for velocity in tolerances:
                assert s.at_goal(q, qd, after, goal, velocity) == s.at_goal(
                    q, qd, after, [goal] * 3, [velocity] * 3), (q, qd, goal, velocity)
    assert not s.at_goal([np.nan, 0.0, 0.0] + P[-1], np.zeros(3), after, 0.01, 0.01)


def test_at_goal_is_false_while_waiting_for_a_future_start():
    s = sampler()
    s.accept(command(TIMES, P, start=NOW + 5.0), NOW)
    assert not s.at_goal(Q0, np.zeros(3), NOW + 1.0, 0.01, 0.01)


# --- message conversion ------------------------------------------------------------------------

def test_command_from_message_converts_stamps_and_durations_to_seconds():
    def duration(seconds):
        return SimpleNamespace(sec=int(seconds), nanosec=int(round(seconds % 1 * 1e9)))
    msg = SimpleNamespace(
        header=SimpleNamespace(stamp=duration(12.25)), joint_names=['j2', 'j1'],
        points=[SimpleNamespace(time_from_start=duration(0.5), positions=[1.0, 2.0],
                                velocities=[], accelerations=[])])
    cmd = TrajectoryCommand.from_message(msg)
    assert cmd.start_time == pytest.approx(12.25)
    assert cmd.joint_names == ('j2', 'j1')
    assert cmd.points[0].time_from_start == pytest.approx(0.5)
    assert cmd.points[0].positions == (1.0, 2.0) and cmd.points[0].velocities == ()


# ---------------------------------------------------------------------- query (~/query_state)

def quintic_through(t0, t1, start, end, t):
    """(q, q̇, q̈) at t of the quintic with (p, v, a) `start` at t0 and `end` at t1, solved
    as a 6x6 linear system (independent of the sampler's closed form)."""
    def rows(tau):
        return np.array([[tau**k for k in range(6)],
                         [k * tau**(k - 1) if k else 0.0 for k in range(6)],
                         [k * (k - 1) * tau**(k - 2) if k > 1 else 0.0 for k in range(6)]])
    c = np.linalg.solve(np.vstack([rows(0.0), rows(t1 - t0)]), np.vstack([start, end]))
    return rows(t - t0) @ c


def test_query_answers_the_quintic_through_the_points_sent():
    s = sampler()
    times = [0.0] + TIMES                       # the first point replaces the start state
    positions, velocities, accelerations = (np.vstack([x[0], x]) for x in (P, V, A))
    velocities[0] = accelerations[0] = 0.0
    s.accept(command(times, positions, velocities, accelerations), NOW)
    for t in np.linspace(0.0, TIMES[-1], 23, endpoint=False):
        k = int(np.searchsorted(times, t, side='right')) - 1
        expected = quintic_through(
            NOW + times[k], NOW + times[k + 1],
            np.vstack([positions[k], velocities[k], accelerations[k]]),
            np.vstack([positions[k + 1], velocities[k + 1], accelerations[k + 1]]), NOW + t)
        r = s.query(NOW + t)
        answer = np.vstack([r.positions, r.velocities, r.accelerations])
        np.testing.assert_allclose(answer, expected, atol=1e-9)
        np.testing.assert_array_equal(state(s, NOW + t), answer.ravel())   # what is commanded


@pytest.mark.parametrize('offset, words', [(-0.01, 'before the start'),
                                           (TIMES[-1], 'not before the last point'),
                                           (TIMES[-1] + 5.0, 'not before the last point'),
                                           (np.nan, 'before the start')])
def test_query_outside_the_trajectory_is_refused_with_the_reason(offset, words):
    s = running('quintic')
    with pytest.raises(OutsideTrajectory, match=words):
        s.query(NOW + offset)


def test_query_while_holding_is_refused():
    s = sampler()
    with pytest.raises(OutsideTrajectory, match='holding'):
        s.query(NOW)
    s = running('cubic')
    s.accept(command([], []), NOW + 0.5)        # stop
    with pytest.raises(OutsideTrajectory, match='holding'):
        s.query(NOW + 0.6)


def test_query_changes_nothing_a_later_sample_sees():
    """A query past the start of a trajectory waiting to replace a running one does not
    make the sampler forget the running one (what `sample` at that time would prune)."""
    s = running('quintic')
    old = running('quintic')
    s.accept(command([1.0], [Q0], start=NOW + 1.1), NOW + 0.2)
    r = s.query(NOW + 1.5)
    assert np.all(np.isfinite(r.positions))
    for t in np.linspace(NOW + 0.2, NOW + 1.1, 7):
        np.testing.assert_allclose(state(s, t), state(old, t), atol=1e-12)
    np.testing.assert_allclose(state(s, NOW + 1.5),
                               np.concatenate([r.positions, r.velocities, r.accelerations]))
