"""/diagnostics (diagnostic_msgs/DiagnosticArray) for the controller and the plant.

Each node publishes one DiagnosticStatus every `diagnostics.period` s (1 s by default, on
the steady clock, so a stopped /clock does not silence it) on the global /diagnostics, as
diagnostic_updater does: the loop's achieved rate, cycle time (mean, max), late cycles,
the watchdog, saturated joints, the dynamics backend and where the model came from, with a
level of OK / WARN / ERROR from thresholds that are parameters (`diagnostics.*`).

The measuring is on the hot path: `measured` wraps the loop's cycle method and
`CycleMonitor.record` adds a few numbers per cycle (no container is built); everything
else (ratios, text, the message) is built once per report, from the counters of the
window since the previous report. Keys and levels: doc/lifecycle-and-diagnostics.md.
"""

import functools
import math
import time

from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus, KeyValue
import numpy as np
from rcl_interfaces.msg import SetParametersResult
from rclpy.clock import Clock, ClockType

from robot_dynamics import dynamics
from robot_dynamics.nodes.common.ros_params import (ConfigurationError, declare, robot_block,
                                                   validated)
from robot_dynamics.parameters.common import DIAGNOSTICS_AND_REALTIME

OK, WARN, ERROR = 0, 1, 2
LEVEL_NAMES = ('OK', 'WARN', 'ERROR')
TOPIC = '/diagnostics'
# diagnostics.<name>: default, description (live: settable at runtime, checked >= 0)
# (name, default, description): the parameter table's diagnostics.* thresholds
THRESHOLDS = tuple((entry.name[len('diagnostics.'):], entry.default, entry.description)
                   for entry in DIAGNOSTICS_AND_REALTIME
                   if entry.name.startswith('diagnostics.') and entry.live)


class CycleMonitor:
    """Cycles, execution time (sum, longest) and late cycles since the last `window()`.

    With a nominal `period` [s] (> 0), a cycle started more than one period after it was
    due counts as late, once per period it missed (a timer that fell behind skips its
    calls): cycle k is due one period after cycle k-1 was; a cycle that starts before its
    due time moves the grid earlier (the first cycle may itself have been late)."""

    __slots__ = ('period', 'cycles', 'busy', 'longest', 'late', '_due', '_opened')

    def __init__(self, period=0.0):
        self.period = period
        self._due = None
        self._reset(time.monotonic())

    def _reset(self, now):
        self.cycles, self.busy, self.longest, self.late = 0, 0.0, 0.0, 0
        self._opened = now

    def record(self, start, duration):
        """One cycle that started at `start` (perf_counter s) and took `duration` s."""
        self.cycles += 1
        self.busy += duration
        if duration > self.longest:
            self.longest = duration
        period = self.period
        if period > 0.0:
            due = self._due
            if due is None or start < due:
                self._due = start + period
            else:
                missed = int((start - due) / period)
                self.late += missed
                self._due = due + (missed + 1) * period

    def window(self):
        """The counters since the previous call (then reset) as a dict: cycles, late,
        due (cycles + late), seconds, rate [Hz], mean and max cycle time [s]."""
        now = time.monotonic()
        seconds = now - self._opened
        cycles, late = self.cycles, self.late
        result = {'cycles': cycles, 'late': late, 'due': cycles + late, 'seconds': seconds,
                  'rate': cycles / seconds if seconds > 0.0 else 0.0,
                  'mean': self.busy / cycles if cycles else 0.0, 'max': self.longest}
        self._reset(now)
        return result


def measured(method):
    """A loop's cycle method, timed into ``self.cycle_monitor`` (a CycleMonitor)."""
    @functools.wraps(method)
    def timed(self, *args):
        start = time.perf_counter()
        try:
            return method(self, *args)
        finally:
            self.cycle_monitor.record(start, time.perf_counter() - start)
    return timed


# `ros2 topic echo` cuts longer strings with "..." (its --truncate-length, 128): a status
# message stays within it, details go into the key/values.
MESSAGE_LENGTH = 128


class Report:
    """One DiagnosticStatus being built: the worst level, the reasons, the key values."""

    def __init__(self):
        self.level = OK
        self.reasons = []
        self.values = []

    def flag(self, level, reason):
        self.level = max(self.level, level)
        self.reasons.append(reason)

    def add(self, key, value):
        self.values.append((key, value))

    def message(self, fine):
        """The reasons, or `fine`; at most MESSAGE_LENGTH characters: the reasons that do
        not fit are named by a count, each one in full in a value of its own
        ('problem 1', ...)."""
        if not self.reasons:
            return fine
        text = '; '.join(self.reasons)
        if len(text) <= MESSAGE_LENGTH:
            return text
        self.values[:0] = [(f'problem {k}', reason)
                           for k, reason in enumerate(self.reasons, start=1)]
        total = len(self.reasons)
        for count in range(total - 1, 0, -1):
            where = (f'"problem {total}"' if count + 1 == total
                     else f'"problem {count + 1}" to "problem {total}"')
            text = '; '.join(self.reasons[:count]) + f'; +{total - count} more: {where}'
            if len(text) <= MESSAGE_LENGTH:
                return text
        if total == 1:                  # one long reason: as much of it as fits
            tail = ' [cut; whole: "problem 1"]'
            return text[:MESSAGE_LENGTH - len(tail)] + tail
        return f'{total} problems: values "problem 1" to "problem {total}"'


def check_loop(report, window, period, thresholds, what='cycles'):
    """Rate, cycle time and late cycles of `window` into `report`, with levels from
    `thresholds` (fractions: late_cycle_* of the cycles due, cycle_time_* of `period`).
    `period` 0: paced from outside, no late count and no cycle-time budget."""
    report.add('achieved rate [Hz]', f'{window["rate"]:.1f}')
    report.add('cycle time mean [ms]', f'{window["mean"] * 1e3:.3f}')
    report.add('cycle time max [ms]', f'{window["max"] * 1e3:.3f}')
    if period <= 0.0:
        return
    due, late = window['due'], window['late']
    fraction = late / due if due else 0.0
    report.add(f'late {what}', f'{late} of {due} ({100.0 * fraction:.2f} %)')
    for level, key in ((ERROR, 'late_cycle_error'), (WARN, 'late_cycle_warn')):
        if fraction > thresholds[key]:
            report.flag(level, f'{100.0 * fraction:.1f} % late {what} (> '
                               f'{100.0 * thresholds[key]:g} %)')
            break
    if window['cycles']:
        load = window['mean'] / period
        for level, key in ((ERROR, 'cycle_time_error'), (WARN, 'cycle_time_warn')):
            if load > thresholds[key]:
                report.flag(level, f'mean cycle time {window["mean"] * 1e3:.3f} ms is '
                                   f'{100.0 * load:.0f} % of the period (> '
                                   f'{100.0 * thresholds[key]:g} %)')
                break


def model_source(node):
    """Where the node's model came from, in words."""
    block = robot_block(node)
    if block.get('source', 'dh') != 'urdf':
        return f'dh ({block.get("dh_convention", "standard")} DH parameters, ' \
               f'{node.model.n} joints)'
    chain = f'{block.get("base_link", "?")} -> {block.get("tip_link", "?")}'
    if block.get('urdf_file'):
        return f'urdf file {block["urdf_file"]} ({chain})'
    if block.get('urdf'):
        return f'urdf (robot.urdf parameter, {chain})'
    if node.get_parameter('robot_description').value:
        return f'urdf (robot_description parameter, {chain})'
    return f'urdf (robot_description topic, {chain})'


class Diagnostics:
    """Declares `diagnostics.*`, sets ``node.cycle_monitor`` and publishes the status
    that ``describe(report, window, thresholds)`` fills, every `diagnostics.period` s."""

    def __init__(self, node, task, describe, period=0.0):
        self._node, self._describe = node, describe
        node.cycle_monitor = CycleMonitor(period)
        self.period = validated(node, 'diagnostics.period',
                                declare(node, 'diagnostics.period'))
        self.thresholds = {}
        for name, _, _ in THRESHOLDS:
            self.thresholds[name] = validated(node, f'diagnostics.{name}',
                                              declare(node, f'diagnostics.{name}'))
        node.add_on_set_parameters_callback(self._on_set_parameters)
        self.name = f'{node.get_fully_qualified_name().lstrip("/")}: {task}'
        self.model_source = model_source(node)
        self._publisher = self._timer = None
        if self.period > 0.0:
            self._publisher = node.create_publisher(DiagnosticArray, TOPIC, 10)
            self._timer = node.create_timer(self.period, self.publish,
                                            clock=Clock(clock_type=ClockType.STEADY_TIME))

    def _on_set_parameters(self, parameters):
        changes = {}
        try:
            for parameter in parameters:
                key = parameter.name[len('diagnostics.'):]
                if parameter.name.startswith('diagnostics.') and key in self.thresholds:
                    changes[key] = validated(self._node, parameter.name, parameter.value)
        except ConfigurationError as error:
            return SetParametersResult(successful=False, reason=str(error))
        self.thresholds.update(changes)
        return SetParametersResult(successful=True)

    def status(self):
        """The DiagnosticStatus of the window since the previous one."""
        report = Report()
        fine = self._describe(report, self._node.cycle_monitor.window(), self.thresholds)
        report.add('dynamics backend', dynamics.get_backend())
        report.add('model source', self.model_source)
        return DiagnosticStatus(level=bytes([report.level]), name=self.name,
                                message=report.message(fine), hardware_id='',
                                values=[KeyValue(key=k, value=str(v))
                                        for k, v in report.values])

    def stamp(self):
        """The header stamp: the node's clock (simulated time with use_sim_time)."""
        return self._node.get_clock().now().to_msg()

    def publish(self):
        msg = DiagnosticArray(status=[self.status()])
        msg.header.stamp = self.stamp()
        self._publisher.publish(msg)


def joint_list(joints):
    return ', '.join(joints) if joints else 'none'


class ControllerDiagnostics(Diagnostics):
    """The controller's status: its loop, the state watchdog (state_timeout), the joints
    outside their position limits (and by how much), the joints clipped to effort_limits,
    the trajectory status. A managed controller that is not
    active reports OK with its lifecycle state."""

    def __init__(self, node):
        sim_time = node.get_parameter('use_sim_time').value
        period = (1.0 / node.control_rate
                  if node.control_mode == 'timer' and not sim_time else 0.0)
        self.paced = ('' if period else 'n/a (use_sim_time: paced by /clock)'
                      if node.control_mode == 'timer'
                      else 'n/a (on_state: paced by /joint_states)')
        self.saturated_joints = set()     # joints clipped since the last report
        self._saturated_cycles = 0
        super().__init__(node, 'control loop', self._describe_controller, period)

    def _describe_controller(self, report, window, thresholds):
        node = self._node
        report.add('control mode', f'timer at {node.control_rate:g} Hz'
                   if node.control_mode == 'timer' else 'on_state')
        report.add('control law', getattr(node, '_law_name', 'computed_torque'))
        lifecycle = getattr(node, 'lifecycle_state', None)
        if lifecycle is not None:
            report.add('lifecycle state', lifecycle)
        if lifecycle not in (None, 'active'):
            return f'{lifecycle}: not commanding'
        check_loop(report, window, node.cycle_monitor.period, thresholds)
        if self.paced:
            report.add('late cycles', self.paced)
        report.add('watchdog', self._watchdog(report))
        report.add('latency_compensation', self._latency(node))
        if node.stamp_joint:
            report.add('state age', self._state_age(node))
        if node._ready:
            outside = node.sampler.describe_outside(node._q)
            report.add('outside position limits', outside or 'none')
            if outside:
                report.flag(WARN, f'outside the position limits: {outside}')
        saturated = node._saturated_cycles - self._saturated_cycles
        self._saturated_cycles = node._saturated_cycles
        report.add('saturated joints', joint_list(sorted(self.saturated_joints)))
        report.add('saturated cycles', str(saturated))
        if saturated:
            report.flag(WARN, f'effort clipped to effort_limits on '
                              f'{joint_list(sorted(self.saturated_joints))} in {saturated} '
                              'cycles')
        self.saturated_joints.clear()
        report.add('trajectory', node._status or 'none')
        describe_speed_scaling = getattr(node, 'describe_speed_scaling', None)
        if describe_speed_scaling is not None:      # the factor, and a refused one (WARN)
            describe_speed_scaling(report)
        report.add('unexpected errors', str(node.unexpected_errors))
        if window['cycles'] == 0 and node.control_mode == 'timer' and report.level == OK:
            report.flag(WARN, 'no control cycle in the last report window')
        return f'controlling at {window["rate"]:.1f} Hz'

    @staticmethod
    def _latency(node):
        """The dead time the prediction uses: as set, or measured (measure_latency)."""
        if not node.measure_latency:
            return f'{node.latency_compensation * 1e3:.3f} ms (set)'
        estimate = node.loop_delay
        counts = (f'{estimate.unmatched} echoed none, {estimate.ambiguous} one sent more '
                  'than once')
        if not estimate.samples:
            return (f'{estimate.value * 1e3:.3f} ms (measure_latency: no state has echoed a '
                    f'command yet; {counts})')
        return (f'{estimate.value * 1e3:.3f} ms (measured: {estimate.samples} states echoed a '
                f'command, {estimate.inferred} ticks without a state inferred; {counts})')

    @staticmethod
    def _state_age(node):
        """stamp_joint: the running mean of the states' ages, or that none has come yet."""
        if node._age_mean is None:
            return (f'stamp_joint {node.stamp_joint!r} not in /joint_states yet: the header '
                    f'stamp less state_age ({node.state_age * 1e3:.3f} ms) is used')
        return (f'{node._age_mean * 1e3:.3f} ms mean, from the stamp_joint '
                f'{node.stamp_joint!r} (state_age unused)')

    def _watchdog(self, report):
        node = self._node
        received = node._received
        if not node._ready and not all(math.isfinite(t) for t in received):
            missing = [j for j, t in zip(node.joints, received) if not math.isfinite(t)]
            report.flag(WARN, f'waiting for /joint_states of {joint_list(missing)}')
            return 'waiting for /joint_states'
        if node.state_timeout <= 0.0:
            return 'off (state_timeout 0)'
        now = node._now()
        stale = [j for j, t in zip(node.joints, received) if now - t > node.state_timeout]
        if stale or node._status == 'state_timeout':
            frozen = [j for j, f in zip(node.joints, node._frozen) if f]
            report.flag(ERROR, f'no /joint_states of {joint_list(stale)} within '
                               f'state_timeout {node.state_timeout:g} s: zero effort'
                        + (f' (frozen: {joint_list(frozen)}, the same moving state sent '
                           'again)' if frozen else ''))
            return f'tripped (no /joint_states within {node.state_timeout:g} s)'
        return f'ok (state_timeout {node.state_timeout:g} s)'


class PlantDiagnostics(Diagnostics):
    """The plant's status: its ticks (late and dropped ones from the plant's own
    counters), the real-time factor, the command watchdog (command_timeout), the joints
    clipped to robot.effort_max, the brakes, the joints at a mechanical stop (and the
    stops' efforts), joints beyond robot.velocity_max, a diverged integration."""

    def __init__(self, node):
        self._counters = self._read(node)
        super().__init__(node, 'simulation loop', self._describe_plant, 0.0)

    def stamp(self):
        """The plant's own time, as on its /joint_states: with publish_clock the simulated
        time it publishes on /clock (the other nodes' clock under use_sim_time), so all
        of one simulation's /diagnostics share one clock; else the node clock."""
        return self._node._stamp()

    @staticmethod
    def _read(node):
        return (node.ticks, node.late_ticks, node.dropped_ticks, node._steps,
                node.clipped_steps, time.monotonic())

    def _describe_plant(self, report, window, thresholds):
        node = self._node
        counters = self._read(node)
        ticks, late, dropped, steps, clipped, wall = (
            b - a for a, b in zip(self._counters, counters))
        self._counters = counters
        free_running = not node.publish_clock
        advanced = steps / node.steps_per_tick     # ticks integrated (several per call
        #                                            when catching up): the mean is per tick
        window = dict(window, mean=window['mean'] * window['cycles'] / advanced
                      if advanced else 0.0)
        report.add('mode', f'free-running at {1.0 / node.tick_period:g} Hz'
                   if free_running else 'publish_clock' + (' (lock-step)' if node.lockstep
                                                           else ''))
        if free_running:      # the plant counts its own ticks (catching up included)
            window = dict(window, due=ticks, late=late,
                          rate=ticks / wall if wall > 0.0 else 0.0)
        else:
            window = dict(window, rate=advanced / wall if wall > 0.0 else 0.0)
        check_loop(report, window, node.tick_period if free_running else 0.0, thresholds,
                   'ticks')
        if free_running:
            report.add('dropped ticks', str(dropped))
            if dropped:
                report.flag(WARN, f'{dropped} ticks dropped (more than the catch-up limit '
                                  'behind)')
        report.add('real-time factor', f'{steps * node.dt / wall:.3f}' if wall > 0.0
                   else 'n/a')
        report.add('watchdog', self._watchdog(report))
        joints = node._clipped[3] if clipped and node._clipped else []
        report.add('saturated joints', joint_list(joints) if clipped else 'none')
        report.add('saturated ticks', str(clipped))
        if clipped:
            report.flag(WARN, f'command clipped to robot.effort_max on {joint_list(joints)} '
                              f'in {clipped} ticks')
        report.add('brakes', self._brakes(node))
        self._stops(report, node)
        self._velocity(report, node)
        if node.stopped:
            report.flag(ERROR, 'state diverged: integration stopped')
            report.add('integration', 'stopped (diverged)')
            return 'stopped'
        return f'simulating at {window["rate"]:.1f} Hz'

    @staticmethod
    def _brakes(node):
        if not node.brakes:
            return 'none (brakes false)'
        if not node.braked:
            return 'released'
        if not math.isfinite(node._command_time):
            return 'engaged (until the first effort command)'
        return 'engaged (no effort command within command_timeout)'

    def _stops(self, report, node):
        """Which joints rest against a stop now (how far beyond, the stop's effort) and the
        largest stop effort per joint since the last report."""
        stops = node._stops
        if getattr(node, 'engine_name', 'own') == 'mujoco':
            report.add('joint stops', "MuJoCo's joint limits and contacts (engine mujoco)")
            return
        if stops is None:
            report.add('joint stops', 'off (joint_stops false)')
            return
        if not stops.any:
            report.add('joint stops', 'none (no finite robot.position_min/max)')
            return
        beyond = stops.outside(node.q)
        at_stop = [i for i in range(node.model.n) if beyond[i] != 0.0
                   or node.stop_effort[i] != 0.0]
        text = ', '.join(f'{node.joints[i]} ({"upper" if beyond[i] > 0.0 else "lower"}, '
                         f'{abs(beyond[i]):.3g} beyond, effort {node.stop_effort[i]:.4g})'
                         for i in at_stop)
        report.add('at a stop', text or 'none')
        peak = node.stop_peak
        node.stop_peak = np.zeros(node.model.n)
        report.add('stop effort max', ', '.join(
            f'{node.joints[i]} {peak[i]:.4g}' for i in np.flatnonzero(peak)) or 'none')
        # the message names the joints and stops; how far and the efforts are in the values
        if at_stop:
            report.flag(WARN, 'at a mechanical stop: ' + ', '.join(
                f'{node.joints[i]} ({"upper" if beyond[i] > 0.0 else "lower"})'
                for i in at_stop))
        elif peak.any():
            report.flag(WARN, 'hit a mechanical stop: ' + ', '.join(
                node.joints[i] for i in np.flatnonzero(peak)))

    @staticmethod
    def _velocity(report, node):
        """Joints that exceeded robot.velocity_max since the last report."""
        peak = node.velocity_peak
        if not np.isfinite(node.model.velocity_max).any():
            return
        node.velocity_peak = np.zeros(node.model.n)
        fast = np.flatnonzero(peak)
        text = ', '.join(f'{node.joints[i]} (|qd| up to {peak[i]:.4g} > '
                         f'{node.model.velocity_max[i]:g})' for i in fast)
        report.add('beyond velocity_max', text or 'none')
        if fast.size:
            report.flag(WARN, f'beyond robot.velocity_max: {text}')

    def _watchdog(self, report):
        node = self._node
        if not math.isfinite(node._command_time):
            return 'waiting for the first command'
        if node.command_timeout <= 0.0:
            return 'off (command_timeout 0)'
        age = node._plant_time() - node._command_time
        if age > node.command_timeout:
            report.flag(ERROR, f'no effort command for {age:.3f} s > command_timeout '
                               f'{node.command_timeout:g} s: '
                        + ('brakes engaged' if node.brakes else 'zero effort applied'))
            return f'tripped (no command within {node.command_timeout:g} s)'
        return f'ok (command_timeout {node.command_timeout:g} s)'
