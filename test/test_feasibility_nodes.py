"""Trajectory feasibility through the nodes (doc/trajectories.md, "Feasibility"): on the
shipped lock-step loop, an infeasible FollowJointTrajectory goal and topic trajectory are
refused with the joint, the time and the excess, the running motion untouched; with
feasibility.allow_time_scaling the goal runs slower and succeeds, its result naming the new
duration."""

import numpy as np
import pytest

from robot_dynamics.trajectories.profiles import sample_profile

JOINTS = [f'joint_{i}' for i in range(1, 7)]


control_msgs = pytest.importorskip('control_msgs', reason='control_msgs is not built')
from control_msgs.action import FollowJointTrajectory  # noqa: E402
from rclpy.action import ActionClient  # noqa: E402
from rclpy.node import Node  # noqa: E402
from rcl_interfaces.msg import Log  # noqa: E402
from rclpy.qos import QoSProfile, ReliabilityPolicy  # noqa: E402
from trajectory_msgs.msg import JointTrajectory  # noqa: E402

from robot_dynamics.nodes.send_trajectory import trajectory_message  # noqa: E402
from ros_testing import lockstep_loop  # noqa: E402

CONTROLLER = '/computed_torque_controller'


class Client(Node):
    def __init__(self, context):
        super().__init__('feasibility_client', context=context)
        self.client = ActionClient(self, FollowJointTrajectory,
                                   f'{CONTROLLER}/follow_joint_trajectory')
        self.topic = self.create_publisher(JointTrajectory, f'{CONTROLLER}/joint_trajectory',
                                           10)
        self.log = []
        self.create_subscription(Log, '/rosout', lambda m: self.log.append(m.msg),
                                 QoSProfile(depth=1000, reliability=ReliabilityPolicy.RELIABLE))


@pytest.fixture(scope='module')
def loop():
    harness, plant, controller = lockstep_loop(integration_step=0.002)
    client = harness.add(Client(harness.context))
    harness.spin_until(lambda: client.client.server_is_ready() and controller._ready
                       and client.topic.get_subscription_count() > 0, 'the loop')
    harness.spin_until(lambda: plant.sim_time > 1.0, '1 s of simulated time')
    yield harness, plant, controller, client
    harness.close()


def fast_move(plant, seconds):
    start = np.asarray(plant.q, dtype=float)
    goal = start + np.array([0.0, 1.0, 0.0, 0.0, 0.0, 0.0])
    return sample_profile('quintic', start, goal, seconds, 20, JOINTS)


def result_of(harness, client, command):
    future = client.client.send_goal_async(FollowJointTrajectory.Goal(
        trajectory=trajectory_message(command)))
    harness.spin_until(future.done, 'the goal response')
    result = future.result().get_result_async()
    harness.spin_until(result.done, 'the result')
    return result.result()


def test_an_infeasible_goal_and_topic_trajectory_are_refused(loop):
    harness, plant, controller, client = loop
    command = fast_move(plant, 0.2)
    held = controller.sampler.goal_positions.copy()
    response = result_of(harness, client, command)
    assert response.result.error_code == FollowJointTrajectory.Result.INVALID_GOAL
    text = response.result.error_string
    assert text.startswith('infeasible: ') and "'joint_2'" in text and 't = ' in text
    assert 'effort_limits[1]' in text and 'times slower would fit' in text
    np.testing.assert_array_equal(controller.sampler.goal_positions, held)   # untouched
    client.topic.publish(trajectory_message(fast_move(plant, 0.2)))
    harness.spin_until(lambda: any('joint_trajectory rejected: infeasible' in line
                                   for line in client.log), 'the refusal on the topic')
    np.testing.assert_array_equal(controller.sampler.goal_positions, held)


def test_with_time_scaling_the_goal_runs_slower_and_succeeds(loop):
    harness, plant, controller, client = loop
    setter = controller.set_parameters_atomically   # as `ros2 param set` would, in-process
    from rclpy.parameter import Parameter
    assert setter([Parameter('feasibility.allow_time_scaling', value=True)]).successful
    try:
        command = fast_move(plant, 0.2)
        start = plant.sim_time
        response = result_of(harness, client, command)
        assert response.status == 4, response.result.error_string    # SUCCEEDED
        text = response.result.error_string
        assert 'time-scaled x' in text and '0.2 s -> ' in text
        new = float(text.split('0.2 s -> ')[1].split(' s')[0])
        assert new > 0.2 and plant.sim_time - start >= new
    finally:
        setter([Parameter('feasibility.allow_time_scaling', value=False)])
