"""The plant's measurement-noise option: Gaussian noise of the configured sigma on the
published position and velocity (not on the integrated state), reproducible with a seed,
off by default, bad values refused naming the parameter."""

import numpy as np
import pytest
from rclpy.node import Node
from sensor_msgs.msg import JointState

from robot_dynamics.nodes.common.measurement_noise import MeasurementNoise
from robot_dynamics.nodes.plant import PlantSimulator
from robot_dynamics.nodes.common.ros_params import ConfigurationError
from ros_testing import PUMA, RosHarness

pytestmark = pytest.mark.filterwarnings('ignore::UserWarning')
Q0 = [0.3, -0.2, 0.5, 0.1, -0.4, 0.2]


def test_noise_statistics_and_inputs_untouched():
    noise = MeasurementNoise(1e-3, 2e-2, seed=7)
    q, qd = np.array(Q0), np.zeros(6)
    samples = [noise.measure(q, qd) for _ in range(2000)]
    dq = np.array([s[0] for s in samples]) - q
    dqd = np.array([s[1] for s in samples]) - qd
    assert np.array_equal(q, Q0) and not qd.any()          # the true state is not changed
    # 12000 samples each: the sample sigma is within a few % of the configured one
    assert abs(dq.std() / 1e-3 - 1.0) < 0.05 and abs(dq.mean()) < 1e-4
    assert abs(dqd.std() / 2e-2 - 1.0) < 0.05 and abs(dqd.mean()) < 2e-3
    # independent per joint and per sample
    assert abs(np.corrcoef(dq[:, 0], dq[:, 1])[0, 1]) < 0.1
    assert abs(np.corrcoef(dq[:-1, 0], dq[1:, 0])[0, 1]) < 0.1


def test_seed_reproduces_the_noise_and_minus_one_does_not():
    q, qd = np.array(Q0), np.zeros(6)
    a, b = MeasurementNoise(1e-3, 1e-3, seed=3), MeasurementNoise(1e-3, 1e-3, seed=3)
    for _ in range(5):
        (qa, qda), (qb, qdb) = a.measure(q, qd), b.measure(q, qd)
        assert np.array_equal(qa, qb) and np.array_equal(qda, qdb)
    c = MeasurementNoise(1e-3, 1e-3, seed=4)
    assert not np.array_equal(c.measure(q, qd)[0], MeasurementNoise(
        1e-3, 1e-3, seed=3).measure(q, qd)[0])


def test_off_returns_the_true_state_and_only_the_noisy_channel_changes():
    q, qd = np.array(Q0), np.ones(6)
    off = MeasurementNoise()
    assert not off.enabled
    assert off.measure(q, qd)[0] is q
    position_only = MeasurementNoise(position_stddev=1e-3, seed=1)
    noisy_q, same_qd = position_only.measure(q, qd)
    assert np.all(noisy_q != q) and np.array_equal(same_qd, qd)


@pytest.mark.parametrize('value', [-1e-3, float('nan'), float('inf')])
def test_bad_sigma_is_refused_naming_the_field(value):
    with pytest.raises(ConfigurationError, match='measurement_noise.velocity_stddev'):
        MeasurementNoise(0.0, value)


class StateListener(Node):
    def __init__(self, context):
        super().__init__('noise_listener', context=context)
        self.states = []
        self.create_subscription(JointState, 'joint_states', self.states.append, 100)


def start_plant(*overrides):
    harness = RosHarness(PUMA, overrides=(f'initial_positions:={Q0}',) + overrides)
    plant = harness.add(PlantSimulator(context=harness.context))
    listener = harness.add(StateListener(harness.context))
    return harness, plant, listener


def test_plant_publishes_noisy_states_of_the_configured_sigma():
    """Free-running without a command the plant publishes its (exact) initial state every
    tick: the published values scatter around it with the configured sigma."""
    harness, plant, listener = start_plant('measurement_noise.position_stddev:=0.002',
                                           'measurement_noise.velocity_stddev:=0.05',
                                           'measurement_noise.seed:=11')
    try:
        harness.spin_until(lambda: len(listener.states) >= 60, '60 states')
        positions = np.array([s.position for s in listener.states]) - Q0
        velocities = np.array([s.velocity for s in listener.states])
        np.testing.assert_array_equal(plant.q, Q0)      # the plant's own state is exact
        assert np.all(positions != 0.0)
        # >= 360 samples: the sample sigma is within 20 % of the configured one
        assert abs(positions.std() / 0.002 - 1.0) < 0.2
        assert abs(velocities.std() / 0.05 - 1.0) < 0.2
    finally:
        harness.close()


def test_plant_without_noise_publishes_the_exact_state():
    harness, plant, listener = start_plant()
    try:
        harness.spin_until(lambda: len(listener.states) >= 3, '3 states')
        assert not plant.measurement_noise.enabled
        for state in listener.states:
            assert list(state.position) == Q0 and not any(state.velocity)
    finally:
        harness.close()


def test_plant_refuses_a_negative_sigma_naming_the_parameter():
    harness = RosHarness(PUMA, ros_args=['-p', 'measurement_noise.position_stddev:=-0.1'])
    try:
        with pytest.raises(ConfigurationError, match='measurement_noise.position_stddev'):
            PlantSimulator(context=harness.context)
    finally:
        harness.close()
