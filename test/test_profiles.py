"""[SAS] trapezoid and quintic point-to-point profiles ([SAS] §4 Fig. 6)."""

from hypothesis import given, settings, strategies as st
import numpy as np
import pytest

from robot_dynamics.trajectories.profiles import PROFILES, quintic, sample_profile, trapezoid

Q_START = np.array([0.3, -1.2, 0.0, 2.0])
Q_GOAL = np.array([1.1, -1.5, 0.7, 2.0])       # includes a joint that does not move
T = 2.5

moves = st.tuples(
    st.lists(st.floats(-3.0, 3.0), min_size=1, max_size=6),
    st.floats(0.1, 10.0))


def _goal(start, seed):
    return np.asarray(start) + np.random.default_rng(seed).uniform(-2.0, 2.0, len(start))


@pytest.mark.parametrize('name', sorted(PROFILES))
def test_profile_starts_and_ends_at_rest_on_the_requested_positions(name):
    profile = PROFILES[name]
    for t, expected in ((0.0, Q_START), (T, Q_GOAL)):
        q, qd, _ = profile(t, Q_START, Q_GOAL, T)
        np.testing.assert_allclose(q, expected, atol=1e-12)
        np.testing.assert_allclose(qd, 0.0, atol=1e-12)


@settings(max_examples=40, deadline=None)
@given(moves, st.integers(0, 1000))
def test_trapezoid_reaches_the_displacement_at_T(move, seed):
    start, duration = move
    goal = _goal(start, seed)
    q, qd, _ = trapezoid(duration, start, goal, duration)
    np.testing.assert_allclose(q - np.asarray(start), goal - np.asarray(start), atol=1e-9)
    np.testing.assert_allclose(qd, 0.0, atol=1e-9)


def test_trapezoid_acceleration_and_peak_velocity_follow_sasaki():
    delta = Q_GOAL - Q_START
    a = 9.0 * delta / (2.0 * T**2)                       # [SAS] §4
    _, _, qdd_1 = trapezoid(T / 6.0, Q_START, Q_GOAL, T)
    _, qd_2, qdd_2 = trapezoid(T / 2.0, Q_START, Q_GOAL, T)
    _, _, qdd_3 = trapezoid(5.0 * T / 6.0, Q_START, Q_GOAL, T)
    np.testing.assert_allclose(qdd_1, a, rtol=1e-12)
    np.testing.assert_allclose(qdd_2, 0.0, atol=1e-12)
    np.testing.assert_allclose(qdd_3, -a, rtol=1e-12)
    np.testing.assert_allclose(qd_2, 3.0 * delta / (2.0 * T), rtol=1e-12)
    _, qd, _ = trapezoid(np.linspace(0.0, T, 601), Q_START, Q_GOAL, T)
    np.testing.assert_allclose(np.abs(qd).max(axis=0), np.abs(3.0 * delta / (2.0 * T)),
                               rtol=1e-12)


def test_trapezoid_covers_a_quarter_half_quarter_of_the_move_in_its_thirds():
    # Area under the velocity trapezoid with peak V = 3Δθ/(2T): ramps V·T/6 = Δθ/4 each,
    # coast V·T/3 = Δθ/2 (½·a·(T/3)² = aT²/18 = Δθ/4 with a = 9Δθ/(2T²); not Δθ/9
    # and 8Δθ/9, a tempting misreading of [SAS] Fig. 6).
    delta = Q_GOAL - Q_START
    q_1, _, _ = trapezoid(T / 3.0, Q_START, Q_GOAL, T)
    q_2, _, _ = trapezoid(2.0 * T / 3.0, Q_START, Q_GOAL, T)
    np.testing.assert_allclose(q_1 - Q_START, delta / 4.0, atol=1e-12)
    np.testing.assert_allclose(q_2 - Q_START, 3.0 * delta / 4.0, atol=1e-12)


@pytest.mark.parametrize('boundary', [1.0 / 3.0, 2.0 / 3.0])
def test_trapezoid_position_and_velocity_are_continuous_at_the_thirds(boundary):
    eps = 1e-9
    before = trapezoid(boundary * T - eps, Q_START, Q_GOAL, T)
    after = trapezoid(boundary * T + eps, Q_START, Q_GOAL, T)
    np.testing.assert_allclose(before[0], after[0], atol=1e-8)
    np.testing.assert_allclose(before[1], after[1], atol=1e-7)
    jump = np.abs(before[2] - after[2])
    a = np.abs(9.0 * (Q_GOAL - Q_START) / (2.0 * T**2))
    np.testing.assert_allclose(jump, a, rtol=1e-12)     # q̈ does jump by a (bang-coast-bang)


@pytest.mark.parametrize('name', sorted(PROFILES))
def test_profile_derivatives_match_finite_differences(name):
    profile = PROFILES[name]
    h = 1e-6
    times = np.linspace(0.01, T - 0.01, 97)
    times = times[np.min(np.abs(times[:, None] - np.array([T / 3, 2 * T / 3])), axis=1) > 1e-3]
    q_plus, qd_plus, _ = profile(times + h, Q_START, Q_GOAL, T)
    q_minus, qd_minus, _ = profile(times - h, Q_START, Q_GOAL, T)
    _, qd, qdd = profile(times, Q_START, Q_GOAL, T)
    np.testing.assert_allclose((q_plus - q_minus) / (2 * h), qd, atol=1e-6)
    np.testing.assert_allclose((qd_plus - qd_minus) / (2 * h), qdd, atol=1e-5)


def test_quintic_has_zero_acceleration_at_both_ends_and_peak_velocity_15_over_8():
    delta = Q_GOAL - Q_START
    for t in (0.0, T):
        _, _, qdd = quintic(t, Q_START, Q_GOAL, T)
        np.testing.assert_allclose(qdd, 0.0, atol=1e-12)
    _, qd, _ = quintic(T / 2.0, Q_START, Q_GOAL, T)
    np.testing.assert_allclose(qd, 15.0 * delta / (8.0 * T), rtol=1e-12)


@pytest.mark.parametrize('name', sorted(PROFILES))
def test_profile_rests_outside_the_move(name):
    profile = PROFILES[name]
    q, qd, qdd = profile(np.array([-1.0, T + 1.0]), Q_START, Q_GOAL, T)
    np.testing.assert_allclose(q, [Q_START, Q_GOAL])
    assert not qd.any() and not qdd.any()


@pytest.mark.parametrize('name', sorted(PROFILES))
def test_profile_is_vectorised_over_joints_and_times(name):
    profile = PROFILES[name]
    times = np.linspace(-0.5, T + 0.5, 23)
    batch = profile(times, Q_START, Q_GOAL, T)
    assert all(x.shape == (len(times), len(Q_START)) for x in batch)
    for k, t in enumerate(times):
        for j in range(len(Q_START)):
            single = profile(t, Q_START[j:j + 1], Q_GOAL[j:j + 1], T)
            for array, value in zip(batch, single):
                assert array[k, j] == pytest.approx(value[0], abs=1e-13)


@pytest.mark.parametrize('duration', [0.0, -1.0, float('nan'), float('inf')])
def test_profile_rejects_a_non_positive_or_non_finite_duration(duration):
    with pytest.raises(ValueError, match='duration'):
        quintic(0.5, Q_START, Q_GOAL, duration)


@pytest.mark.parametrize('name', sorted(PROFILES))
def test_sampled_command_holds_exact_profile_samples_without_a_point_at_zero(name):
    names = ('a', 'b', 'c', 'd')
    command = sample_profile(name, Q_START, Q_GOAL, T, 12, names)
    assert command.joint_names == names and command.start_time == 0.0
    times = [p.time_from_start for p in command.points]
    assert len(times) == 12 and times[0] > 0.0 and times[-1] == T
    assert np.all(np.diff(times) > 0.0)
    for point in command.points:
        q, qd, qdd = PROFILES[name](point.time_from_start, Q_START, Q_GOAL, T)
        np.testing.assert_allclose(point.positions, q, atol=1e-15)
        np.testing.assert_allclose(point.velocities, qd, atol=1e-15)
        np.testing.assert_allclose(point.accelerations, qdd, atol=1e-15)


def test_sample_profile_rejects_a_name_count_mismatch():
    with pytest.raises(ValueError, match='joint_names'):
        sample_profile('quintic', Q_START, Q_GOAL, T, 5, ('a', 'b'))
