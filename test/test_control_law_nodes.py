"""The controller's `control_law` through the nodes (plant_simulator + controller in
lock-step on simulated time, the PUMA 560 at [LEE]'s start pose): live switching through the
parameter service (what `ros2 param set` calls) without an effort jump at rest,
`effort_rate_limit` in both directions, refusals of bad values and of features a law does
not have, a Cartesian target moving the tool, and ~/tool_pose."""

import numpy as np
import pytest
from geometry_msgs.msg import PoseStamped
from rcl_interfaces.srv import SetParameters
from rclpy.node import Node
from rclpy.parameter import Parameter
from rclpy.qos import DurabilityPolicy, QoSProfile
from sensor_msgs.msg import JointState
from std_msgs.msg import String
from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint

from robot_dynamics import dynamics
from robot_dynamics.dynamics import kinematics
from robot_dynamics.nodes.controller import ComputedTorqueController
from robot_dynamics.nodes.plant import PlantSimulator
from ros_testing import call_service, double, doubles, PUMA, RESEND, RosHarness, SIM, string

pytestmark = pytest.mark.filterwarnings('ignore::UserWarning')
JOINTS = [f'joint_{i}' for i in range(1, 7)]
CONTROLLER = '/computed_torque_controller'
CYCLE = 0.01        # s: the plant's state period = the control period (config/sim.yaml)
BUMP = 0.5          # N m: the largest effort change a switch at rest may cause
# A start pose away from singularities ([LEE]'s start pose has the wrist straight: q5 = 0).
START = [1.5707963, -0.5235988, 2.0943951, 0.3490659, 0.7853982, 0.1745329]


class Operator(Node):
    """`ros2 param set`, a trajectory and target-pose publisher; records ~/output's
    efforts (with their simulated times), ~/tool_pose and ~/status."""

    def __init__(self, context):
        super().__init__('operator', context=context)
        self.client = self.create_client(SetParameters, f'{CONTROLLER}/set_parameters')
        self.trajectory = self.create_publisher(JointTrajectory,
                                                f'{CONTROLLER}/joint_trajectory', 10)
        self.target = self.create_publisher(PoseStamped, f'{CONTROLLER}/target_pose', 10)
        self.efforts = []
        self.tool_poses = []
        self.status = None
        self.create_subscription(JointState, f'{CONTROLLER}/output',
                                 lambda m: self.efforts.append(np.array(m.effort)), 1000)
        self.create_subscription(PoseStamped, f'{CONTROLLER}/tool_pose',
                                 self.tool_poses.append, 100)
        latched = QoSProfile(depth=1, durability=DurabilityPolicy.TRANSIENT_LOCAL)
        self.create_subscription(String, f'{CONTROLLER}/status',
                                 lambda m: setattr(self, 'status', m.data), latched)


@pytest.fixture
def loop():
    harness = RosHarness(PUMA, SIM)
    plant = harness.add(PlantSimulator(context=harness.context, parameter_overrides=[
        Parameter('real_time_factor', value=0.0), Parameter('integration_step', value=0.005),
        Parameter('initial_positions', value=START)]))
    controller = harness.add(ComputedTorqueController(
        context=harness.context, parameter_overrides=[Parameter('use_sim_time', value=True)]))
    operator = harness.add(Operator(harness.context))
    harness.spin_until(lambda: operator.client.service_is_ready()
                       and operator.trajectory.get_subscription_count() > 0
                       and operator.target.get_subscription_count() > 0
                       and operator.status == 'holding', 'the controller holding')
    wait_cycles(harness, operator, 20)          # settled at rest
    yield harness, plant, controller, operator
    harness.close()


def wait_cycles(harness, operator, cycles):
    count = len(operator.efforts) + cycles
    harness.spin_until(lambda: len(operator.efforts) >= count, f'{cycles} control cycles')


def set_parameters(harness, operator, *parameters):
    return call_service(harness, operator.client,
                        SetParameters.Request(parameters=list(parameters)),
                        'the set_parameters response', resend_after=RESEND).results


def switch(harness, operator, law):
    (result,) = set_parameters(harness, operator, string('control_law', law))
    assert result.successful, result.reason


def effort_change_over_switch(harness, operator, law):
    """max |τ − τ_before| per joint from the last cycle before the switch to 0.3 s after."""
    wait_cycles(harness, operator, 2)
    before = operator.efforts[-1]
    start = len(operator.efforts)
    switch(harness, operator, law)
    wait_cycles(harness, operator, round(0.3 / CYCLE))
    after = np.array(operator.efforts[start:])
    return np.max(np.abs(after - before), axis=0)


@pytest.mark.parametrize('law', ['gravity_compensation', 'joint_impedance',
                                 'cartesian_impedance'])
def test_switching_at_rest_and_back_moves_the_effort_less_than_half_a_newton_metre(loop, law):
    harness, plant, controller, operator = loop
    change = effort_change_over_switch(harness, operator, law)
    assert controller._law_name == law
    assert np.all(change < BUMP), change
    # at rest every law commands the gravity torques (computed independently of the node)
    np.testing.assert_allclose(operator.efforts[-1], dynamics.gravity_torques(
        controller.model, plant.q), atol=BUMP)
    back = effort_change_over_switch(harness, operator, 'computed_torque')
    assert controller._law_name == 'computed_torque'
    assert np.all(back < BUMP), back


def test_effort_rate_limit_bounds_the_effort_change_in_both_directions(loop):
    """A 0.05 rad reference step on joint 1 under computed_torque asks for a jump of the
    effort up, then down as the arm arrives: with effort_rate_limit every cycle's change
    is at most rate × period, and the limit is reached in both directions."""
    harness, plant, controller, operator = loop
    rate = 100.0    # N m/s: 1 N m per 10 ms cycle
    (result,) = set_parameters(harness, operator, doubles('effort_rate_limit', [rate] * 6))
    assert result.successful, result.reason
    wait_cycles(harness, operator, 3)
    start = len(operator.efforts)
    goal = plant.q.copy()
    goal[0] += 0.05
    operator.trajectory.publish(JointTrajectory(joint_names=JOINTS, points=[
        JointTrajectoryPoint(positions=goal.tolist())]))
    wait_cycles(harness, operator, 300)
    steps = np.diff(np.array(operator.efforts[start - 1:]), axis=0)
    bound = rate * CYCLE
    assert np.all(np.abs(steps) <= bound * (1.0 + 1e-9)), np.max(np.abs(steps))
    assert steps[:, 0].max() == pytest.approx(bound, rel=1e-6)
    assert steps[:, 0].min() == pytest.approx(-bound, rel=1e-6)
    np.testing.assert_allclose(plant.q[0], goal[0], atol=5e-3)     # it still gets there


@pytest.mark.parametrize('parameter, fragment', [
    (string('control_law', 'torque'), 'control_law'),
    (doubles('joint_impedance.stiffness', [100.0, 100.0, -1.0, 100.0, 100.0, 100.0]),
     'joint_impedance.stiffness[2]'),
    (doubles('joint_impedance.stiffness', [100.0] * 5), 'joint_impedance.stiffness'),
    (double('joint_impedance.damping_ratio', float('nan')), 'joint_impedance.damping_ratio'),
    (double('cartesian.damping_ratio', -1.0), 'cartesian.damping_ratio'),
    (doubles('cartesian.stiffness', [500.0] * 3), 'cartesian.stiffness'),
    (doubles('cartesian.tool', [0.0, 0.0, 0.1, 0.0, 0.0, 0.0, 2.0]), 'cartesian.tool'),
    (doubles('effort_rate_limit', [10.0] * 7), 'effort_rate_limit'),
    (doubles('gravity_compensation.damping', [0.0, float('nan')] + [0.0] * 4),
     'gravity_compensation.damping[1]'),
    (string('joint_impedance.feedforward', 'full'), 'joint_impedance.feedforward'),
    (doubles('cartesian.nullspace_damping', [1.0] * 4), 'cartesian.nullspace_damping'),
    (doubles('cartesian.max_target_step', [0.1, 0.0]), 'cartesian.max_target_step[1]'),
    (doubles('cartesian.nullspace_posture', [0.0] * 5), 'cartesian.nullspace_posture'),
])
def test_bad_law_parameters_are_refused_naming_the_parameter(loop, parameter, fragment):
    harness, _, controller, operator = loop
    (result,) = set_parameters(harness, operator, parameter)
    assert not result.successful
    assert fragment in result.reason
    assert len(result.reason.splitlines()) == 1
    wait_cycles(harness, operator, 3)
    assert controller._law_name == 'computed_torque'


def test_a_joint_trajectory_under_gravity_compensation_is_refused_naming_the_law(loop):
    harness, plant, controller, operator = loop
    switch(harness, operator, 'gravity_compensation')
    warnings = []
    controller._warn = warnings.append
    goal = plant.q + 0.1
    operator.trajectory.publish(JointTrajectory(joint_names=JOINTS, points=[
        JointTrajectoryPoint(positions=goal.tolist())]))
    harness.spin_until(lambda: warnings, 'the refusal')
    assert 'control_law is gravity_compensation' in warnings[0]
    assert controller.sampler.status(controller._last_t) == 'holding'


def test_a_target_pose_under_a_joint_law_is_refused_naming_the_law(loop):
    harness, plant, controller, operator = loop
    warnings = []
    controller._cartesian._warn = warnings.append
    operator.target.publish(pose_message(kinematics.tool_pose(controller.model, plant.q)))
    harness.spin_until(lambda: warnings, 'the refusal')
    assert warnings == ['target_pose refused: control_law is computed_torque: target poses '
                        'apply under cartesian_impedance']


def pose_message(transform, frame=''):
    msg = PoseStamped()
    msg.header.frame_id = frame
    p, o = msg.pose.position, msg.pose.orientation
    p.x, p.y, p.z = (float(v) for v in transform[:3, 3])
    o.x, o.y, o.z, o.w = (float(v) for v in kinematics.quaternion_from_matrix(
        transform[:3, :3]))
    return msg


def test_bad_target_poses_are_refused_naming_the_field(loop):
    harness, plant, controller, operator = loop
    switch(harness, operator, 'cartesian_impedance')
    wait_cycles(harness, operator, 2)
    warnings = []
    controller._cartesian._warn = warnings.append
    target = controller.law.target
    here = kinematics.tool_pose(controller.model, plant.q)
    bad = [pose_message(here, frame='world'), pose_message(here), pose_message(here)]
    bad[1].pose.position.y = float('nan')
    bad[2].pose.orientation.w = 2.0
    for k, msg in enumerate(bad):
        operator.target.publish(msg)
        harness.spin_until(lambda: len(warnings) > k, 'the refusal')
    assert "target_pose.header.frame_id: 'world'" in warnings[0]
    assert 'target_pose.pose.position' in warnings[1]
    assert 'target_pose.pose.orientation' in warnings[2]
    assert controller.law.target is target          # unchanged


def test_a_cartesian_target_moves_the_tool_5_cm_within_1_mm(loop):
    harness, plant, controller, operator = loop
    switch(harness, operator, 'cartesian_impedance')
    wait_cycles(harness, operator, 2)
    start = kinematics.tool_pose(controller.model, plant.q)
    goal = start.copy()
    goal[:3, 3] += [0.05, 0.0, 0.0]
    operator.target.publish(pose_message(goal, frame='base_link'))
    wait_cycles(harness, operator, 800)             # 8 s (the default stiffness: 1 mm in ~6 s)
    reached = kinematics.tool_pose(controller.model, plant.q)
    assert np.linalg.norm(reached[:3, 3] - goal[:3, 3]) < 1e-3
    angle = np.arccos(np.clip((np.trace(reached[:3, :3].T @ goal[:3, :3]) - 1.0) / 2.0,
                              -1.0, 1.0))
    assert angle < 0.01          # the soft default rotational stiffness holds it too


def test_tool_pose_is_the_measured_tool_pose_in_the_base_frame(loop):
    harness, plant, controller, operator = loop
    harness.spin_until(lambda: len(operator.tool_poses) >= 3, 'three tool poses')
    msg = operator.tool_poses[-1]
    assert msg.header.frame_id == 'base_link'
    expected = kinematics.tool_pose(controller.model, plant.q)     # at rest: any recent q
    p, o = msg.pose.position, msg.pose.orientation
    np.testing.assert_allclose([p.x, p.y, p.z], expected[:3, 3], atol=1e-6)
    np.testing.assert_allclose(kinematics.matrix_from_quaternion([o.x, o.y, o.z, o.w]),
                               expected[:3, :3], atol=1e-6)


# ------------------------------------------------------------------ more through the nodes

def wrench_message(force, frame='', moment=(0.0, 0.0, 0.0)):
    from geometry_msgs.msg import WrenchStamped
    msg = WrenchStamped()
    msg.header.frame_id = frame
    msg.wrench.force.x, msg.wrench.force.y, msg.wrench.force.z = (float(f) for f in force)
    msg.wrench.torque.x, msg.wrench.torque.y, msg.wrench.torque.z = (float(m) for m in moment)
    return msg


def push(harness, operator, force, moment=(0.0, 0.0, 0.0), frame=''):
    """The plant's ~/external_wrench: `force` [N] and `moment` [N m] (base frame, the moment
    about the frame's origin) on link `frame` (empty: the tip) from now on."""
    from geometry_msgs.msg import WrenchStamped
    if not hasattr(operator, 'wrench'):
        operator.wrench = operator.create_publisher(WrenchStamped,
                                                    '/plant_simulator/external_wrench', 10)
        harness.spin_until(lambda: operator.wrench.get_subscription_count() > 0,
                           'the plant\'s ~/external_wrench')
    operator.wrench.publish(wrench_message(force, frame, moment))


def test_joint_impedance_deflects_under_a_push_by_the_inverse_stiffness(loop):
    """A constant tip force F on the arm held by a joint impedance: at rest
    K (q − q_held) = Jᵀ(q) F (the plant applies F at the tip; the law adds g(q)), with J
    from the kinematics module and K the stiffness set here."""
    harness, plant, controller, operator = loop
    # 400 1/s² × the mass matrix diagonal at START: 20 rad/s, stable in the 100 Hz loop
    stiffness = np.array([967.0, 572.0, 144.0, 0.7, 0.26, 0.016])
    (result,) = set_parameters(harness, operator, doubles('joint_impedance.stiffness',
                                                          stiffness))
    assert result.successful, result.reason
    switch(harness, operator, 'joint_impedance')
    wait_cycles(harness, operator, 5)
    held = plant.q.copy()
    force = np.array([5.0, -3.0, 4.0])
    push(harness, operator, force)
    wait_cycles(harness, operator, 600)
    assert np.max(np.abs(plant.qd)) < 1e-4
    J = kinematics.jacobian(controller.model, plant.q)
    np.testing.assert_allclose(stiffness * (plant.q - held), J[:3].T @ force, atol=2e-3)
    assert np.max(np.abs(plant.q - held)) > 0.005        # a deflection to measure


def test_gravity_compensation_floats_after_a_push_and_damping_brings_it_to_rest(loop):
    harness, plant, controller, operator = loop
    # 5 1/s × the mass matrix diagonal at START (a damping time of 0.2 s on each joint)
    (result,) = set_parameters(harness, operator, doubles(
        'gravity_compensation.damping', [12.0, 7.0, 1.8, 0.009, 0.003, 0.0002]))
    assert result.successful, result.reason
    switch(harness, operator, 'gravity_compensation')
    start = plant.q.copy()
    push(harness, operator, [0.0, 10.0, 0.0])
    wait_cycles(harness, operator, 20)
    push(harness, operator, [0.0, 0.0, 0.0])
    wait_cycles(harness, operator, 600)
    assert np.linalg.norm(plant.q - start) > 0.01        # moved away and stayed there
    assert np.max(np.abs(plant.qd)) < 1e-3
    wait_cycles(harness, operator, 100)
    moved = plant.q.copy()
    wait_cycles(harness, operator, 100)
    np.testing.assert_allclose(plant.q, moved, atol=1e-3)     # floating, not sagging


def test_a_joint_trajectory_under_joint_impedance_reaches_its_goal(loop):
    harness, plant, controller, operator = loop
    switch(harness, operator, 'joint_impedance')
    goal = plant.q + np.array([0.1, -0.05, 0.05, 0.1, 0.1, 0.1])
    point = JointTrajectoryPoint(positions=goal.tolist())
    point.time_from_start.sec = 1
    operator.trajectory.publish(JointTrajectory(joint_names=JOINTS, points=[point]))
    harness.spin_until(lambda: operator.status == 'running', 'the trajectory running')
    harness.spin_until(lambda: operator.status == 'finished', 'the trajectory finished')
    wait_cycles(harness, operator, 300)
    np.testing.assert_allclose(plant.q, goal, atol=1e-3)


def test_a_switch_in_motion_is_spread_by_the_rate_limit(loop):
    """A 0.1 rad step of the reference leaves computed torque asking for a large effort;
    switching to gravity compensation then asks for g(q) at once: the effort goes there
    no faster than effort_rate_limit."""
    harness, plant, controller, operator = loop
    rate = 50.0
    (result,) = set_parameters(harness, operator, doubles('effort_rate_limit', [rate] * 6))
    assert result.successful, result.reason
    goal = plant.q.copy()
    goal[1] += 0.1
    operator.trajectory.publish(JointTrajectory(joint_names=JOINTS, points=[
        JointTrajectoryPoint(positions=goal.tolist())]))
    wait_cycles(harness, operator, 3)
    start = len(operator.efforts)
    switch(harness, operator, 'gravity_compensation')
    wait_cycles(harness, operator, 100)
    steps = np.diff(np.array(operator.efforts[start - 1:]), axis=0)
    assert np.all(np.abs(steps) <= rate * CYCLE * (1.0 + 1e-9))
    assert np.max(np.abs(steps)) == pytest.approx(rate * CYCLE, rel=1e-6)


def test_target_twist_moves_the_target_reference_velocity(loop):
    """~/target_twist sets the velocity of the latest target (the law's damping then
    acts on v − v_d): kept on the law's target; a twist in another frame is refused."""
    from geometry_msgs.msg import TwistStamped
    harness, plant, controller, operator = loop
    switch(harness, operator, 'cartesian_impedance')
    wait_cycles(harness, operator, 2)
    twist_pub = operator.create_publisher(TwistStamped, f'{CONTROLLER}/target_twist', 10)
    harness.spin_until(lambda: twist_pub.get_subscription_count() > 0, 'the subscription')
    warnings = []
    controller._cartesian._warn = warnings.append
    msg = TwistStamped()
    msg.header.frame_id = 'tool0'
    twist_pub.publish(msg)
    harness.spin_until(lambda: warnings, 'the refusal')
    assert 'target_twist.header.frame_id' in warnings[0]
    msg.header.frame_id = ''
    msg.twist.linear.x = 0.01
    twist_pub.publish(msg)
    harness.spin_until(lambda: controller.law.target.velocity is not None, 'the twist')
    np.testing.assert_array_equal(controller.law.target.velocity, [0.01, 0, 0, 0, 0, 0])
    operator.target.publish(pose_message(kinematics.tool_pose(controller.model, plant.q)))
    harness.spin_until(lambda: controller.law.target.velocity is None, 'a new target')


def test_a_follow_joint_trajectory_goal_under_cartesian_impedance_is_refused(loop):
    pytest.importorskip('control_msgs', reason='control_msgs is not built here')
    from control_msgs.action import FollowJointTrajectory
    from rclpy.action import ActionClient
    harness, plant, controller, operator = loop
    switch(harness, operator, 'cartesian_impedance')
    client = ActionClient(operator, FollowJointTrajectory,
                          f'{CONTROLLER}/follow_joint_trajectory')
    harness.spin_until(client.server_is_ready, 'the action server')
    point = JointTrajectoryPoint(positions=(plant.q + 0.05).tolist())
    point.time_from_start.sec = 1
    goal = FollowJointTrajectory.Goal(trajectory=JointTrajectory(joint_names=JOINTS,
                                                                 points=[point]))
    sent = client.send_goal_async(goal)
    harness.spin_until(sent.done, 'the goal response')
    result = sent.result().get_result_async()
    harness.spin_until(result.done, 'the result')
    outcome = result.result().result
    assert outcome.error_code != FollowJointTrajectory.Result.SUCCESSFUL
    assert 'control_law is cartesian_impedance' in outcome.error_string
    client.destroy()


def test_sim_cartesian_demo_moves_the_tool_to_its_target():
    import os
    import re
    import subprocess
    import sys
    from ros_testing import REPO
    env = dict(os.environ, PYTHONPATH=REPO + os.pathsep + os.environ.get('PYTHONPATH', ''))
    result = subprocess.run(
        [sys.executable, '-m', 'robot_dynamics.nodes.sim', '--duration', '3', '--robot',
         'panda', '--integration-step', '0.002', '--control-law', 'cartesian_impedance'],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    line = next(line for line in result.stdout.splitlines()
                if line.startswith('cartesian_impedance: tool moved'))
    moved = [float(v) for v in re.search(r'\[(.*?)\] mm', line).group(1).split(',')]
    np.testing.assert_allclose(moved, [0.0, 0.0, 50.0], atol=1.0)     # mm


def test_a_law_from_the_parameter_file_holds_the_start_pose():
    """control_law given at start-up (not switched): the first cycle holds the measured tool
    pose, the efforts are the gravity torques and the arm stays."""
    harness = RosHarness(PUMA, SIM)
    try:
        plant = harness.add(PlantSimulator(context=harness.context, parameter_overrides=[
            Parameter('real_time_factor', value=0.0),
            Parameter('integration_step', value=0.005),
            Parameter('initial_positions', value=START)]))
        controller = harness.add(ComputedTorqueController(
            context=harness.context, parameter_overrides=[
                Parameter('use_sim_time', value=True),
                Parameter('control_law', value='cartesian_impedance')]))
        operator = harness.add(Operator(harness.context))
        harness.spin_until(lambda: len(operator.efforts) >= 100, '100 control cycles')
        assert controller._law_name == 'cartesian_impedance'
        np.testing.assert_allclose(plant.q, START, atol=1e-4)
        np.testing.assert_allclose(operator.efforts[-1], dynamics.gravity_torques(
            controller.model, plant.q), atol=0.05)
    finally:
        harness.close()


def test_an_unknown_law_in_the_parameter_file_stops_the_node_naming_it():
    from robot_dynamics.nodes.common.ros_params import ConfigurationError
    harness = RosHarness(PUMA, SIM)
    try:
        with pytest.raises(ConfigurationError, match='control_law'):
            ComputedTorqueController(context=harness.context, parameter_overrides=[
                Parameter('control_law', value='impedance')])
    finally:
        harness.close()
