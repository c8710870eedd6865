"""plant_simulator over real DDS: lock-step simulated time (one period per command),
/clock equal to the state stamps, effort saturation reported as applied, malformed commands
ignored, command timeout to zero effort, and a diverging state stopping integration. The
test plays the controller."""

import math

import numpy as np
import pytest
from rclpy.node import Node
from rosgraph_msgs.msg import Clock
from sensor_msgs.msg import JointState
from std_msgs.msg import Float64MultiArray

from robot_dynamics import dynamics
from robot_dynamics.model import RobotModel
from robot_dynamics.nodes.plant import PlantSimulator
from ros_testing import PUMA, RosHarness, WIDE_LIMITS

pytestmark = pytest.mark.filterwarnings('ignore::UserWarning')
Q0 = [1.5707963267948966, 0.0, 1.5707963267948966, 0.0, 0.0, 0.0]
PERIOD_NS = 10_000_000


class FakeController(Node):
    def __init__(self, context):
        super().__init__('fake_controller', context=context)
        self.states = []
        self.clocks = []
        self.create_subscription(JointState, 'joint_states', self.states.append, 100)
        self.create_subscription(Clock, '/clock', self.clocks.append, 100)
        self.publisher = self.create_publisher(Float64MultiArray,
                                               '/effort_controller/commands', 10)

    def command(self, tau):
        self.publisher.publish(Float64MultiArray(data=[float(v) for v in tau]))

    def stamps(self):
        return [s.header.stamp.sec * 1_000_000_000 + s.header.stamp.nanosec
                for s in self.states]


def start(*overrides):
    harness = RosHarness(PUMA, overrides=(f'initial_positions:={Q0}', 'publish_clock:=true',
                                          'real_time_factor:=0.0', 'lockstep_timeout:=60.0')
                         + WIDE_LIMITS + overrides)
    plant = harness.add(PlantSimulator(context=harness.context))
    fake = harness.add(FakeController(harness.context))
    harness.spin_until(lambda: fake.states and fake.publisher.get_subscription_count() > 0,
                       'the first state')
    return harness, plant, fake


@pytest.fixture
def lockstep():
    harness, plant, fake = start()
    yield harness, plant, fake
    harness.close()


def holding_torques():
    return dynamics.gravity_torques(RobotModel.from_yaml(PUMA), np.array(Q0))


def test_lockstep_advances_exactly_one_period_per_command(lockstep):
    harness, plant, fake = lockstep
    harness.spin_for(20)
    assert set(fake.stamps()) == {0}            # simulated time waits for the first command
    for k in (1, 2, 3):
        fake.command(holding_torques())
        harness.spin_until(lambda: max(fake.stamps()) == k * PERIOD_NS, f'state {k}')
        harness.spin_for(20)
        assert max(fake.stamps()) == k * PERIOD_NS   # and then waits for the next one
    clock_ns = [c.clock.sec * 1_000_000_000 + c.clock.nanosec for c in fake.clocks]
    assert sorted(set(clock_ns)) == sorted(set(fake.stamps()))
    np.testing.assert_allclose(fake.states[-1].position, Q0, atol=1e-9)   # held by g(q)


def test_efforts_beyond_effort_max_are_clipped_and_reported_as_applied(lockstep):
    harness, plant, fake = lockstep
    limits = RobotModel.from_yaml(PUMA).effort_max
    command = [2.0 * limits[0], -2.0 * limits[1], 1.5 * limits[2], 0.5, -0.5, 0.0]
    fake.command(command)
    harness.spin_until(lambda: max(fake.stamps()) == PERIOD_NS, 'one step')
    np.testing.assert_array_equal(fake.states[-1].effort,
                                  [limits[0], -limits[1], limits[2], 0.5, -0.5, 0.0])


def test_malformed_commands_are_ignored(lockstep):
    harness, plant, fake = lockstep
    fake.command([1.0] * 5)                                     # wrong length
    fake.command([1.0, 1.0, math.nan, 1.0, 1.0, 1.0])          # non-finite
    harness.spin_for(40)
    assert set(fake.stamps()) == {0}                           # neither answered the state
    fake.command(holding_torques())
    harness.spin_until(lambda: max(fake.stamps()) == PERIOD_NS, 'one step')
    np.testing.assert_allclose(fake.states[-1].effort, holding_torques(), rtol=1e-12)


def test_stale_command_times_out_to_zero_effort():
    harness, plant, fake = start('lockstep:=false', 'command_timeout:=0.05')
    try:
        fake.command(holding_torques())
        harness.spin_until(lambda: len(fake.states) > 30 and not any(fake.states[-1].effort),
                           'zero effort after the timeout')
        applied = [s for s in fake.states if any(s.effort)]
        assert 1 <= len(applied) <= 6        # 0.05 s / 0.01 s after receipt, then zero
        np.testing.assert_allclose(applied[0].effort, holding_torques(), rtol=1e-12)
    finally:
        harness.close()


def test_diverging_state_stops_integration_instead_of_publishing_it():
    # no brakes: with none commanded, the arm falls from the start
    harness, plant, fake = start('lockstep:=false', 'divergence_velocity:=0.5', 'brakes:=false')
    try:
        harness.spin_until(lambda: plant.stopped, 'the plant to stop')
        last_ns = round(plant.sim_time * 1e9)      # the last state it published
        harness.spin_until(lambda: max(fake.stamps()) == last_ns, 'the last good state')
        harness.spin_for(30)
        assert max(fake.stamps()) == last_ns        # nothing after it
        for state in fake.states:
            assert np.all(np.isfinite(state.position)) and np.all(np.isfinite(state.velocity))
            assert np.max(np.abs(state.velocity)) <= 0.5
    finally:
        harness.close()
