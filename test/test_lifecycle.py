"""The managed controller (`controller_managed`) over real DDS: transitions requested as
`ros2 lifecycle set` does (the node's change_state service), the effort topic observed.

configure with a bad parameter fails and names it (in the log, on /rosout), and succeeds
once the parameter is fixed; inactive commands nothing; activate starts from the measured
position (the first effort is the gravity torque there: no jump); deactivate leaves one
zero-effort command and then silence; cleanup removes the topics, configure again works,
shutdown finalizes."""

import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest
from rclpy.node import Node
from rclpy.parameter import Parameter
from rclpy.qos import DurabilityPolicy, QoSProfile
from sensor_msgs.msg import JointState
from std_msgs.msg import Float64MultiArray, String
from trajectory_msgs.msg import JointTrajectory

from robot_dynamics import dynamics
from robot_dynamics.model import RobotModel
from ros_testing import (call_service, doubles, move_to, ProcessOutput, PUMA, REPO,
                          resting_state, RosHarness)

lifecycle_msgs = pytest.importorskip('lifecycle_msgs')
from lifecycle_msgs.msg import State, Transition  # noqa: E402
from lifecycle_msgs.srv import ChangeState, GetState  # noqa: E402
from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus  # noqa: E402
from rcl_interfaces.msg import Log  # noqa: E402
from rcl_interfaces.srv import GetParameters, ListParameters, SetParameters  # noqa: E402

from rclpy.lifecycle import TransitionCallbackReturn  # noqa: E402

from robot_dynamics.nodes.managed_controller import ManagedComputedTorqueController  # noqa

pytestmark = pytest.mark.filterwarnings('ignore::UserWarning')
JOINTS = [f'joint_{i}' for i in range(1, 7)]
CONTROLLER = '/computed_torque_controller'
COMMANDS = '/effort_controller/commands'
Q = np.array([0.3, -0.4, 0.5, 0.2, -0.6, 0.7])
MOVED = Q + np.array([0.2, -0.1, 0.15, 0.0, 0.1, -0.2])
GOAL = Q - 0.2
ZERO = [0.0] * 6
UR5 = os.path.join(os.path.dirname(os.path.abspath(__file__)), 'data', 'ur5.urdf')


class Operator(Node):
    """The robot (publishes /joint_states), the operator (`ros2 lifecycle set`, `ros2 param
    set`) and the observer (efforts, ~/status, /rosout) in one node."""

    def __init__(self, context):
        super().__init__('operator', context=context)
        self.states = self.create_publisher(JointState, 'joint_states', 10)
        self.trajectory = self.create_publisher(JointTrajectory,
                                                f'{CONTROLLER}/joint_trajectory', 10)
        self.change_state = self.create_client(ChangeState, f'{CONTROLLER}/change_state')
        self.get_state = self.create_client(GetState, f'{CONTROLLER}/get_state')
        self.set_parameters = self.create_client(SetParameters,
                                                 f'{CONTROLLER}/set_parameters')
        self.efforts, self.references, self.logs = [], [], []
        self.status = None
        self.create_subscription(Float64MultiArray, COMMANDS,
                                 lambda m: self.efforts.append(list(m.data)), 1000)
        self.create_subscription(JointState, f'{CONTROLLER}/reference',
                                 lambda m: self.references.append(list(m.position)), 1000)
        latched = QoSProfile(depth=10, durability=DurabilityPolicy.TRANSIENT_LOCAL)
        self.create_subscription(String, f'{CONTROLLER}/status',
                                 lambda m: setattr(self, 'status', m.data), latched)
        self.create_subscription(Log, '/rosout', self.logs.append, 1000)
        self.diagnostics = []        # the controller's statuses
        self.create_subscription(
            DiagnosticArray, '/diagnostics', lambda m: self.diagnostics.extend(
                s for s in m.status if s.name.startswith('computed_torque_controller:')), 100)
        self.q = Q

    def send_state(self):
        self.states.publish(resting_state(JOINTS, self.q, self))

    def move_to(self, goal, duration):
        self.trajectory.publish(move_to(JOINTS, goal, duration))


def call(harness, operator, client, request, what, resend_after=None):
    """Send `request` while the robot keeps publishing states; the response."""
    return call_service(harness, client, request, what, resend_after, operator.send_state)


def transition(harness, operator, label):
    request = ChangeState.Request(transition=Transition(label=label))
    return call(harness, operator, operator.change_state, request, label).success


def state(harness, operator):
    return call(harness, operator, operator.get_state, GetState.Request(),
                'get_state', resend_after=1.0).current_state.id


def reachable(harness, operator):
    """Until each service has answered once, with requests that change nothing (an
    unknown transition label, no parameters): after that no response can be lost."""
    unknown = ChangeState.Request(transition=Transition(label='no_such_transition'))
    assert not call(harness, operator, operator.change_state, unknown, 'change_state',
                    resend_after=1.0).success
    call(harness, operator, operator.set_parameters, SetParameters.Request(),
         'set_parameters', resend_after=1.0)
    state(harness, operator)


def stream_for(harness, operator, seconds):
    """The robot publishes its state about every 10 ms for `seconds` of wall time."""
    end = time.monotonic() + seconds
    harness.spin_until(lambda: operator.send_state() or time.monotonic() > end, 'streaming')


def stream_until(harness, operator, predicate, what):
    harness.spin_until(lambda: operator.send_state() or predicate(), what)


def start(*overrides):
    harness = RosHarness(PUMA, overrides=overrides)
    controller = harness.add(ManagedComputedTorqueController(context=harness.context))
    operator = harness.add(Operator(harness.context))
    harness.spin_until(lambda: operator.change_state.service_is_ready()
                       and operator.get_state.service_is_ready()
                       and operator.set_parameters.service_is_ready(), 'lifecycle services')
    reachable(harness, operator)
    return harness, controller, operator


def configured(harness, operator):
    """configure, then wait until the controller's topics have matched ours."""
    assert transition(harness, operator, 'configure')
    stream_until(harness, operator,
                 lambda: operator.states.get_subscription_count() > 0
                 and operator.trajectory.get_subscription_count() > 0
                 and operator.count_publishers(COMMANDS) > 0
                 and operator.status == 'inactive', 'discovery')


def topics(node):
    """The topics `node` publishes or subscribes to (its own entities: another test
    process that happens to share the domain cannot interfere)."""
    return ({p.topic_name for p in node.publishers}
            | {s.topic_name for s in node.subscriptions})


def gravity(q):
    return dynamics.gravity_torques(RobotModel.from_yaml(PUMA), q)


def test_configure_with_a_bad_parameter_fails_naming_it_and_succeeds_once_fixed():
    kp = [100.0] * 5 + [-4.0]
    harness, controller, operator = start(f'gains.kp:={kp}')
    try:
        assert state(harness, operator) == State.PRIMARY_STATE_UNCONFIGURED
        assert not transition(harness, operator, 'configure')
        assert state(harness, operator) == State.PRIMARY_STATE_UNCONFIGURED
        stream_until(harness, operator, lambda: any(
            'configure failed' in log.msg for log in operator.logs), 'the reason on /rosout')
        reason = [log for log in operator.logs if 'configure failed' in log.msg]
        assert len(reason) == 1 and reason[0].name == CONTROLLER.lstrip('/')
        assert reason[0].level == Log.ERROR and '\n' not in reason[0].msg
        assert 'gains.kp[5]' in reason[0].msg and '> 0' in reason[0].msg
        assert COMMANDS not in topics(controller)      # nothing left behind
        assert '/joint_states' not in topics(controller)
        result = call(harness, operator, operator.set_parameters, SetParameters.Request(
            parameters=[doubles('gains.kp', [100.0] * 6)]), 'set gains.kp')
        assert result.results[0].successful
        configured(harness, operator)
        assert state(harness, operator) == State.PRIMARY_STATE_INACTIVE
        np.testing.assert_array_equal(controller.law.kp, [100.0] * 6)
    finally:
        harness.close()


def test_every_parameter_is_declared_unconfigured_readable_and_settable_checked_at_configure():
    """As ros2_control declares a controller's parameters on load: while unconfigured the
    parameter services (what `ros2 param list/get/set` call) see every parameter the
    configured node has, with its value, and a set is accepted; configure still checks it
    (a bad gain set while unconfigured fails configure, naming it)."""
    harness, controller, operator = start('gains.kd:=[21.0, 21.0, 21.0, 21.0, 21.0, 21.0]')
    try:
        getter = operator.create_client(GetParameters, f'{CONTROLLER}/get_parameters')
        lister = operator.create_client(ListParameters, f'{CONTROLLER}/list_parameters')
        harness.spin_until(lambda: getter.service_is_ready() and lister.service_is_ready(),
                           'parameter services')

        def names():
            return set(call(harness, operator, lister, ListParameters.Request(), 'list',
                            resend_after=1.0).result.names)

        def get(*wanted):
            values = call(harness, operator, getter, GetParameters.Request(
                names=list(wanted)), 'get', resend_after=1.0).values
            return [Parameter.from_parameter_msg(msg_for(name, value)).value
                    for name, value in zip(wanted, values)]

        def set_kp(kp):
            return call(harness, operator, operator.set_parameters, SetParameters.Request(
                parameters=[doubles('gains.kp', kp)]), 'set gains.kp').results[0]

        unconfigured = names()
        assert state(harness, operator) == State.PRIMARY_STATE_UNCONFIGURED
        assert COMMANDS not in topics(controller) and '/joint_states' not in topics(controller)
        # from every part of the start-up: the law, the joints' constraints, the action,
        # speed scaling, diagnostics, payload identification, the real-time options
        for name in ('gains.kp', 'constraints.joint_3.goal', 'constraints.goal_time',
                     'speed_scaling.rate_limit', 'diagnostics.period',
                     'identification.enabled', 'realtime.priority', 'control_mode'):
            assert name in unconfigured, name
        kp, kd, mode = get('gains.kp', 'gains.kd', 'control_mode')
        assert list(kp) == [100.0] * 6 and list(kd) == [21.0] * 6 and mode == 'timer'
        assert set_kp([100.0] * 5 + [-4.0]).successful      # checked at configure
        assert list(get('gains.kp')[0]) == [100.0] * 5 + [-4.0]
        assert not transition(harness, operator, 'configure')
        stream_until(harness, operator, lambda: any(
            'gains.kp[5]' in log.msg for log in operator.logs), 'the reason on /rosout')
        assert set_kp([150.0] * 6).successful
        configured(harness, operator)
        assert names() == unconfigured          # configure declared nothing new
        np.testing.assert_array_equal(controller.law.kp, [150.0] * 6)
        np.testing.assert_array_equal(controller.law.kd, [21.0] * 6)
    finally:
        harness.close()


def msg_for(name, value):
    from rcl_interfaces.msg import Parameter as ParameterMsg
    return ParameterMsg(name=name, value=value)


def lifecycle_state(status):
    return {kv.key: kv.value for kv in status.values}.get('lifecycle state')


@pytest.mark.parametrize('mode', ['timer', 'on_state'])
def test_inactive_commands_nothing_and_activate_starts_from_the_measured_position(mode):
    harness, controller, operator = start('diagnostics.period:=0.2', f'control_mode:={mode}')
    try:
        configured(harness, operator)
        stream_until(harness, operator, lambda: operator.diagnostics, 'diagnostics')
        assert operator.efforts == [] and operator.references == []
        inactive = operator.diagnostics[-1]
        assert lifecycle_state(inactive) == 'inactive' and inactive.level == DiagnosticStatus.OK
        assert 'not commanding' in inactive.message
        operator.move_to(GOAL, 5)                      # rejected: not active
        assert transition(harness, operator, 'activate')
        stream_until(harness, operator, lambda: len(operator.efforts) >= 3
                     and len(operator.references) >= 3, 'efforts after activate')
        # the reference is the measured position: the effort holds it against gravity
        np.testing.assert_allclose(operator.references[0], Q, atol=1e-12)
        np.testing.assert_allclose(operator.efforts[0], gravity(Q), rtol=1e-9, atol=1e-9)
        stream_until(harness, operator, lambda: operator.status == 'holding', 'holding')
        stream_until(harness, operator, lambda: lifecycle_state(operator.diagnostics[-1])
                     == 'active', 'diagnostics of the active controller')
        assert 'watchdog' in {kv.key for kv in operator.diagnostics[-1].values}
    finally:
        harness.close()


def test_deactivate_leaves_one_zero_effort_then_silence_and_reactivate_holds_the_new_position():
    # state_timeout 5 s: on a loaded machine the test's state stream can pause longer than
    # the default 0.1 s, and the timeout then abandons the move this test waits for
    harness, controller, operator = start('state_timeout:=5.0')
    try:
        configured(harness, operator)
        assert transition(harness, operator, 'activate')
        stream_until(harness, operator, lambda: operator.status == 'holding', 'holding')
        operator.move_to(GOAL, 10)
        stream_until(harness, operator, lambda: operator.status == 'running', 'the move')
        mark = len(operator.efforts)
        assert transition(harness, operator, 'deactivate')
        stream_until(harness, operator, lambda: ZERO in operator.efforts[mark:],
                     'the zero effort')
        stream_for(harness, operator, 0.3)              # anything still in flight arrives
        after = operator.efforts[mark:]
        assert after[-1] == ZERO and after.count(ZERO) == 1
        assert all(e != ZERO for e in after[:-1])      # the move was commanding before
        count = len(operator.efforts)
        stream_for(harness, operator, 0.3)
        assert len(operator.efforts) == count           # inactive: silence
        assert operator.status == 'inactive'
        assert state(harness, operator) == State.PRIMARY_STATE_INACTIVE

        operator.q = MOVED                              # the arm moved meanwhile
        stream_until(harness, operator, lambda: np.allclose(controller._q, MOVED),
                     'the inactive controller to measure it')
        references = len(operator.references)
        assert transition(harness, operator, 'activate')
        stream_until(harness, operator, lambda: len(operator.efforts) > count
                     and len(operator.references) > references, 'efforts after activate')
        np.testing.assert_allclose(operator.references[references], MOVED, atol=1e-12)
        np.testing.assert_allclose(operator.efforts[count], gravity(MOVED), rtol=1e-9,
                                   atol=1e-9)
        stream_until(harness, operator, lambda: operator.status == 'holding',
                     'holding: the old move is not resumed')
        assert controller.sampler.status(controller._now()) == 'holding'
    finally:
        harness.close()


def test_cleanup_removes_the_topics_configure_again_works_and_shutdown_finalizes():
    harness, controller, operator = start()
    try:
        configured(harness, operator)
        assert transition(harness, operator, 'cleanup')
        assert state(harness, operator) == State.PRIMARY_STATE_UNCONFIGURED
        assert COMMANDS not in topics(controller) and '/joint_states' not in topics(controller)
        assert controller.model is None
        configured(harness, operator)                   # parameters read again
        assert transition(harness, operator, 'activate')
        stream_until(harness, operator, lambda: len(operator.efforts) >= 1, 'efforts')
        count = len(operator.efforts)
        assert transition(harness, operator, 'shutdown')
        assert state(harness, operator) == State.PRIMARY_STATE_FINALIZED
        stream_until(harness, operator, lambda: ZERO in operator.efforts[count:],
                     'the zero effort at shutdown')
        assert COMMANDS not in topics(controller) and controller.model is None
    finally:
        harness.close()


def test_urdf_from_the_topic_configure_fails_until_it_has_come():
    """robot.source urdf without a URDF parameter: configure waits for none, it fails
    naming the topic; once robot_description has published, configure succeeds."""
    harness = RosHarness(ros_args=['-p', 'robot.source:=urdf', '-p',
                                   'robot.base_link:=base_link', '-p', 'robot.tip_link:=tool0'])
    try:
        controller = harness.add(ManagedComputedTorqueController(context=harness.context))
        publisher_node = harness.add(Node('robot_state_publisher', context=harness.context))
        assert controller.trigger_configure() == TransitionCallbackReturn.FAILURE
        latched = QoSProfile(depth=1, durability=DurabilityPolicy.TRANSIENT_LOCAL)
        description = publisher_node.create_publisher(String, 'robot_description', latched)
        with open(UR5, encoding='utf-8') as stream:
            description.publish(String(data=stream.read()))
        harness.spin_until(lambda: controller._described is not None, 'the URDF')
        assert controller.trigger_configure() == TransitionCallbackReturn.SUCCESS
        assert controller.model.n == 6 and controller.lifecycle_state == 'inactive'
    finally:
        harness.close()


def fresh_participant_finds(service, wall_limit=20.0):
    """For a failure message: whether a new context (a DDS participant of its own) finds
    `service` within `wall_limit` s, telling a stuck participant of this test from a
    process nobody can reach."""
    probe = RosHarness()
    try:
        node = probe.add(Node('discovery_probe', context=probe.context))
        client = node.create_client(GetState, service)
        try:
            probe.spin_until(client.service_is_ready, service, wall_limit=wall_limit)
        except AssertionError:
            return f'did not find {service} either within {wall_limit:g} s'
        return f'found {service}'
    finally:
        probe.close()


def test_the_controller_managed_executable_starts_unconfigured_and_stops_cleanly():
    """`controller_managed` as a process: says at once that it is unconfigured, stays so
    until told, then the same transitions over DDS; SIGINT ends it with exit status 0.
    The process's start-up (its first line) and the discovery of its services are waited
    for separately, so that a failure says which of the two did not happen, with the
    time line of what the process printed."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [REPO] + [p for p in [os.environ.get('PYTHONPATH')] if p]), PYTHONUNBUFFERED='1')
    process = subprocess.Popen(
        [sys.executable, '-m', 'robot_dynamics.nodes.managed_controller', '--ros-args',
         '--params-file', PUMA], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        text=True)
    output = ProcessOutput(process)
    harness = RosHarness()
    failure = None
    try:
        operator = harness.add(Operator(harness.context))
        harness.spin_until(lambda: output.seen('unconfigured: bring it up with')
                           or process.poll() is not None, 'the start-up line')
        started = time.monotonic() - output.start
        try:
            harness.spin_until(lambda: operator.change_state.service_is_ready()
                               and operator.get_state.service_is_ready()
                               and operator.set_parameters.service_is_ready()
                               or process.poll() is not None, 'the lifecycle services')
        except AssertionError as error:      # what this side of DDS saw of the process
            raise AssertionError(
                f'{error} (the process started after {started:.1f} s); seen from here: '
                f'nodes {operator.get_node_names_and_namespaces()}, services '
                f'{[name for name, _ in operator.get_service_names_and_types()]}; a new '
                f'participant {fresh_participant_finds(CONTROLLER + "/get_state")}') from None
        assert process.poll() is None
        reachable(harness, operator)
        stream_for(harness, operator, 0.2)
        assert state(harness, operator) == State.PRIMARY_STATE_UNCONFIGURED
        assert operator.efforts == []
        configured(harness, operator)
        assert transition(harness, operator, 'activate')
        stream_until(harness, operator, lambda: len(operator.efforts) >= 3, 'efforts')
        np.testing.assert_allclose(operator.efforts[0], gravity(Q), rtol=1e-9, atol=1e-9)
        assert transition(harness, operator, 'deactivate')
        stream_until(harness, operator, lambda: operator.efforts[-1] == ZERO, 'zero effort')
    except AssertionError as error:
        failure = error         # reported below, with what the process printed and when
    finally:
        harness.close()
        if process.poll() is None:
            process.send_signal(signal.SIGINT)
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
    out = output.text()
    assert failure is None, f'{failure}\n--- controller_managed printed:\n{output.timeline()}'
    assert process.returncode == 0, out
    assert 'configured (inactive)' in out and 'Traceback' not in out


def test_a_configure_failing_after_the_topics_exist_leaves_none_behind():
    """diagnostics.* are declared after the controller's topics were created: refusing
    one must destroy those topics again (no half-configured node)."""
    harness = RosHarness(PUMA, ros_args=['-p', 'diagnostics.late_cycle_warn:=-1.0'])
    try:
        controller = harness.add(ManagedComputedTorqueController(context=harness.context))
        logs = []
        controller.get_logger().error = lambda text, **kwargs: logs.append(text)
        assert controller.trigger_configure() == TransitionCallbackReturn.FAILURE
        assert len(logs) == 1 and 'diagnostics.late_cycle_warn' in logs[0], logs
        assert COMMANDS not in topics(controller) and '/diagnostics' not in topics(controller)
        assert '/joint_states' not in topics(controller)
        assert not list(controller.timers) and controller.model is None
        assert controller.lifecycle_state == 'unconfigured'
    finally:
        harness.close()


def test_a_destroyed_managed_controller_leaves_the_graph_without_a_garbage_collection():
    """rclpy leaves a lifecycle node's state machine to the garbage collector, and it keeps
    the node alive: a destroyed managed controller stayed on the graph with its lifecycle
    services, which a later `/computed_torque_controller` (e.g. the executable started by
    the test above) then shared its service names with. Destroyed, it must be gone at
    once (garbage collection off meanwhile, so that it cannot tidy up for us)."""
    import gc
    harness = RosHarness(PUMA)
    enabled = gc.isenabled()
    gc.disable()
    try:
        observer = harness.add(Node('graph_observer', context=harness.context))
        for configure in (False, True):
            controller = ManagedComputedTorqueController(context=harness.context)
            if configure:
                assert controller.trigger_configure() == TransitionCallbackReturn.SUCCESS
            harness.spin_until(lambda: 'computed_torque_controller'
                               in observer.get_node_names(), 'the controller on the graph')
            controller.destroy_node()
            harness.spin_until(
                lambda: 'computed_torque_controller' not in observer.get_node_names()
                and not {f'{CONTROLLER}/{service}' for service in (
                    'change_state', 'get_state', 'set_parameters')}
                & {name for name, _ in observer.get_service_names_and_types()},
                'the destroyed controller gone from the graph', wall_limit=30.0)
    finally:
        if enabled:
            gc.enable()
        harness.close()
