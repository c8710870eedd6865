"""Payload identification through the nodes, over DDS, in simulated time (lock-step).

The plant carries 2.5 kg with its centre of mass 5 cm off the flange axis; the controller
is not told. As a user would (doc/payload-identification.md), the test switches
identification on with a parameter, runs the `excite` node's trajectory from the current
/joint_states position (20 s simulated), reads the estimate on ~/payload_estimate and its
quality, applies it with ~/apply_payload_estimate, and tracks a [LEE]-style move before and
after. Holding still, apply is refused with its reason; with measurement noise on the plant
the estimate stays within the bounds (the figures are in the doc page).
"""

import math

from diagnostic_msgs.msg import DiagnosticStatus
from geometry_msgs.msg import Inertia
import numpy as np
import pytest
from rcl_interfaces.msg import Parameter as ParameterMsg, ParameterType, ParameterValue
from rcl_interfaces.srv import SetParameters
from rclpy.node import Node
from rclpy.parameter import Parameter
from sensor_msgs.msg import JointState
from std_srvs.srv import Trigger
from trajectory_msgs.msg import JointTrajectory

from robot_dynamics.nodes.controller import ComputedTorqueController
from robot_dynamics.nodes.excite import ExcitationSender, parse_arguments
from robot_dynamics.nodes.plant import PlantSimulator
from robot_dynamics.nodes.send_trajectory import trajectory_message
from robot_dynamics.trajectories.profiles import sample_profile
from ros_testing import call_service, PUMA, REPO, RESEND, RosHarness
from test_examples import load_example

pytestmark = pytest.mark.filterwarnings('ignore::UserWarning')

PANDA = f'{REPO}/config/panda.yaml'
CONTROLLER = 'computed_torque_controller'
EXCITATION = 10.0         # s of simulated time (the requirement: at most 20 s)
MOVE = 2.0                # s, quintic, as [LEE] §5
SETTLE = 0.8              # s after a move before the next step
WIDE = 2.0 * math.pi      # PUMA: [LEE]'s start pose (q3 = 90 deg) is outside the preset's
#                           joint-3 range; as config/sim.yaml, the limits are widened
# the payloads (2.5 kg, centre of mass 5 cm off the flange axis: the last link frame's z
# axis) and the [LEE]-style moves of examples/payload_identification.py, whose figures the
# doc page shows; the PUMA's position limits widened for the controller and the plant (its
# mechanical stops)
scenario = load_example('payload_identification')
ROBOTS = {
    # preset, move (start, goal), robot overrides of the controller and the plant
    'puma560': (PUMA, scenario.MOVES['puma560'],
                [Parameter('robot.position_min', value=[-WIDE] * 6),
                 Parameter('robot.position_max', value=[WIDE] * 6)]),
    'panda': (PANDA, scenario.MOVES['panda'], []),
}


class Operator(Node):
    """What a user does from the command line: parameters, services, trajectories, and
    reading the topics (each message with the plant's simulated time it arrived at)."""

    def __init__(self, context, plant, joints):
        super().__init__('operator', context=context)
        self.plant, self.joints = plant, joints
        self.errors = []          # (stamp [s], |error| per joint)
        self.estimates = []       # (sim time, Inertia)
        self.qualities = []       # (sim time, {key: value}, DiagnosticStatus)
        self.states = []          # /joint_states positions, as published
        latched = rclpy_latched()
        self.create_subscription(JointState, f'{CONTROLLER}/error', self._on_error, 100)
        self.create_subscription(JointState, 'joint_states',
                                 lambda msg: self.states.append(np.array(msg.position)), 100)
        self.create_subscription(Inertia, f'{CONTROLLER}/payload_estimate',
                                 self._on_estimate, latched)
        self.create_subscription(DiagnosticStatus, f'{CONTROLLER}/payload_estimate/quality',
                                 self._on_quality, latched)
        self.trajectory = self.create_publisher(JointTrajectory,
                                                f'{CONTROLLER}/joint_trajectory', 10)
        self.parameters = self.create_client(SetParameters, f'{CONTROLLER}/set_parameters')
        self.apply = self.create_client(Trigger, f'{CONTROLLER}/apply_payload_estimate')
        self.reset = self.create_client(Trigger, f'{CONTROLLER}/reset_payload_estimate')

    def _on_error(self, msg):
        stamp = msg.header.stamp.sec + msg.header.stamp.nanosec * 1e-9
        self.errors.append((stamp, np.abs(np.array(msg.position))))

    def _on_estimate(self, msg):
        self.estimates.append((self.plant.sim_time, msg))

    def _on_quality(self, msg):
        values = {kv.key: kv.value for kv in msg.values}
        self.qualities.append((self.plant.sim_time, values, msg))

    def ready(self):
        return (self.trajectory.get_subscription_count() > 0
                and self.parameters.service_is_ready() and self.apply.service_is_ready()
                and self.reset.service_is_ready())

    def max_error_since(self, t0):
        return max(float(e.max()) for stamp, e in self.errors if stamp >= t0)


def rclpy_latched():
    from rclpy.qos import DurabilityPolicy, QoSProfile
    return QoSProfile(depth=1, durability=DurabilityPolicy.TRANSIENT_LOCAL)


class Loop:
    """Plant + controller + operator in one executor, simulated time in lock-step."""

    def __init__(self, robot, noise=(), controller_parameters=()):
        preset, (self.start, self.goal), limits = ROBOTS[robot]
        self.payload = payload = scenario.PAYLOADS[robot]
        self.limits = limits
        self.harness = RosHarness(preset)
        context = self.harness.context
        self.plant = self.harness.add(PlantSimulator(context=context, parameter_overrides=[
            Parameter('initial_positions', value=self.start.tolist()),
            Parameter('integration_step', value=0.002),
            Parameter('publish_clock', value=True),
            Parameter('real_time_factor', value=0.0),
            Parameter('lockstep_timeout', value=60.0),
            Parameter('robot.payload.mass', value=payload['mass']),
            Parameter('robot.payload.com', value=list(payload['com'])),
            Parameter('robot.payload.inertia', value=list(payload['inertia'])),
            *limits, *noise]))
        self.controller = self.harness.add(ComputedTorqueController(
            context=context, parameter_overrides=[
                Parameter('use_sim_time', value=True),
                Parameter('control_mode', value='on_state'),
                Parameter('state_timeout', value=0.5),
                Parameter('publish_state', value=True), *limits, *controller_parameters]))
        self.operator = self.harness.add(Operator(context, self.plant, self.controller.joints))
        self.harness.spin_until(lambda: self.operator.ready()
                                and self.controller._status == 'holding', 'the loop closed')

    def run_for(self, seconds):
        end = self.plant.sim_time + seconds
        self.harness.spin_until(lambda: self.plant.sim_time >= end or self.plant.stopped,
                                f'{seconds} s simulated', wall_limit=600.0)
        assert not self.plant.stopped

    def call(self, client, request):
        return call_service(self.harness, client, request, f'the {client.srv_name} response',
                            resend_after=RESEND)

    def set_enabled(self, enabled):
        value = ParameterValue(type=ParameterType.PARAMETER_BOOL, bool_value=enabled)
        response = self.call(self.operator.parameters, SetParameters.Request(
            parameters=[ParameterMsg(name='identification.enabled', value=value)]))
        assert response.results[0].successful, response.results[0].reason

    def set_payload(self, **payload):
        response = self.call(self.operator.parameters, SetParameters.Request(parameters=[
            ParameterMsg(name=f'robot.payload.{key}', value=ParameterValue(
                type=(ParameterType.PARAMETER_DOUBLE_ARRAY if isinstance(value, list)
                      else ParameterType.PARAMETER_DOUBLE),
                **({'double_array_value': value} if isinstance(value, list)
                   else {'double_value': value})))
            for key, value in payload.items()]))
        assert all(result.successful for result in response.results)

    def move(self, start, goal):
        """A quintic move (the [LEE] profile); its max |error| (rad)."""
        t0 = self.plant.sim_time
        command = sample_profile('quintic', start, goal, MOVE, 50, self.controller.joints)
        self.operator.trajectory.publish(trajectory_message(command))
        self.run_for(MOVE + SETTLE)
        return self.operator.max_error_since(t0)

    def excite(self, duration=EXCITATION):
        """The `excite` node, as `ros2 run robot_dynamics excite --duration ...` runs it."""
        options = parse_arguments(['--duration', str(duration)])
        sender = self.harness.add(ExcitationSender(options, context=self.harness.context))
        self.harness.spin_until(lambda: sender.sent or sender.error, 'the excitation sent')
        assert sender.sent, sender.error
        self.run_for(duration + 0.3)
        return sender

    def final_estimate(self):
        """Switch identification off; the estimate then published once more, final."""
        self.set_enabled(False)
        self.harness.spin_until(lambda: self.operator.qualities
                                and self.operator.qualities[-1][1]['enabled'] == 'false',
                                'the final estimate')
        self.run_for(0.6)          # > one publish period: nothing newer is on its way
        return self.operator.estimates[-1][1], self.operator.qualities[-1][1]

    def close(self):
        self.harness.close()


@pytest.fixture(scope='module', params=sorted(ROBOTS))
def session(request):
    """The user procedure on one robot; what each step gave."""
    loop = Loop(request.param)
    found = {'robot': request.param, 'payload': loop.payload}
    try:
        # 1. identification on while the arm holds still: apply is refused, with the reason
        loop.set_enabled(True)
        loop.run_for(1.0)
        found['refused'] = loop.call(loop.operator.apply, Trigger.Request())
        found['holding_quality'] = loop.operator.qualities[-1][1]
        found['reset'] = loop.call(loop.operator.reset, Trigger.Request())
        found['refused_after_reset'] = loop.call(loop.operator.apply, Trigger.Request())
        loop.set_enabled(False)
        # 2. identification on, excitation from where the arm is, estimate
        loop.set_enabled(True)
        sender = loop.excite()
        found['excitation_start'] = sender.start, loop.operator.states
        found['estimate'], found['quality'] = loop.final_estimate()
        found['published'] = len(loop.operator.estimates)
        # 3. apply; the move, and back
        found['applied'] = loop.call(loop.operator.apply, Trigger.Request())
        found['payload_parameters'] = [loop.controller.get_parameter(f'robot.payload.{key}')
                                       .value for key in ('mass', 'com', 'inertia')]
        loop.move(loop.plant.q.copy(), loop.start)      # to the move's start, tracked
        found['error_with'] = loop.move(loop.start, loop.goal)
        found['law_mass'] = loop.controller.law.model.payload.mass
        loop.move(loop.goal, loop.start)
        # 4. the same move with the payload unknown to the controller (last: on the PUMA
        # the wrist does not recover from it)
        loop.set_payload(mass=0.0, com=[0.0] * 3, inertia=[0.0] * 6)
        found['error_without'] = loop.move(loop.start, loop.goal)
        yield found
    finally:
        loop.close()


def test_holding_still_apply_is_refused_with_its_reason(session):
    refused = session['refused']
    assert not refused.success
    assert refused.message.startswith('refused: not excited'), refused.message
    quality = session['holding_quality']
    assert quality['excited'] == 'false'
    assert session['reset'].success
    assert not session['refused_after_reset'].success
    assert 'no samples' in session['refused_after_reset'].message


def test_excitation_starts_where_the_arm_is(session):
    """At a position published on /joint_states (on the PUMA the wrist sags under the
    unknown payload while holding: not the initial pose)."""
    start, states = session['excitation_start']
    assert min(np.max(np.abs(state - start)) for state in states) == 0.0


def test_estimate_within_2_percent_and_5_mm(session):
    estimate, quality, payload = session['estimate'], session['quality'], session['payload']
    assert quality['excited'] == 'true' and quality['consistent'] == 'true', quality
    assert session['published'] >= 1.5 * EXCITATION    # about 2 Hz over the excitation
    assert abs(estimate.m - payload['mass']) <= 0.02 * payload['mass'], estimate
    com = np.array([estimate.com.x, estimate.com.y, estimate.com.z])
    print(f"{session['robot']}: mass error {(estimate.m - payload['mass']) * 1e3:.2f} g, "
          f"com error {np.linalg.norm(com - payload['com']) * 1e3:.3f} mm, condition "
          f"number {quality['condition_number']}")
    assert np.linalg.norm(com - payload['com']) <= 5e-3, com
    # the published quality agrees with the published estimate
    assert float(quality['mass']) == pytest.approx(estimate.m, rel=1e-5)
    assert float(quality['condition_number']) <= 300.0
    assert 0.0 < float(quality['mass_std']) < 0.05


def test_apply_sets_the_payload_parameters_and_the_law(session):
    applied, estimate = session['applied'], session['estimate']
    assert applied.success, applied.message
    mass, com, inertia = session['payload_parameters']
    assert mass == pytest.approx(estimate.m, rel=1e-9)
    np.testing.assert_allclose(com, [estimate.com.x, estimate.com.y, estimate.com.z],
                               rtol=1e-9)
    np.testing.assert_allclose(inertia, [estimate.ixx, estimate.ixy, estimate.ixz,
                                         estimate.iyy, estimate.iyz, estimate.izz], rtol=1e-9)
    assert session['law_mass'] == pytest.approx(estimate.m, rel=1e-9)


def test_move_with_the_estimate_applied_tracks_10x_better(session):
    without, with_estimate = session['error_without'], session['error_with']
    print(f"{session['robot']}: max |e| {without:.3e} rad without, {with_estimate:.3e} rad "
          'with the estimate applied')
    assert with_estimate * 10.0 <= without, (with_estimate, without)
