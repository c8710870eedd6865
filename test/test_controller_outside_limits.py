"""The controller facing an arm outside its position limits (a plant without stops,
started at [LEE]'s pose: q3 = 90 deg, 45 deg beyond the PUMA 560's joint-3 range):
activation says so in one line, /diagnostics names the joint and the distance, goals on the
topic and through the action are accepted only if they bring the joint back inside, and
refused with a reason naming it otherwise (doc/trajectories.md)."""

import math

import pytest
from rcl_interfaces.msg import Log
from rclpy.node import Node
from rclpy.parameter import Parameter
from rclpy.qos import DurabilityPolicy, QoSProfile
from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint

from robot_dynamics.nodes.controller import ComputedTorqueController
from robot_dynamics.nodes.managed_controller import ManagedComputedTorqueController
from robot_dynamics.nodes.plant import PlantSimulator
from robot_dynamics.trajectories.sampler import (JointTrajectorySampler, TrajectoryCommand,
                                                 TrajectoryPoint, TrajectoryRejected)
from ros_testing import PUMA, RosHarness

pytestmark = pytest.mark.filterwarnings('ignore::UserWarning')
JOINTS = [f'joint_{i}' for i in range(1, 7)]
Q0 = [1.5707963267948966, 0.0, 1.5707963267948966, 0.0, 0.0, 0.0]
Q3_MAX = math.radians(45.0)            # config/puma560.yaml position_max[2]
BEYOND = f'{Q0[2] - Q3_MAX:.4g} above position_max'      # '0.7854 above position_max'
INSIDE = [1.5707963267948966, 0.0, 0.5, 0.0, 0.0, 0.0]
CONTROLLER = '/computed_torque_controller'
LOOP = ('initial_positions:=' + str(Q0), 'publish_clock:=true', 'real_time_factor:=0.0',
        'joint_stops:=false', 'control_mode:=on_state', 'allow_partial_joints_goal:=true')


# ---------------------------------------------------------------------- the sampler

def sampler_outside():
    sampler = JointTrajectorySampler(JOINTS, position_min=[-3.0] * 6,
                                     position_max=[3.0, 3.0, Q3_MAX, 3.0, 3.0, 3.0],
                                     allow_partial_joints_goal=True)
    sampler.hold(Q0, 0.0)
    return sampler


def command(joints, positions, seconds=1.0):
    return TrajectoryCommand(joint_names=joints, points=[
        TrajectoryPoint(time_from_start=seconds, positions=positions)])


def test_the_sampler_accepts_a_trajectory_that_brings_the_joint_back_inside():
    sampler = sampler_outside()
    sampler.accept(command(JOINTS, INSIDE), 0.0)
    assert sampler.sample(0.0).positions[2] == pytest.approx(Q0[2])   # starts where it is
    assert sampler.sample(1.0).positions[2] == pytest.approx(0.5)     # ends inside
    assert sampler.describe_outside(sampler.sample(1.0).positions) == ''


def test_the_sampler_refuses_a_trajectory_that_leaves_the_joint_out_naming_it():
    sampler = sampler_outside()
    with pytest.raises(TrajectoryRejected) as error:
        sampler.accept(command(['joint_1'], [0.2]), 0.0)
    assert "joint 'joint_3' is outside its limits" in str(error.value)
    assert BEYOND in str(error.value) and 'leaves it out' in str(error.value)
    assert sampler.status(0.5) == 'holding'              # nothing changed


def test_the_sampler_refuses_a_point_outside_saying_the_joint_starts_outside():
    sampler = sampler_outside()
    with pytest.raises(TrajectoryRejected) as error:
        sampler.accept(command(JOINTS, Q0), 0.0)          # stays where it is
    text = str(error.value)
    assert "(joint 'joint_3')" in text and 'starts outside its limits' in text and BEYOND in text


def test_describe_outside_names_each_joint_side_and_distance():
    sampler = sampler_outside()
    assert sampler.describe_outside([0.0, -3.5, 1.0, 0.0, 0.0, 0.0]) == (
        f'joint_2 at -3.5, 0.5 below position_min -3, joint_3 at 1, '
        f'{1.0 - Q3_MAX:.4g} above position_max {Q3_MAX:.6g}')
    assert sampler.outside_limits([0.0] * 6) == []


# ---------------------------------------------------------------------- the nodes

class Probe(Node):
    """/rosout, and the topic a user sends trajectories on."""

    def __init__(self, context):
        super().__init__('outside_limits_probe', context=context)
        self.logs = []
        # /rosout keeps its recent lines for late subscribers (transient local)
        rosout = QoSProfile(depth=1000, durability=DurabilityPolicy.TRANSIENT_LOCAL)
        self.create_subscription(Log, '/rosout', self.logs.append, rosout)
        self.topic = self.create_publisher(JointTrajectory, f'{CONTROLLER}/joint_trajectory',
                                           10)

    def lines(self, words):
        return [log for log in self.logs if words in log.msg]


def trajectory(joints, positions, seconds=1):
    point = JointTrajectoryPoint(positions=[float(v) for v in positions])
    point.time_from_start.sec = seconds
    return JointTrajectory(joint_names=list(joints), points=[point])


def start(controller_class):
    """Plant (no stops) at Q0 and the controller with the preset's limits, in lock-step;
    the plant is added once the probe hears the controller's /rosout."""
    harness = RosHarness(PUMA, overrides=LOOP)
    controller = harness.add(controller_class(
        context=harness.context, parameter_overrides=[Parameter('use_sim_time', value=True)]))
    probe = harness.add(Probe(harness.context))
    harness.spin_until(lambda: probe.count_publishers('/rosout') >= 2, '/rosout')
    return harness, controller, probe


@pytest.fixture(scope='module')
def loop():
    harness, controller, probe = start(ComputedTorqueController)
    plant = harness.add(PlantSimulator(context=harness.context))
    harness.spin_until(lambda: controller._ready and plant.sim_time > 0.2
                       and probe.topic.get_subscription_count() > 0, 'the loop')
    yield harness, plant, controller, probe
    harness.close()


def settle(harness, plant, seconds):
    end = plant.sim_time + seconds
    harness.spin_until(lambda: plant.sim_time >= end, f'{seconds} s simulated')


def test_the_first_hold_outside_the_limits_says_so_in_one_line(loop):
    harness, plant, controller, probe = loop
    harness.spin_until(lambda: probe.lines('all joints seen'), 'the hold line')
    lines = probe.lines('all joints seen')
    assert len(lines) == 1 and lines[0].level == Log.WARN and '\n' not in lines[0].msg
    assert 'outside the position limits: joint_3 at 1.5708, ' + BEYOND in lines[0].msg
    assert 'joint_1' not in lines[0].msg


def test_diagnostics_name_the_joint_and_how_far_outside(loop):
    harness, plant, controller, probe = loop
    status = controller._diagnostics.status()
    values = {kv.key: kv.value for kv in status.values}
    assert values['outside position limits'].startswith('joint_3 at 1.5708, ' + BEYOND)
    assert status.level == b'\x01' and 'outside the position limits: joint_3' in status.message


def test_a_topic_trajectory_leaving_the_joint_out_is_rejected_naming_it(loop):
    harness, plant, controller, probe = loop
    probe.topic.publish(trajectory(['joint_1'], [1.4]))
    harness.spin_until(lambda: probe.lines('joint_trajectory rejected'), 'the rejection')
    text = probe.lines('joint_trajectory rejected')[0].msg
    assert "joint 'joint_3' is outside its limits" in text and BEYOND in text
    assert controller._status == 'holding'


def test_an_action_goal_keeping_the_joint_outside_is_refused_naming_it(loop):
    pytest.importorskip('control_msgs', reason='control_msgs is not built here')
    from control_msgs.action import FollowJointTrajectory
    from rclpy.action import ActionClient
    harness, plant, controller, probe = loop
    client = ActionClient(probe, FollowJointTrajectory,
                          f'{CONTROLLER}/follow_joint_trajectory')
    harness.spin_until(client.server_is_ready, 'the action server')
    for goal_trajectory, words in (
            (trajectory(JOINTS, [1.4] + Q0[1:]), 'starts outside its limits'),
            (trajectory(['joint_1'], [1.4]), 'leaves it out')):
        future = client.send_goal_async(FollowJointTrajectory.Goal(trajectory=goal_trajectory))
        harness.spin_until(future.done, 'the goal response')
        result = future.result().get_result_async()
        harness.spin_until(result.done, 'the result')
        answer = result.result().result
        assert answer.error_code == FollowJointTrajectory.Result.INVALID_GOAL
        assert 'joint_3' in answer.error_string and BEYOND in answer.error_string
        assert words in answer.error_string
    assert controller._status == 'holding'


def test_a_trajectory_bringing_the_joint_back_inside_is_accepted(loop):
    harness, plant, controller, probe = loop
    probe.topic.publish(trajectory(JOINTS, INSIDE))
    harness.spin_until(lambda: probe.lines('joint_trajectory accepted'), 'the acceptance')
    settle(harness, plant, 1.5)
    assert plant.q[2] < Q3_MAX
    values = {kv.key: kv.value for kv in controller._diagnostics.status().values}
    assert values['outside position limits'] == 'none'


def test_the_managed_controller_activated_outside_the_limits_says_so_each_time():
    harness, controller, probe = start(ManagedComputedTorqueController)
    try:
        plant = harness.add(PlantSimulator(context=harness.context))
        controller.trigger_configure()
        for count in (1, 2):
            controller.trigger_activate()
            harness.spin_until(lambda: len(probe.lines('all joints seen')) == count,
                               f'hold line {count}')
            controller.trigger_deactivate()
        lines = probe.lines('all joints seen')
        assert all('outside the position limits: joint_3' in log.msg for log in lines)
        assert plant.sim_time > 0.0
    finally:
        harness.close()
