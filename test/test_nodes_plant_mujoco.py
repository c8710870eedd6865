"""plant_simulator with engine mujoco over real DDS: /joint_states move under a constant
effort as the own engine moves the same model (the plant in lock-step, the test plays the
controller); ~/external_wrench taken on a link and a bad frame refused; without mujoco
installed the plant exits non-zero with one line naming the install command."""

import os
import subprocess
import sys

from geometry_msgs.msg import WrenchStamped
import numpy as np
import pytest
from rclpy.node import Node
from sensor_msgs.msg import JointState
from std_msgs.msg import Float64MultiArray

from robot_dynamics import dynamics
from robot_dynamics.simulation import engines
from robot_dynamics.model import RobotModel
from robot_dynamics.nodes.plant import PlantSimulator
from ros_testing import PUMA, REPO, RosHarness, WALL_LIMIT, WIDE_LIMITS

pytest.importorskip('mujoco')
pytestmark = pytest.mark.filterwarnings('ignore::UserWarning')
Q0 = [1.5707963267948966, 0.0, 1.5707963267948966, 0.0, 0.0, 0.0]
PUSH = np.array([0.0, 8.0, -4.0, 0.0, 0.0, 0.0])     # N m on top of g(q0)


class FakeController(Node):
    def __init__(self, context):
        super().__init__('fake_controller', context=context)
        self.states = []
        self.create_subscription(JointState, 'joint_states', self.states.append, 100)
        self.publisher = self.create_publisher(Float64MultiArray,
                                               '/effort_controller/commands', 10)
        self.wrench = self.create_publisher(WrenchStamped, '/plant_simulator/external_wrench',
                                            10)

    def command(self, tau):
        self.publisher.publish(Float64MultiArray(data=[float(v) for v in tau]))


def _model():
    return RobotModel.from_params(dict(
        RobotModel.from_yaml(PUMA).to_params(), position_min=[-2 * np.pi] * 6,
        position_max=[2 * np.pi] * 6))


def test_mujoco_plant_moves_under_a_constant_effort_as_the_own_engine():
    harness = RosHarness(PUMA, overrides=(f'initial_positions:={Q0}', 'publish_clock:=true',
                                          'real_time_factor:=0.0', 'lockstep_timeout:=60.0',
                                          'engine:=mujoco') + WIDE_LIMITS)
    try:
        plant = harness.add(PlantSimulator(context=harness.context))
        fake = harness.add(FakeController(harness.context))
        harness.spin_until(lambda: fake.states and fake.publisher.get_subscription_count() > 0,
                           'the first state')
        assert plant.engine.name == 'mujoco'
        model = _model()
        tau = dynamics.gravity_torques(model, np.array(Q0)) + PUSH
        for k in range(1, 21):
            fake.command(tau)
            harness.spin_until(lambda: len({s.header.stamp.nanosec + s.header.stamp.sec * 10 ** 9
                                            for s in fake.states}) > k, f'state {k}')
        last = fake.states[-1]
        assert last.header.stamp.nanosec == 200_000_000
        # the own engine on the same model, same efforts, 20 ticks of 10 steps
        q, qd = np.array(Q0), np.zeros(6)
        q, qd, _, _ = engines.OwnEngine(model, 1e-3).advance(model, q, qd, tau, 200)
        assert np.max(np.abs(np.array(last.position) - Q0)) > 0.01      # it moved
        np.testing.assert_allclose(last.position, q, atol=1e-6)
        np.testing.assert_allclose(last.velocity, qd, atol=1e-5)
        np.testing.assert_allclose(last.effort, tau, rtol=1e-12)

        # the wrench: taken on a link; a frame the arm lacks refused (the last one stays)
        harness.spin_until(lambda: fake.wrench.get_subscription_count() > 0, 'the wrench')
        msg = WrenchStamped()
        msg.header.frame_id = 'link_3'
        msg.wrench.force.z = -30.0
        fake.wrench.publish(msg)
        harness.spin_until(lambda: plant.engine.wrench is not None, 'the wrench taken')
        np.testing.assert_array_equal(plant.engine.wrench, [0.0, 0.0, -30.0, 0.0, 0.0, 0.0])
        msg.header.frame_id = 'gripper'
        msg.wrench.force.z = 5.0
        fake.wrench.publish(msg)
        msg.header.frame_id = ''
        msg.wrench.force.z = 0.0
        msg.wrench.torque.x = float('nan')
        fake.wrench.publish(msg)
        msg.wrench.torque.x = 0.0
        fake.wrench.publish(msg)                       # all zero: clears it
        harness.spin_until(lambda: plant.engine.wrench is None, 'the wrench cleared')
    finally:
        harness.close()


def test_mujoco_missing_exits_non_zero_naming_the_install_command():
    code = ('import sys; sys.modules["mujoco"] = None\n'
            'from robot_dynamics.nodes.plant import main\n'
            'sys.exit(main(["plant", "--ros-args", "--params-file", sys.argv[1], '
            '"-p", "engine:=mujoco"]))')
    env = dict(os.environ, PYTHONPATH=REPO + os.pathsep + os.environ.get('PYTHONPATH', ''))
    done = subprocess.run([sys.executable, '-c', code, PUMA], env=env, capture_output=True,
                          text=True, timeout=WALL_LIMIT)
    output = done.stdout + done.stderr
    assert done.returncode != 0, output
    lines = [line for line in output.splitlines() if 'pip install mujoco' in line]
    assert len(lines) == 1, output
    assert 'Traceback' not in output
