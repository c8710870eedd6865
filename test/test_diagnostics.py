"""/diagnostics of the controller and the plant: the loop measurements and the levels
(without ROS), and over real DDS: both nodes publish about once a second with the
documented keys; a state watchdog trip turns the controller's status to ERROR and back to
OK when states return; clipped efforts are a WARN naming the joints; the plant's command
watchdog is an ERROR while commands are missing; thresholds are live parameters."""

import statistics
import time

import numpy as np
import pytest
from rclpy.node import Node
from rclpy.parameter import Parameter
from sensor_msgs.msg import JointState
from std_msgs.msg import Float64MultiArray

from robot_dynamics import dynamics
from ros_testing import PUMA, resting_state, RosHarness

diagnostic_msgs = pytest.importorskip('diagnostic_msgs')
from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus  # noqa: E402

from robot_dynamics.nodes.controller import ComputedTorqueController  # noqa: E402
from robot_dynamics.nodes.common.diagnostics import (check_loop, CycleMonitor, ERROR, OK,  # noqa
                                              Report, THRESHOLDS, WARN)
from robot_dynamics.nodes.plant import PlantSimulator  # noqa: E402

pytestmark = pytest.mark.filterwarnings('ignore::UserWarning')
JOINTS = [f'joint_{i}' for i in range(1, 7)]
Q = np.array([0.3, -0.4, 0.5, 0.2, -0.6, 0.7])
DEFAULTS = {name: default for name, default, _ in THRESHOLDS}
CONTROLLER_KEYS = {'control mode', 'control law', 'achieved rate [Hz]', 'cycle time mean [ms]',
                   'cycle time max [ms]', 'late cycles', 'watchdog', 'saturated joints',
                   'dynamics backend', 'model source'}
PLANT_KEYS = {'mode', 'achieved rate [Hz]', 'cycle time mean [ms]', 'cycle time max [ms]',
              'late ticks', 'dropped ticks', 'real-time factor', 'watchdog',
              'saturated joints', 'dynamics backend', 'model source'}
# everything but the watchdog out of the way: a loaded test machine is late now and then
QUIET = ('diagnostics.late_cycle_warn:=1.0', 'diagnostics.late_cycle_error:=1.0',
         'diagnostics.cycle_time_warn:=1000.0', 'diagnostics.cycle_time_error:=1000.0')


# ---------------------------------------------------------------------- without ROS

def test_cycle_monitor_counts_one_late_cycle_per_period_missed():
    monitor = CycleMonitor(period=0.01)
    # on time (a little late, then a little early), then the calls due at 0.04 and 0.05
    # never came: the one at 0.0605 is the call due at 0.06
    for start in (0.0, 0.0102, 0.0199, 0.0301, 0.0605, 0.0701):
        monitor.record(start, 0.001)
    window = monitor.window()
    assert window['cycles'] == 6 and window['late'] == 2 and window['due'] == 8


def test_cycle_monitor_on_a_jittery_grid_counts_nothing_late():
    rng = np.random.default_rng(3)
    monitor = CycleMonitor(period=0.001)
    offset = 0.37e-3          # the first call late: the grid is anchored on it
    for k in range(2000):
        monitor.record(offset + k * 1e-3 + rng.uniform(-0.3e-3, 0.3e-3), 1e-5)
    assert monitor.window()['late'] == 0


def test_cycle_monitor_window_reports_and_restarts():
    monitor = CycleMonitor()                  # no period: paced from outside
    for duration in (1e-3, 3e-3, 2e-3):
        monitor.record(time.perf_counter(), duration)
    first = monitor.window()
    assert first['cycles'] == 3 and first['late'] == 0
    assert first['mean'] == pytest.approx(2e-3) and first['max'] == 3e-3
    assert first['rate'] > 0.0
    second = monitor.window()
    assert second['cycles'] == 0 and second['max'] == 0.0


def window(due, late, mean=1e-4, period=0.01):
    cycles = due - late
    return {'cycles': cycles, 'late': late, 'due': due, 'seconds': 1.0,
            'rate': float(cycles), 'mean': mean, 'max': mean}


@pytest.mark.parametrize('late, level', [(0, OK), (1, OK), (2, WARN), (10, WARN),
                                         (11, ERROR)])
def test_late_cycle_levels_follow_the_thresholds(late, level):
    report = Report()
    check_loop(report, window(100, late), 0.01, DEFAULTS)   # WARN > 1 %, ERROR > 10 %
    assert report.level == level
    assert report.reasons == [] if level == OK else 'late' in report.reasons[0]


@pytest.mark.parametrize('share, level', [(0.4, OK), (0.6, WARN), (0.95, ERROR)])
def test_cycle_time_levels_are_fractions_of_the_period(share, level):
    report = Report()
    check_loop(report, window(100, 0, mean=share * 0.01), 0.01, DEFAULTS)
    assert report.level == level


def test_a_long_message_stays_whole_for_ros2_topic_echo_and_every_reason_is_in_the_values():
    """`ros2 topic echo` cuts strings longer than 128 characters with "...": a message
    stays within that, and reasons that do not fit are counted and given in full."""
    short = Report()
    short.flag(WARN, 'at a mechanical stop: joint_2 (lower)')
    assert short.message('fine') == 'at a mechanical stop: joint_2 (lower)'
    report = Report()
    reasons = [f'reason {k}: ' + 'x' * 40 for k in range(1, 5)]
    for reason in reasons:
        report.flag(WARN, reason)
    message = report.message('fine')
    assert len(message) <= 128 and message.startswith(reasons[0]) and '...' not in message
    assert 'more' in message and '"problem 4"' in message
    values = dict(report.values)
    assert [values[f'problem {k}'] for k in range(1, 5)] == reasons


def test_one_reason_too_long_for_the_message_is_cut_and_given_whole_in_the_values():
    reason = 'joint_1: ' + 'y' * 200
    report = Report()
    report.flag(WARN, reason)
    message = report.message('fine')
    assert len(message) <= 128 and message.startswith('joint_1: yyy')
    assert '"problem 1"' in message and 'problems' not in message
    assert dict(report.values)['problem 1'] == reason


def test_a_loop_paced_from_outside_has_no_late_count():
    report = Report()
    check_loop(report, window(100, 50), 0.0, DEFAULTS)
    assert report.level == OK and 'late cycles' not in dict(report.values)


# ---------------------------------------------------------------------- over DDS

class Listener(Node):
    """Records /diagnostics by status name; can play the robot and the controller."""

    def __init__(self, context):
        super().__init__('diagnostics_listener', context=context)
        self.statuses = {}          # name -> [(stamp s, DiagnosticStatus)]
        self.create_subscription(DiagnosticArray, '/diagnostics', self._on_array, 100)
        self.states = self.create_publisher(JointState, 'joint_states', 10)
        self.commands = self.create_publisher(Float64MultiArray,
                                              '/effort_controller/commands', 10)

    def _on_array(self, msg):
        stamp = msg.header.stamp.sec + msg.header.stamp.nanosec * 1e-9
        for status in msg.status:
            self.statuses.setdefault(status.name, []).append((stamp, status))

    def of(self, node_name):
        return [s for name, entries in self.statuses.items()
                if name.startswith(node_name + ':') for _, s in entries]

    def send_state(self, q=Q):
        self.states.publish(resting_state(JOINTS, q, self))


def reporting(node_class, *overrides):
    """One node of `node_class` reporting every 0.2 s, only watchdog and saturation
    levels (QUIET), and a Listener: (harness, listener, the node's statuses so far)."""
    harness = RosHarness(PUMA, overrides=('diagnostics.period:=0.2',) + QUIET + overrides)
    try:
        name = harness.add(node_class(context=harness.context)).get_name()
        listener = harness.add(Listener(harness.context))
    except Exception:
        harness.close()
        raise
    return harness, listener, lambda: listener.of(name)


def values(status):
    return {kv.key: kv.value for kv in status.values}


def level(status):
    return status.level[0] if isinstance(status.level, bytes) else status.level


def test_both_nodes_publish_about_once_a_second_with_the_documented_keys():
    harness = RosHarness(PUMA)
    try:
        controller = harness.add(ComputedTorqueController(context=harness.context))
        harness.add(PlantSimulator(context=harness.context))
        listener = harness.add(Listener(harness.context))
        harness.spin_until(lambda: len(listener.of('computed_torque_controller')) >= 4
                           and len(listener.of('plant_simulator')) >= 4, 'four reports each')
        assert set(listener.statuses) == {'computed_torque_controller: control loop',
                                          'plant_simulator: simulation loop'}
        for name, keys in (('computed_torque_controller: control loop', CONTROLLER_KEYS),
                           ('plant_simulator: simulation loop', PLANT_KEYS)):
            entries = listener.statuses[name]
            stamps = [stamp for stamp, _ in entries]
            period = statistics.median(np.diff(stamps))
            assert 0.5 < period < 2.0, (name, stamps)       # diagnostics.period: 1 s
            last = entries[-1][1]
            assert keys <= set(values(last)), (name, keys - set(values(last)))
            assert values(last)['dynamics backend'] == dynamics.get_backend()
            assert values(last)['model source'].startswith('dh (standard DH')
            if name.startswith('computed_torque_controller'):
                assert values(last)['control law'] == 'computed_torque'
            assert float(values(last)['achieved rate [Hz]']) > 0.0   # the loop closed
            assert level(last) in (OK, WARN, ERROR) and last.message
        assert controller.cycle_monitor.period == pytest.approx(0.01)   # 100 Hz timer
    finally:
        harness.close()


def test_controller_watchdog_trip_is_an_error_and_the_status_returns_to_ok():
    harness, listener, reports = reporting(ComputedTorqueController, 'state_timeout:=0.1')
    try:
        harness.spin_until(lambda: reports() and values(reports()[-1])['watchdog'] == (
            'waiting for /joint_states'), 'a report before any state')
        assert level(reports()[-1]) == WARN and 'joint_1' in reports()[-1].message
        harness.spin_until(lambda: listener.send_state() or (
            level(reports()[-1]) == OK
            and values(reports()[-1])['watchdog'].startswith('ok')), 'OK while states come')
        mark = len(reports())
        harness.spin_until(lambda: level(reports()[-1]) == ERROR, 'ERROR without states')
        tripped = reports()[-1]
        assert values(tripped)['watchdog'].startswith('tripped')
        assert 'state_timeout' in tripped.message and 'joint_6' in tripped.message
        assert all(level(s) == OK for s in reports()[mark:-1]
                   if not values(s)['watchdog'].startswith('tripped'))
        harness.spin_until(lambda: listener.send_state() or level(reports()[-1]) == OK,
                           'OK when states return')
        assert values(reports()[-1])['watchdog'].startswith('ok')
    finally:
        harness.close()


def test_clipped_efforts_are_a_warning_naming_the_joints():
    """Holding Q needs 34 N m on joint_2 against gravity: a 5 N m limit clips it. (The
    state watchdog gets 5 s here: the test's states come from this process's spin, which a
    loaded machine can stall past the default 0.1 s, and a tripped watchdog is an ERROR.)"""
    harness, listener, reports = reporting(ComputedTorqueController,
                                           f'effort_limits:={[5.0] * 6}', 'state_timeout:=5.0')
    try:
        harness.spin_until(lambda: listener.send_state() or (
            reports() and int(values(reports()[-1])['saturated cycles']) > 0),
            'a report with clipped cycles')
        clipped = reports()[-1]
        assert level(clipped) == WARN
        assert values(clipped)['saturated joints'] == 'joint_2'
        assert 'joint_2' in clipped.message and 'effort_limits' in clipped.message
    finally:
        harness.close()


def test_plant_command_watchdog_is_an_error_while_commands_are_missing():
    harness, listener, reports = reporting(PlantSimulator, 'command_timeout:=0.1')
    try:
        harness.spin_until(lambda: reports(), 'a report')
        assert values(reports()[-1])['watchdog'] == 'waiting for the first command'
        assert level(reports()[-1]) == OK
        gravity = [0.0, 30.0, 0.0, 0.0, 0.0, 0.0]
        command = lambda: listener.commands.publish(  # noqa: E731
            Float64MultiArray(data=gravity))
        harness.spin_until(lambda: command() or (
            values(reports()[-1])['watchdog'].startswith('ok')
            and level(reports()[-1]) == OK), 'OK while commands come')
        harness.spin_until(lambda: level(reports()[-1]) == ERROR, 'ERROR without commands')
        assert values(reports()[-1])['watchdog'].startswith('tripped')
        assert 'command_timeout' in reports()[-1].message
        harness.spin_until(lambda: command() or level(reports()[-1]) == OK,
                           'OK when commands return')
    finally:
        harness.close()


def test_thresholds_are_live_parameters_checked_when_set():
    harness = RosHarness(PUMA)
    try:
        controller = harness.add(ComputedTorqueController(context=harness.context))
        refused = controller.set_parameters([Parameter('diagnostics.late_cycle_warn',
                                                       value=-0.5)])[0]
        assert not refused.successful and 'diagnostics.late_cycle_warn' in refused.reason
        assert controller._diagnostics.thresholds['late_cycle_warn'] == DEFAULTS[
            'late_cycle_warn']
        accepted = controller.set_parameters([Parameter('diagnostics.late_cycle_warn',
                                                        value=0.05)])[0]
        assert accepted.successful
        assert controller._diagnostics.thresholds['late_cycle_warn'] == 0.05
        assert controller.get_parameter('diagnostics.period').value == 1.0
        assert DiagnosticStatus.ERROR == bytes([ERROR])   # our levels are the message's
    finally:
        harness.close()


def test_the_watchdog_says_which_tripped_joints_are_frozen_not_silent():
    """The state watchdog's report, on a stand-in controller: joint_2 silent and joint_3
    frozen (its moving state sent again unchanged) are both past state_timeout; the ERROR
    names both, and the frozen one as frozen."""
    import types
    from robot_dynamics.nodes.common.diagnostics import ControllerDiagnostics, ERROR, Report
    node = types.SimpleNamespace(
        joints=['joint_1', 'joint_2', 'joint_3'], _ready=True, state_timeout=0.1,
        _received=np.array([10.0, 9.5, 9.6]), _frozen=np.array([False, False, True]),
        _status='state_timeout', _now=lambda: 10.05)
    diagnostics = ControllerDiagnostics.__new__(ControllerDiagnostics)
    diagnostics._node = node
    report = Report()
    assert diagnostics._watchdog(report).startswith('tripped')
    assert report.level == ERROR
    (reason,) = report.reasons
    assert 'joint_2, joint_3' in reason and 'frozen: joint_3' in reason
    node._frozen[:] = False
    report = Report()
    diagnostics._watchdog(report)
    assert 'frozen' not in report.reasons[0]
