"""plant_simulator's mechanical stops, velocity limits and brakes, through the node: a
free-falling PUMA 560 stays within its stops and /diagnostics names the joint at a stop and
the stop's effort; joint_stops false lets it wind past them; brakes hold the arm before the
first command and after command_timeout (brakes false: it falls), also when a managed
controller is deactivated. Simulated time runs as fast as the CPU allows (publish_clock)."""

import os

import numpy as np
import pytest
from rclpy.parameter import Parameter
from std_msgs.msg import Float64MultiArray

from robot_dynamics import dynamics
from robot_dynamics.model import RobotModel
from robot_dynamics.nodes.managed_controller import ManagedComputedTorqueController
from robot_dynamics.nodes.plant import PlantSimulator
from robot_dynamics.nodes.common.ros_params import ConfigurationError
from ros_testing import PUMA, REPO, RosHarness, SIM

pytestmark = pytest.mark.filterwarnings('ignore::UserWarning')
Q_START = [0.0, 0.3, -0.5, 0.0, 0.0, 0.0]          # inside the preset's limits
QD_START = [0.5, -1.0, 2.0, 3.0, -4.0, 5.0]
PENETRATION = 0.05      # rad at the 1 ms step (doc/simulation.md, test_joint_stops.py)
FREE = ('publish_clock:=true', 'lockstep:=false', 'real_time_factor:=0.0')


def values(status):
    return {kv.key: kv.value for kv in status.values}


def plant_alone(*overrides):
    harness = RosHarness(PUMA, overrides=FREE + overrides)
    return harness, harness.add(PlantSimulator(context=harness.context))


def run_until(harness, plant, seconds, each_tick=None):
    """Spin until the plant's simulated time reaches `seconds`; `each_tick(plant)` after
    every spin."""
    def done():
        if each_tick is not None:
            each_tick(plant)
        return plant.sim_time >= seconds or plant.stopped
    harness.spin_until(done, f'{seconds} s simulated')


def beyond(model, q):
    q = np.asarray(q)
    return np.maximum(q - model.position_max, model.position_min - q).max()


def test_a_free_falling_arm_stays_within_its_stops_and_diagnostics_names_the_joints():
    harness, plant = plant_alone(f'initial_positions:={Q_START}',
                                 f'initial_velocities:={QD_START}', 'brakes:=false')
    try:
        worst, lines, touched = [], [], set()
        plant.get_logger().warning = lambda text, **kwargs: lines.append(text)

        def each_tick(p):
            worst.append(beyond(p.model, p.q))
            outside = p._stops.outside(p.q)
            touched.update((p.joints[i], 'max' if outside[i] > 0.0 else 'min')
                           for i in np.flatnonzero(outside))
        run_until(harness, plant, 3.0, each_tick)
        assert not plant.stopped
        assert max(worst) <= PENETRATION
        assert plant.stop_peak.any()                          # it did hit stops
        # one line at the first contact with each stop, naming the joint and the stop
        contacts = [line for line in lines if 'mechanical stop' in line]
        assert touched and len(contacts) >= len(touched), (touched, contacts)
        for joint, side in touched:
            said = [line for line in contacts if f'joint {joint} ' in line
                    and f'robot.position_{side}[' in line]
            assert len(said) == 1, (joint, side, contacts)
        assert len(contacts) == len(set(contacts)) and len(contacts) <= 2 * len(plant.joints)
        status = plant._diagnostics.status()
        report = values(status)
        at_stop = [j for j, off in zip(plant.joints, plant._stops.outside(plant.q)) if off]
        assert at_stop                  # after 3 s of falling, some joint rests on a stop
        for joint in at_stop:
            assert joint in report['at a stop'] and joint in status.message
        assert status.level == b'\x01' and 'mechanical stop' in status.message
        assert len(status.message) <= 128, status.message     # `ros2 topic echo` cuts at 128
        assert report['stop effort max'] != 'none'
        assert report['brakes'] == 'none (brakes false)'
    finally:
        harness.close()


def test_without_stops_the_arm_winds_past_its_limits():
    harness, plant = plant_alone(f'initial_positions:={Q_START}',
                                 f'initial_velocities:={QD_START}', 'brakes:=false',
                                 'joint_stops:=false')
    try:
        worst = []
        run_until(harness, plant, 3.0, lambda p: worst.append(beyond(p.model, p.q)))
        assert max(worst) > 0.5
        assert values(plant._diagnostics.status())['joint stops'] == 'off (joint_stops false)'
    finally:
        harness.close()


def test_a_start_beyond_a_stop_is_refused_naming_the_joint():
    harness = RosHarness(PUMA, overrides=FREE + ('initial_positions:=[0.0, 0.0, 1.2, 0.0, '
                                                 '0.0, 0.0]',))
    try:
        with pytest.raises(ConfigurationError, match=r'initial_positions\[2\] \(joint joint_3'
                                                     r'\).*position_max\[2\].*joint_stops'):
            PlantSimulator(context=harness.context)
    finally:
        harness.close()


def test_velocities_beyond_velocity_max_are_reported():
    harness, plant = plant_alone(f'initial_positions:={Q_START}',
                                 f'initial_velocities:={QD_START}', 'brakes:=false',
                                 f'robot.velocity_max:={[100.0] * 5 + [1.0]}')
    try:
        run_until(harness, plant, 0.05)
        status = plant._diagnostics.status()
        assert 'joint_6' in values(status)['beyond velocity_max']
        assert 'joint_1' not in values(status)['beyond velocity_max']
        assert 'velocity_max' in status.message and status.level >= b'\x01'
    finally:
        harness.close()


def holding(q):
    return dynamics.gravity_torques(RobotModel.from_yaml(PUMA), np.asarray(q))


@pytest.mark.parametrize('brakes', [True, False])
def test_brakes_hold_before_the_first_command_and_after_command_timeout(brakes):
    harness, plant = plant_alone(f'initial_positions:={Q_START}', f'brakes:={brakes}',
                                 'command_timeout:=0.1')
    publisher = plant.create_publisher(Float64MultiArray, plant.command_topic, 10)
    try:
        run_until(harness, plant, 0.5)       # simulated time passes, no command yet
        moved = np.abs(plant.q - Q_START).max()
        if brakes:
            assert moved == 0.0 and not plant.qd.any()
            assert values(plant._diagnostics.status())['brakes'] == \
                'engaged (until the first effort command)'
        else:
            assert moved > 0.05               # falling
            harness.close()
            return
        # a command releases them: the holding effort keeps the arm where it is
        publisher.publish(Float64MultiArray(data=holding(Q_START).tolist()))
        harness.spin_until(lambda: not plant.braked, 'the brakes released')
        assert values(plant._diagnostics.status())['brakes'] == 'released'
        # no command after it: command_timeout, then the brakes hold wherever the arm is
        harness.spin_until(lambda: plant.braked, 'the brakes engaged again')
        held, t = plant.q.copy(), plant.sim_time
        assert np.abs(held - Q_START).max() < 1e-3      # 0.1 s of the holding effort
        run_until(harness, plant, t + 1.0)
        np.testing.assert_array_equal(plant.q, held)
        assert not plant.qd.any() and not any(plant._tau_applied)
        status = plant._diagnostics.status()
        assert values(status)['brakes'] == \
            'engaged (no effort command within command_timeout)'
        assert 'brakes engaged' in status.message
    finally:
        harness.close()


def test_after_command_timeout_without_brakes_the_arm_falls():
    harness, plant = plant_alone(f'initial_positions:={Q_START}', 'brakes:=false',
                                 'command_timeout:=0.1')
    publisher = plant.create_publisher(Float64MultiArray, plant.command_topic, 10)
    try:
        publisher.publish(Float64MultiArray(data=holding(Q_START).tolist()))
        harness.spin_until(lambda: plant.sim_time > 0.0 and np.isfinite(plant._command_time),
                           'the command')
        t = plant.sim_time
        run_until(harness, plant, t + 1.0)
        assert np.abs(plant.q - Q_START).max() > 0.05
        assert not plant.braked
    finally:
        harness.close()


@pytest.mark.parametrize('brakes', [True, False])
def test_a_deactivated_managed_controller_leaves_the_arm_on_its_brakes(brakes):
    """The shipped lock-step loop with the managed controller: deactivated, it commands
    nothing; after command_timeout the plant's brakes hold the arm (brakes false: it
    falls). Lock-step advances after lockstep_timeout without a command."""
    harness = RosHarness(PUMA, SIM, overrides=('real_time_factor:=0.0',
                                               'lockstep_timeout:=0.02', f'brakes:={brakes}'))
    plant = harness.add(PlantSimulator(context=harness.context))
    controller = harness.add(ManagedComputedTorqueController(
        context=harness.context, parameter_overrides=[Parameter('use_sim_time', value=True)]))
    try:
        controller.trigger_configure()
        controller.trigger_activate()
        run_until(harness, plant, 0.3)               # the controller holds the start pose
        assert not plant.braked
        start = plant.q.copy()
        controller.trigger_deactivate()
        t = plant.sim_time
        run_until(harness, plant, t + 1.0)
        if brakes:
            assert plant.braked
            held = plant.q.copy()
            # what it sagged under zero effort within command_timeout (0.1 s): measured
            # 0.14 rad on joint 3 (doc/simulation.md)
            assert np.abs(held - start).max() < 0.2
            run_until(harness, plant, plant.sim_time + 0.5)
            np.testing.assert_array_equal(plant.q, held)
        else:
            assert not plant.braked
            assert np.abs(plant.q - start).max() > 0.2
    finally:
        harness.close()


def test_the_default_start_is_zero_or_the_nearest_limit():
    """config/stanford.yaml: the prismatic joint 3 has limits [0.3048, 1.27] m, so 0 would
    be beyond its stop; every other joint starts at 0."""
    harness = RosHarness(os.path.join(REPO, 'config', 'stanford.yaml'), overrides=FREE)
    try:
        plant = harness.add(PlantSimulator(context=harness.context))
        np.testing.assert_array_equal(plant.q, [0.0, 0.0, 0.3048, 0.0, 0.0, 0.0])
    finally:
        harness.close()


def test_a_urdf_limit_is_a_stop():
    """A UR5 from its URDF: the elbow's <limit upper="3.14159265359"> stops the joint thrown
    at it at 2 rad/s; the joints limited to +-2 pi stay free meanwhile."""
    ur5 = os.path.join(REPO, 'test', 'data', 'ur5.urdf')
    harness = RosHarness(overrides=FREE + (
        'robot.source:=urdf', f'robot.urdf_file:={ur5}', 'robot.base_link:=base_link',
        'robot.tip_link:=tool0', 'brakes:=false',
        'initial_positions:=[0.0, -1.57, 3.0, -1.57, 0.0, 0.0]',
        'initial_velocities:=[0.0, 0.0, 2.0, 0.0, 0.0, 0.0]'))
    try:
        plant = harness.add(PlantSimulator(context=harness.context))
        np.testing.assert_allclose(plant._stops.upper, [2 * np.pi, 2 * np.pi, np.pi,
                                                        2 * np.pi, 2 * np.pi, 2 * np.pi])
        elbow = []
        run_until(harness, plant, 0.5, lambda p: elbow.append(p.q[2]))
        assert plant.stop_peak[2] > 0.0                     # it hit the stop
        assert max(elbow) <= np.pi + PENETRATION
        assert 'elbow_joint' in values(plant._diagnostics.status())['stop effort max']
    finally:
        harness.close()
