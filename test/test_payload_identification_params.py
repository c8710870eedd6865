"""The controller's payload identification apart from the closed loop: its parameters,
what is recorded when, a clock going back, and the messages of an estimate."""

import math

from diagnostic_msgs.msg import DiagnosticStatus
import numpy as np
import pytest
from rclpy.parameter import Parameter

from robot_dynamics.identification import PayloadEstimate, PayloadEstimator
from robot_dynamics.nodes.controller import ComputedTorqueController
from robot_dynamics.nodes.identification.payload_identification import estimate_messages
from robot_dynamics.nodes.common.ros_params import ConfigurationError
from ros_testing import PUMA, RosHarness

pytestmark = pytest.mark.filterwarnings('ignore::UserWarning')


@pytest.fixture
def controller():
    harness = RosHarness(PUMA)
    try:
        yield harness.add(ComputedTorqueController(context=harness.context))
    finally:
        harness.close()


def test_defaults_off_and_the_estimator_options_reach_the_estimator():
    harness = RosHarness(PUMA, ros_args=['-p', 'identification.cutoff_frequency:=3.0',
                                         '-p', 'identification.max_condition:=100.0'])
    try:
        node = harness.add(ComputedTorqueController(context=harness.context))
        assert node.get_parameter('identification.enabled').value is False
        assert node.identification.estimator.cutoff_frequency == 3.0
        assert node.identification.estimator.max_condition == 100.0
    finally:
        harness.close()


@pytest.mark.parametrize('name, value', [('identification.cutoff_frequency', '-1.0'),
                                         ('identification.publish_rate', '0.0'),
                                         ('identification.enabled', 'maybe')])
def test_bad_parameter_at_start_names_it(name, value):
    harness = RosHarness(PUMA, ros_args=['-p', f'{name}:={value}'])
    try:
        with pytest.raises(ConfigurationError, match=name):
            ComputedTorqueController(context=harness.context)
    finally:
        harness.close()


def test_enabled_must_be_a_bool_live(controller):
    (result,) = controller.set_parameters([Parameter('identification.enabled', value=1.0)])
    assert not result.successful and 'identification.enabled' in result.reason
    assert controller.identification.enabled is False


def test_records_only_while_enabled_and_switching_on_starts_afresh(controller):
    identification = controller.identification
    q, tau = np.zeros(6), np.ones(6)
    identification.record(0.0, q, q, tau)
    assert not identification._samples
    controller.set_parameters([Parameter('identification.enabled', value=True)])
    for k in range(30):
        identification.record(0.01 * k, q, q, tau)
    assert identification.update().samples > 0
    controller.set_parameters([Parameter('identification.enabled', value=False)])
    identification.record(0.5, q, q, tau)
    assert not identification._samples                 # off: nothing recorded
    kept = identification.estimator.samples
    controller.set_parameters([Parameter('identification.enabled', value=True)])
    assert identification.estimator.samples == 0 < kept  # on again: from no samples


def test_a_clock_going_back_drops_the_samples_and_goes_on(controller):
    identification = controller.identification
    controller.set_parameters([Parameter('identification.enabled', value=True)])
    q, tau = np.zeros(6), np.ones(6)
    for k in range(60):
        identification.record(10.0 + 0.01 * k, q, q, tau)
    identification.update()
    before = identification.estimator.samples
    for k in range(60):                                   # a simulator restarted at 0
        identification.record(0.01 * k, q, q, tau)
    identification.update()                               # no exception
    assert 0 < identification.estimator.samples <= before


def test_a_state_published_twice_is_recorded_once(controller):
    """A lock-step plant re-publishes its state while it waits for the command: the
    controller answers it again, at the same t; that is one sample, not a time that does
    not increase."""
    identification = controller.identification
    controller.set_parameters([Parameter('identification.enabled', value=True)])
    q, tau = np.zeros(6), np.ones(6)
    for k in range(60):
        identification.record(0.01 * k, q, q, tau)
        if k % 7 == 0:
            identification.record(0.01 * k, q, q, tau)
    assert len(identification._samples) == 60
    identification.update()
    once = PayloadEstimator(controller.law.model)          # the same states, each once
    for k in range(60):
        once.add(0.01 * k, q, q, tau)
    once.update()
    assert identification.estimator.samples == once.samples > 0   # nothing dropped


def estimate(mass, excited=True, consistent=True, reason=''):
    com, inertia = np.array([0.01, 0.02, 0.03]), np.array([1e-3, 0, 0, 2e-3, 0, 3e-3])
    return PayloadEstimate(mass, com, inertia, np.zeros(10), np.full(10, 1e-3),
                           np.eye(10), 0.01, np.full(3, 1e-4), 12.5, 400, excited,
                           consistent, reason)


def test_messages_of_a_usable_estimate():
    inertia, status = estimate_messages(estimate(2.5), True)
    assert inertia.m == 2.5 and (inertia.com.x, inertia.com.y, inertia.com.z) == (
        0.01, 0.02, 0.03)
    assert (inertia.ixx, inertia.iyy, inertia.izz) == (1e-3, 2e-3, 3e-3)
    assert status.level == DiagnosticStatus.OK
    values = {kv.key: kv.value for kv in status.values}
    assert values['excited'] == values['consistent'] == values['enabled'] == 'true'
    assert float(values['condition_number']) == 12.5 and values['samples'] == '400'
    assert float(values['mass_std']) == 0.01


def test_messages_of_an_unusable_estimate_carry_the_reason_and_no_nan_inertia():
    inertia, status = estimate_messages(
        estimate(math.nan, False, False, 'not excited: 3 samples kept'), False)
    assert inertia is None
    assert status.level == DiagnosticStatus.WARN
    assert status.message == 'not excited: 3 samples kept'
    _, status = estimate_messages(estimate(-0.1, True, False, 'not physically consistent: '
                                           'mass -0.1 kg is negative'), True)
    assert status.level == DiagnosticStatus.WARN and 'negative' in status.message


def test_method_iv_reaches_the_estimator_and_a_bad_method_is_named():
    harness = RosHarness(PUMA, ros_args=['-p', 'identification.method:=iv'])
    try:
        node = harness.add(ComputedTorqueController(context=harness.context))
        assert node.identification.estimator.method == 'iv'
        node.set_parameters([Parameter('identification.enabled', value=True)])
        q, tau = np.zeros(6), np.ones(6)
        for k in range(60):
            node.identification.record(0.01 * k, q, q, tau, (q, q, q))
        node.identification.update()
        assert node.identification.estimator.samples > 0
    finally:
        harness.close()
    harness = RosHarness(PUMA, ros_args=['-p', 'identification.method:=tls'])
    try:
        with pytest.raises(ConfigurationError, match='identification.method'):
            ComputedTorqueController(context=harness.context)
    finally:
        harness.close()


def test_payload_parameters_read_back_zero_before_any_apply(controller):
    """No payload given: robot.payload.* are 0 (not unset), and the model has none."""
    assert controller.get_parameter('robot.payload.mass').value == 0.0
    assert list(controller.get_parameter('robot.payload.com').value) == [0.0] * 3
    assert list(controller.get_parameter('robot.payload.inertia').value) == [0.0] * 6
    assert controller.law.model.payload.mass == 0.0


def test_a_mass_within_three_standard_deviations_of_zero_is_no_payload():
    """The estimate of an arm carrying nothing (7e-7 kg, its centre of mass far out):
    reported as no payload; a mass 5 standard deviations above zero is a payload."""
    from robot_dynamics.nodes.identification.payload_identification import no_payload
    empty = estimate(7e-7)._replace(com=np.array([0.36, 0.0, 0.0]))
    assert no_payload(empty) and no_payload(estimate(0.03))
    assert not no_payload(estimate(0.05)) and not no_payload(estimate(2.5))
    assert not no_payload(estimate(7e-7, excited=False, reason='not excited: few samples'))
    _, status = estimate_messages(empty, True)
    assert status.level == DiagnosticStatus.OK
    assert 'no payload' in status.message and 'applying sets mass 0' in status.message
    assert {kv.key: kv.value for kv in status.values}['no_payload'] == 'true'


def test_applying_no_payload_sets_mass_com_and_inertia_to_zero(controller):
    from std_srvs.srv import Trigger
    controller.set_parameters([Parameter('robot.payload.mass', value=1.5),
                               Parameter('robot.payload.com', value=[0.0, 0.0, 0.1])])
    empty = estimate(7e-7)._replace(com=np.array([0.36, 0.0, 0.0]))
    controller.identification.update = lambda: empty
    response = controller.identification._on_apply(Trigger.Request(), Trigger.Response())
    assert response.success, response.message
    assert response.message.startswith('no payload: the estimated mass 7e-07 kg is within 3 '
                                       'standard deviations (0.01 kg) of zero: applied mass 0')
    assert controller.get_parameter('robot.payload.mass').value == 0.0
    assert list(controller.get_parameter('robot.payload.com').value) == [0.0] * 3
    assert list(controller.get_parameter('robot.payload.inertia').value) == [0.0] * 6
    controller.identification.update = lambda: estimate(2.5)     # a real payload: applied
    response = controller.identification._on_apply(Trigger.Request(), Trigger.Response())
    assert response.success and controller.get_parameter('robot.payload.mass').value == 2.5
