"""Path tolerance and goal_time on `~/joint_trajectory` trajectories (no action goal), as
joint_trajectory_controller enforces them: the defaults (`constraints.<joint>.trajectory`,
`constraints.goal_time` with the goal tolerances) or the last goal's tolerances; a
violation holds the measured position (one warning line) before the trajectory ends. On the
shipped lock-step loop (config/sim.yaml), through the nodes."""

import numpy as np
import pytest
from rcl_interfaces.msg import Log
from rclpy.node import Node
from rclpy.parameter import Parameter
from rclpy.qos import QoSProfile, ReliabilityPolicy
from trajectory_msgs.msg import JointTrajectory

from robot_dynamics.nodes.send_trajectory import trajectory_message
from robot_dynamics.trajectories.profiles import sample_profile
from ros_testing import lockstep_loop

JOINTS = [f'joint_{i}' for i in range(1, 7)]
CONTROLLER = '/computed_torque_controller'


class Sender(Node):
    def __init__(self, context):
        super().__init__('topic_sender', context=context)
        self.topic = self.create_publisher(JointTrajectory, f'{CONTROLLER}/joint_trajectory',
                                           10)
        self.log = []
        self.create_subscription(Log, '/rosout', lambda m: self.log.append(m.msg),
                                 QoSProfile(depth=1000, reliability=ReliabilityPolicy.RELIABLE))

    def lines(self, part):
        return [line for line in self.log if part in line]


@pytest.fixture(scope='module')
def loop():
    harness, plant, controller = lockstep_loop(integration_step=0.002)
    sender = harness.add(Sender(harness.context))
    harness.spin_until(lambda: controller._ready and sender.topic.get_subscription_count() > 0,
                       'the loop')
    harness.spin_until(lambda: plant.sim_time > 1.0, '1 s of simulated time')
    yield harness, plant, controller, sender
    harness.close()


def settle(harness, plant, seconds):
    end = plant.sim_time + seconds
    harness.spin_until(lambda: plant.sim_time >= end, f'{seconds} s of simulated time')


def send_move(harness, plant, controller, sender, offset, seconds):
    start = np.asarray(plant.q, dtype=float)
    goal = start + offset
    plan = controller.sampler.plan
    sender.topic.publish(trajectory_message(
        sample_profile('quintic', start, goal, seconds, 20, JOINTS)))
    harness.spin_until(lambda: controller.sampler.plan is not plan, 'the trajectory accepted')
    return goal, plant.sim_time


def set_parameters(controller, **values):
    result = controller.set_parameters_atomically(
        [Parameter(name.replace('__', '.'), value=v) for name, v in values.items()])
    assert result.successful, result.reason


def test_path_tolerance_of_the_defaults_holds_before_the_end(loop):
    harness, plant, controller, sender = loop
    set_parameters(controller, constraints__joint_2__trajectory=1e-7)
    try:
        goal, start = send_move(harness, plant, controller, sender,
                                np.array([0.0, 0.4, 0.0, 0.0, 0.0, 0.0]), 1.0)
        harness.spin_until(lambda: sender.lines('joint_trajectory: path_tolerance violated'),
                           'the violation line')
        line = sender.lines('joint_trajectory: path_tolerance violated')[-1]
        assert "joint 'joint_2'" in line and 'holding the position' in line
        assert plant.sim_time - start < 1.0          # stopped before the trajectory's end
        settle(harness, plant, 1.5)
        assert controller.sampler.status(plant.sim_time) == 'holding'
        assert abs(plant.q[1] - goal[1]) > 0.2       # it did not go on to the goal
    finally:
        set_parameters(controller, constraints__joint_2__trajectory=0.0)


def test_without_tolerances_the_topic_trajectory_runs_to_its_end(loop):
    harness, plant, controller, sender = loop
    before = len(sender.lines('violated'))
    goal, _ = send_move(harness, plant, controller, sender,
                        np.array([0.0, -0.3, 0.2, 0.0, 0.0, 0.0]), 0.5)
    settle(harness, plant, 1.0)
    np.testing.assert_allclose(plant.q, goal, atol=5e-3)
    assert len(sender.lines('violated')) == before


def test_goal_time_of_the_defaults_holds_after_the_end(loop):
    harness, plant, controller, sender = loop
    set_parameters(controller, constraints__goal_time=0.05, constraints__joint_3__goal=1e-9)
    try:
        send_move(harness, plant, controller, sender,
                  np.array([0.0, 0.0, 0.3, 0.0, 0.0, 0.0]), 0.5)
        harness.spin_until(lambda: sender.lines('joint_trajectory: goal_tolerance violated'),
                           'the goal-time line')
        line = sender.lines('joint_trajectory: goal_tolerance violated')[-1]
        assert "joint 'joint_3'" in line and 'goal_time_tolerance 0.05 s' in line
        assert controller.sampler.status(plant.sim_time) == 'holding'
    finally:
        set_parameters(controller, constraints__goal_time=0.0, constraints__joint_3__goal=0.0)


def test_after_a_goal_its_tolerances_apply_to_topic_trajectories(loop):
    """The defaults check nothing here (all 0); a goal's goal tolerance and
    goal_time_tolerance then hold a topic trajectory that misses them, as in JTC."""
    pytest.importorskip('control_msgs')
    from builtin_interfaces.msg import Duration
    from control_msgs.action import FollowJointTrajectory
    from control_msgs.msg import JointTolerance
    from rclpy.action import ActionClient
    harness, plant, controller, sender = loop
    client = ActionClient(sender, FollowJointTrajectory,
                          f'{CONTROLLER}/follow_joint_trajectory')
    harness.spin_until(client.server_is_ready, 'the action server')
    start = np.asarray(plant.q, dtype=float)
    command = sample_profile('quintic', start, start + [0.0, 0.0, 0.2, 0.0, 0.0, 0.0], 0.5,
                             20, JOINTS)
    goal = FollowJointTrajectory.Goal(
        trajectory=trajectory_message(command),
        goal_tolerance=[JointTolerance(name='joint_3', position=1e-9)],
        goal_time_tolerance=Duration(nanosec=50_000_000))
    future = client.send_goal_async(goal)
    harness.spin_until(future.done, 'the goal response')
    result = future.result().get_result_async()
    harness.spin_until(result.done, 'the goal result')
    code = result.result().result.error_code
    assert code == FollowJointTrajectory.Result.GOAL_TOLERANCE_VIOLATED
    settle(harness, plant, 0.5)
    before = len(sender.lines('joint_trajectory: goal_tolerance violated'))
    send_move(harness, plant, controller, sender,
              np.array([0.0, 0.0, -0.2, 0.0, 0.0, 0.0]), 0.5)
    harness.spin_until(lambda: len(sender.lines('joint_trajectory: goal_tolerance violated'))
                       > before, 'the goal-time line of the topic trajectory')
    line = sender.lines('joint_trajectory: goal_tolerance violated')[-1]
    assert "joint 'joint_3'" in line and 'goal_time_tolerance 0.05 s' in line
    client.destroy()
