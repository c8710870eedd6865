"""Speed scaling through the nodes (doc/trajectories.md, "Speed scaling"): the shipped loop
(plant and controller lock-step on simulated time), a MoveIt-like FollowJointTrajectory client
and a publisher on ~/speed_scaling_input (control_msgs/msg/SpeedScalingFactor, transient
local as JTC's subscription wants). The same goal runs once unscaled and once while the
factor goes 1 → 0.5 → 0 → 1; durations are measured in simulated time on
~/controller_state and compared with the integral of the factor reported there.

control_msgs 5.8 (Jazzy) and 6.8 (Kilted) both have SpeedScalingFactor and the
`speed_scaling_factor` field, so nothing here depends on the distribution.
"""

import numpy as np
import pytest

pytest.importorskip('control_msgs.msg', reason='control_msgs is not built in this environment '
                                               '(tools/dev.py builds it; needs cmake and a C '
                                               'compiler)')
from action_msgs.msg import GoalStatus  # noqa: E402
from control_msgs.msg import SpeedScalingFactor  # noqa: E402
from control_msgs.srv import QueryTrajectoryState  # noqa: E402
from rclpy.event_handler import PublisherEventCallbacks  # noqa: E402
from rclpy.parameter import Parameter  # noqa: E402
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy  # noqa: E402

from robot_dynamics.nodes.controller import ComputedTorqueController  # noqa: E402
from robot_dynamics.nodes.common.ros_params import ConfigurationError  # noqa: E402
from robot_dynamics.trajectories.speed_scaling import DEFAULT_RATE_LIMIT  # noqa: E402
from ros_testing import call_service, lockstep_loop, PUMA, RosHarness, SIM  # noqa: E402
from test_follow_joint_trajectory import (away, CONTROLLER, move,  # noqa: E402,I100
                                          MoveItLikeClient, outcome, run, settle)

pytestmark = pytest.mark.filterwarnings('ignore::UserWarning')
TOPIC = f'{CONTROLLER}/speed_scaling_input'
LATCHED = QoSProfile(depth=1, reliability=ReliabilityPolicy.RELIABLE,
                     durability=DurabilityPolicy.TRANSIENT_LOCAL)
DURATION = 2.0                      # s of trajectory time
OFFSETS = [0.5, -0.4, 0.45, 0.6, -0.6, 0.7]
# (simulated s after the goal's acceptance, factor): 1 → 0.5 → 0 → 1 during the goal; the
# fast middle of the move runs at half speed, the pause comes at 3/4 of it
SCHEDULE = [(0.2, 0.5), (2.6, 0.0), (3.2, 1.0)]
CYCLE = 0.01                        # s: the loop's period (config/sim.yaml, 100 Hz)


@pytest.fixture(scope='module')
def loop():
    harness, plant, controller = lockstep_loop(integration_step=0.002)
    client = harness.add(MoveItLikeClient(harness.context))
    factor = client.create_publisher(SpeedScalingFactor, TOPIC, LATCHED)
    harness.spin_until(lambda: client.client.server_is_ready() and controller._ready
                       and factor.get_subscription_count() > 0, 'the action server, the '
                       'loop and the ~/speed_scaling_input subscription')
    client.handshake(harness)
    yield harness, plant, controller, client, factor
    harness.close()


def stamp(msg):
    return msg.header.stamp.sec + msg.header.stamp.nanosec * 1e-9


def run_goal(loop, schedule):
    """Send the same kind of goal from where the arm is, publish the schedule's factors at
    their simulated times, wait for the result; (status, result, states of the goal,
    acceptance time, final positions)."""
    harness, plant, controller, client, factor = loop
    settle(loop[:4], 0.3)
    goal = move(plant, away(plant, OFFSETS), seconds=DURATION)
    final = np.array(goal.trajectory.points[-1].positions)
    client.states.clear()
    handle = run(loop[:4], goal)
    accepted = stamp(client.feedback[bytes(handle.goal_id.uuid)][0])
    result = handle.get_result_async()
    pending = list(schedule)

    def done():
        while pending and plant.sim_time >= accepted + pending[0][0]:
            factor.publish(SpeedScalingFactor(factor=pending.pop(0)[1]))
        return result.done() and not pending
    harness.spin_until(done, 'the goal under speed scaling')
    settle(loop[:4], 0.05)
    response = result.result()
    states = [s for s in client.states if stamp(s) >= accepted]
    return response.status, response.result, states, accepted, final


def end_of_reference(states, final):
    """Simulated time of the first state whose reference is at the last point, at rest
    (the cycle at the last point itself evaluates the polynomial there: rounding only)."""
    for s in states:
        if (np.allclose(s.reference.positions, final, atol=1e-12)
                and not np.any(s.reference.velocities)):
            return stamp(s)
    raise AssertionError('the reference never reached the last point')


def test_a_goal_under_1_05_0_1_succeeds_stretched_by_the_factor_and_tracks_better(loop):
    harness, plant, controller, client, factor = loop
    status, result, plain, start0, final0 = run_goal(loop, [])
    assert status == GoalStatus.STATUS_SUCCEEDED, result.error_string
    plain_duration = end_of_reference(plain, final0) - start0
    assert plain_duration == pytest.approx(DURATION, abs=2 * CYCLE)

    status, result, scaled, start, final = run_goal(loop, SCHEDULE)
    assert status == GoalStatus.STATUS_SUCCEEDED, result.error_string
    assert np.all(np.abs(np.asarray(plant.q) - final) <= 0.01)
    end = end_of_reference(scaled, final)
    times = np.array([stamp(s) for s in scaled])
    factors = np.array([s.speed_scaling_factor for s in scaled])
    # the factor as ~/controller_state shows it: each value of the schedule held for a
    # while, and between them ramps no steeper than the rate limit
    for value in (0.5, 0.0, 1.0):
        assert np.sum(factors == value) >= 20, value
    # a lock-step re-publish can repeat a cycle's state with its stamp: one sample per stamp
    distinct = np.concatenate(([True], np.diff(times) > 0.0))
    rates = np.abs(np.diff(factors[distinct])) / np.diff(times[distinct])
    assert np.max(rates) <= DEFAULT_RATE_LIMIT * (1 + 1e-9)
    # the trajectory took as long as the scaled time says: ∫ f dt = its duration
    during = times <= end
    integral = float(np.sum(factors[during][:-1] * np.diff(times[during])))
    assert integral == pytest.approx(DURATION, abs=3 * CYCLE)
    stretch = (end - start) - plain_duration
    lost = float(np.sum((1.0 - factors[during][:-1]) * np.diff(times[during])))
    assert stretch == pytest.approx(lost, abs=3 * CYCLE)
    assert stretch > 1.5                  # 2 s of half speed, a pause, ramps (≈ 1.9 s)
    # paused: the reference stood still with zero velocity and acceleration
    paused = [s for s in scaled if s.speed_scaling_factor == 0.0]
    assert len({tuple(s.reference.positions) for s in paused}) == 1
    assert all(not np.any(s.reference.velocities) and not np.any(s.reference.accelerations)
               for s in paused)
    # the tracking error over the whole goal stays below the unscaled run's
    worst_plain = max(np.max(np.abs(s.error.positions)) for s in plain)
    worst_scaled = max(np.max(np.abs(s.error.positions)) for s in scaled)
    print(f'max |q_d - q|: unscaled {worst_plain:.3g} rad, scaled {worst_scaled:.3g} rad; '
          f'{plain_duration:.3f} s -> {end - start:.3f} s (lost {lost:.3f} s)')
    assert worst_scaled < worst_plain


def test_the_subscription_matches_jtc_s_type_and_qos(loop):
    from test_control_msgs_build import EXPECTED, ros_distro
    harness, plant, controller, client, factor = loop
    infos = client.get_subscriptions_info_by_topic(TOPIC)
    assert len(infos) == 1
    assert infos[0].qos_profile.durability == DurabilityPolicy.TRANSIENT_LOCAL
    assert infos[0].qos_profile.reliability == ReliabilityPolicy.RELIABLE
    if ros_distro() in EXPECTED and hasattr(infos[0], 'topic_type_hash'):
        assert str(infos[0].topic_type_hash) == EXPECTED[ros_distro()]['msg/SpeedScalingFactor']


def test_bad_factors_are_refused_with_one_line_naming_the_value(loop, capfd):
    harness, plant, controller, client, factor = loop
    factor.publish(SpeedScalingFactor(factor=0.7))
    harness.spin_until(lambda: client.states and client.states[-1].speed_scaling_factor
                       == 0.7, 'the factor 0.7 in ~/controller_state')
    capfd.readouterr()
    for value in (float('nan'), -0.2, 1.5, float('inf')):
        factor.publish(SpeedScalingFactor(factor=value))
        settle(loop[:4], 0.1)
        assert client.states[-1].speed_scaling_factor == 0.7
    factor.publish(SpeedScalingFactor(factor=1.0))
    harness.spin_until(lambda: client.states[-1].speed_scaling_factor == 1.0, 'factor 1')
    lines = [line for line in capfd.readouterr().err.splitlines() if 'refused' in line]
    assert len(lines) == 4, lines
    for line, value in zip(lines, ('nan', '-0.2', '1.5', 'inf')):
        assert 'speed_scaling_input' in line and value in line and 'stays 0.7' in line


def test_a_factor_just_above_1_is_1_and_a_refusal_is_a_warning_on_diagnostics(loop, capfd):
    """1 + 1e-12 (a bridge's rounding after a pause) resumes at 1; a refused factor shows on
    /diagnostics as `speed scaling refused` with WARN until a valid factor arrives."""
    from diagnostic_msgs.msg import DiagnosticArray
    harness, plant, controller, client, factor = loop
    reports = []
    name = 'computed_torque_controller: control loop'
    client.create_subscription(DiagnosticArray, '/diagnostics', lambda msg: reports.extend(
        s for s in msg.status if s.name == name), 100)
    factor.publish(SpeedScalingFactor(factor=0.0))
    harness.spin_until(lambda: client.states[-1].speed_scaling_factor == 0.0, 'the pause')
    capfd.readouterr()
    factor.publish(SpeedScalingFactor(factor=1.000000000001))
    harness.spin_until(lambda: client.states[-1].speed_scaling_factor == 1.0,
                       'factor 1 from 1 + 1e-12')
    assert controller.sampler.scaled_time.requested == 1.0
    assert 'refused' not in capfd.readouterr().err

    def latest():
        return {kv.key: kv.value for kv in reports[-1].values} if reports else {}
    mark = len(reports)
    factor.publish(SpeedScalingFactor(factor=1.01))
    harness.spin_until(lambda: len(reports) > mark and 'factor stays 1' in latest().get(
        'speed scaling refused', ''), 'the refusal on /diagnostics')
    refused = reports[-1]
    assert refused.level == bytes([1]) or refused.level == 1       # WARN
    assert '1.01' in latest()['speed scaling refused']
    assert 'speed_scaling_input' in refused.message and '1.01' in refused.message
    assert latest()['speed scaling factor'] == '1'
    assert client.states[-1].speed_scaling_factor == 1.0            # kept
    mark = len(reports)
    harness.spin_until(lambda: len(reports) > mark + 1, 'a later report')
    assert 'factor stays 1' in latest()['speed scaling refused']    # until a valid one
    factor.publish(SpeedScalingFactor(factor=1.0))
    harness.spin_until(lambda: latest().get('speed scaling refused') == 'none',
                       'the refusal cleared by a valid factor')
    assert 'speed_scaling_input' not in reports[-1].message


def test_a_publisher_without_transient_local_is_told_how_to_publish(loop, monkeypatch):
    """`ros2 topic pub` without `--qos-durability transient_local` offers volatile
    durability, which JTC's transient-local subscription never matches: its factors do not
    arrive, and the controller's log says so and how to publish instead."""
    harness, plant, controller, client, factor = loop
    logger = controller.get_logger()
    lines, original = [], logger.warning
    monkeypatch.setattr(logger, 'warning', lambda text, **kwargs: (
        lines.append(text), original(text, **kwargs))[1])
    volatile = client.create_publisher(SpeedScalingFactor, TOPIC, QoSProfile(
        depth=1, reliability=ReliabilityPolicy.RELIABLE,
        durability=DurabilityPolicy.VOLATILE), event_callbacks=PublisherEventCallbacks(
            use_default_callbacks=False))         # (rclpy's own warning on our side)
    try:
        harness.spin_until(lambda: any('incompatible QoS' in line for line in lines),
                           'the warning about the incompatible publisher')
        said = [line for line in lines if 'incompatible QoS' in line]
        assert len(said) == 1, said
        assert 'DURABILITY' in said[0] and '--qos-durability transient_local' in said[0]
        assert TOPIC in said[0]
        assert volatile.get_subscription_count() == 0        # indeed never matched
    finally:
        client.destroy_publisher(volatile)


def test_query_state_answers_with_the_scaled_reference_while_paused(loop):
    harness, plant, controller, client, factor = loop
    service = client.create_client(QueryTrajectoryState, f'{CONTROLLER}/query_state')
    handle = run(loop[:4], move(plant, away(plant, [-v for v in OFFSETS]), seconds=DURATION))
    settle(loop[:4], 0.5)
    factor.publish(SpeedScalingFactor(factor=0.0))
    harness.spin_until(lambda: client.states[-1].speed_scaling_factor == 0.0, 'the pause')
    paused = client.states[-1]
    later = QueryTrajectoryState.Request()
    later.time.sec, later.time.nanosec = divmod(int((stamp(paused) + 5.0) * 1e9), 10**9)
    answer = call_service(harness, service, later, 'query_state', resend_after=2.0)
    assert answer.success, answer.message
    np.testing.assert_allclose(answer.position, paused.reference.positions, atol=1e-12)
    assert not np.any(answer.velocity) and not np.any(answer.acceleration)
    factor.publish(SpeedScalingFactor(factor=1.0))
    status, result = outcome(loop[:4], handle)
    assert status == GoalStatus.STATUS_SUCCEEDED, result.error_string


def test_the_initial_factor_parameter_and_jtc_s_hardware_interfaces():
    harness = RosHarness(PUMA, SIM, ros_args=['-p', 'speed_scaling.initial_scaling_factor:=0.25'])
    try:
        controller = harness.add(ComputedTorqueController(context=harness.context))
        assert controller.sampler.scaled_time.requested == 0.25
        assert controller.get_parameter('speed_scaling.initial_scaling_factor').value == 0.25
    finally:
        harness.close()
    for override, fragment in ((Parameter('speed_scaling.initial_scaling_factor', value=1.5),
                                'speed_scaling.initial_scaling_factor'),
                               (Parameter('speed_scaling.state_interface',
                                          value='speed_scaling/speed_scaling_factor'),
                                'speed_scaling.state_interface'),
                               (Parameter('speed_scaling.rate_limit', value=0.0),
                                'speed_scaling.rate_limit')):
        harness = RosHarness(PUMA, SIM)
        try:
            with pytest.raises(ConfigurationError, match=fragment.replace('.', r'\.')):
                ComputedTorqueController(context=harness.context,
                                         parameter_overrides=[override])
        finally:
            harness.close()
