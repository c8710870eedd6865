"""plant_simulator: the arm's forward dynamics integrated at a fixed step, as a ROS 2 node.

The latest effort command is held over each step (zero-order hold) and
q̈ = forward_dynamics(q, q̇, τ) is integrated with RK4 (or semi-implicit Euler); the state
is published on /joint_states (position, velocity, the effort actually applied) every
1/publish_rate s of simulated time. robot.position_min/max are mechanical stops
(integration.JointStops; joint_stops false: none); brakes hold every joint still before the
first command and after command_timeout (brakes false: zero effort, the arm falls); joints
beyond robot.velocity_max are reported (doc/simulation.md).

Time: with publish_clock false the plant runs free on the wall clock and stamps with the
node clock: tick k is due at start + k·tick_period (steady clock); each tick integrates
every tick due by then (at most MAX_CATCH_UP, older ones are dropped) and publishes the last
state. A tick processed more than one tick_period after it was due is counted as late
(`loop_statistics`, and a summary line when the node is destroyed). Until the first valid
command the plant (on its brakes) holds its initial state: it publishes it every tick
without integrating, so the arm does not fall before a controller holds it. The `plant` executable drives these
ticks with its own loop (`spin_free_running`: sleep to the due time, take the commands,
tick); a plant spun by another executor has a timer do it, with the ticks due on the
timer's grid.
With publish_clock true it owns simulated time: each tick advances exactly
steps_per_tick·integration_step, publishes /clock, then /joint_states. With lockstep (the
default) simulated time advances only once the command answering the last published state
has arrived (or lockstep_timeout wall seconds passed), so the loop does not depend on the
CPU keeping up; simulated time starts with the first command.

Engines (`engine`): own (this package's integrator and stops) or mujoco (MuJoCo's mj_step
on the MJCF file mujoco.model_file, or on MJCF generated from the robot model; its joint
limits and contacts); robot_dynamics.engines. ~/external_wrench (geometry_msgs/
WrenchStamped) acts on the link header.frame_id names (empty: the tip), force and moment in
the base frame, until the next one (all zero clears it).
"""

import math
import sys
import threading
import time

from builtin_interfaces.msg import Time
from geometry_msgs.msg import WrenchStamped
import numpy as np
from rcl_interfaces.msg import SetParametersResult
from rclpy.clock import Clock, ClockType
from rclpy.node import Node
from rosgraph_msgs.msg import Clock as ClockMsg
from sensor_msgs.msg import JointState

from robot_dynamics.simulation import engines, integration
from robot_dynamics.dynamics.checks import singular_mass_matrix_message
from robot_dynamics.nodes.common.diagnostics import measured, PlantDiagnostics
from robot_dynamics.nodes.common.effort_command import (declare_command_message, describe,
                                                        EffortCommand, message_type, Refused)
from robot_dynamics.nodes.common.measurement_noise import declare_measurement_noise
from robot_dynamics.nodes.common.ros_params import (
    ConfigurationError, declare, declare_robot, keep_float_types, name_unknown_parameters,
    payload_model, validated)
from robot_dynamics.nodes.common.realtime import declare_realtime
from robot_dynamics.nodes.common.runner import (domain_in_use_message, lock_domain,
                                              own_loop_after_the_model, run, StartRefused)
from robot_dynamics.nodes.common.throttled_log import log_throttled

NODE_NAME = 'plant_simulator'
THROTTLE = 2.0        # s between repeated warnings
RESEND_PERIOD = 0.5   # wall s between re-publications of a state nobody has answered
MAX_CATCH_UP = 10     # free-running: ticks integrated in one timer callback at most
SERVICE_PERIOD = 0.01  # s: the free-running loop lets the executor run this often
IDLE_PUBLISH_PERIOD = 0.1  # wall s between states while publish_on_command hears no command
PHASE_TARGET = 0.1    # publish_on_command: a tick this many periods after a command arrives
PHASE_GAIN = 0.05     # ... the share of the phase error corrected at each tick
CLOCK_READS = 3       # free-running: tries to read the node clock between two steady readings
CLOCK_READ_SPAN = 5e-6   # s apart at most (else the narrowest of the tries)
QUEUE_DRAIN_PERIOD = 10    # ... one answered tick in this many publishes no state
SAME_CLOCK = 1.0      # s: a command stamp this close to the plant's system clock is on it
LOCKSTEP_HINT = 5.0   # wall s without a first command in lock-step before saying why


def _parameter(node, name, default=None):
    """Declare `name` from the plant's table (with `default` when the model gives it) and
    return its value checked by the table's rules."""
    value = declare(node, name) if default is None else declare(node, name, default)
    return validated(node, name, value)


class PlantSimulator(Node):
    """Integrates the arm under the commanded efforts; publishes /joint_states (+ /clock)."""

    parameter_table = NODE_NAME     # robot_dynamics.parameters.TABLES

    def __init__(self, **kwargs):
        super().__init__(NODE_NAME, **kwargs)
        self.model = None        # until the robot model exists (robot_description topic)
        self.stopped = False
        keep_float_types(self)               # integers set live on floats stay floats
        name_unknown_parameters(self)        # `ros2 param set` of a misspelt name
        try:
            declare_robot(self, self._start)   # now, or when the URDF arrives
        except Exception:
            self.destroy_node()
            raise

    def _start(self, model, joints):
        """The rest of the start-up, once the model exists."""
        self.model, self.joints = model, joints
        self._declare_parameters()
        if self.drives_compensate_gravity:   # g(q) added to every command: weightless
            self.model = model.with_gravity((0.0, 0.0, 0.0))
        singular = singular_mass_matrix_message(self.model)   # no forward dynamics
        if singular:
            raise ConfigurationError(f'robot: {singular}')
        n = self.model.n
        self._step = integration.METHODS[self.method]
        self._stops = None
        if self.joint_stops and self.engine_name == 'own':
            self._stops = integration.JointStops(self.model.position_min,
                                                 self.model.position_max)
            beyond = np.flatnonzero(self._stops.outside(self.q))
            if beyond.size:
                i = int(beyond[0])
                side = 'max' if self.q[i] > self.model.position_max[i] else 'min'
                raise ConfigurationError(
                    f'initial_positions[{i}] (joint {self.joints[i]}): {self.q[i]:g} is beyond '
                    f'robot.position_{side}[{i}] = {getattr(self.model, "position_" + side)[i]:g}'
                    '; with joint_stops true the arm cannot start there: start inside the '
                    'limits, widen them (a plant_simulator section may override robot.*) or '
                    'set joint_stops false')
        self.engine = self._make_engine()
        self.engine.prepare(self.model, self.q)   # the kernels now, not in the first tick
        self._tau_command = np.zeros(n)
        self._tau_applied = np.zeros(n)
        self._clipped = None                 # (command, model, clipped command, joints)
        self._command_time = -math.inf       # plant time of the latest command [s]
        self._holding = not self.publish_clock and self.brakes   # free-running: no
        #                          integration before the first valid command (on the brakes)
        self._steps = 0                      # simulated time = steps · dt (exact, integer)
        self._started = not (self.publish_clock and self.lockstep)
        self._awaiting_command = False
        self._last_publish_wall = -math.inf
        self._created_wall = time.monotonic()
        self._hinted = False                 # _no_first_command_hint said its line
        self.stopped = False
        self.clipped_steps = 0               # ticks in which robot.effort_max clipped a command
        self._target_model = self.model      # the latest accepted payload
        self._model_lock = threading.Lock()
        self._new_model = None               # built in the callback, taken by the next tick
        self._state_msg = JointState(name=list(self.joints) + (
            [self.stamp_joint] if self.stamp_joint else []))
        self.stop_effort = np.zeros(n)       # the stops' efforts at the last state [N m | N]
        self.stop_peak = np.zeros(n)         # their largest |value| since the last report
        self._stops_met = set()              # (joint index, 'min' | 'max') logged once
        self.velocity_peak = np.zeros(n)     # largest |q̇| beyond velocity_max since then
        self.braked = self.brakes            # brakes hold the joints (until a command)
        self._wall_start = None              # free-running: steady time tick 0 was due [s]
        self._stretch = 0.0                  # ... wall time [s] the ticks still have to
        #                                      integrate for the moves of the tick grid
        self._stretched = 0.0                # ... simulated time [s] added for them so far
        self._grid_stamps = False            # ... states stamped when their tick was due
        self._answers = 0                    # ... ticks that answered a command
        self._command_written = None         # ... system time the newest command was
        #                                      stamped (JointState commands; None: no stamp)
        self._last_sent = -math.inf          # ... system time the last state was sent
        self.held_states = 0                 # ... states held back: the last one not read
        self.ticks = 0                       # free-running: ticks integrated
        self.late_ticks = 0                  # ... processed > tick_period after they were due
        self.dropped_ticks = 0               # ... beyond MAX_CATCH_UP, not integrated
        self.unanswered_states = 0           # ... states with no command before the next tick
        self._answered = True
        self._command_heard = False          # publish_on_command: a command since the state
        self._closed_at = None               # counters when the first command arrived
        self._state_pub = self.create_publisher(JointState, 'joint_states', 10)
        self._clock_pub = (self.create_publisher(ClockMsg, '/clock', 10)
                           if self.publish_clock else None)
        self._command_type = message_type(self.command_message)
        self._command_reader = EffortCommand(
            self.joints, self.command_message,
            ignored=[self.stamp_joint] if self.stamp_joint else [])
        self._command_sub = self.create_subscription(
            self._command_type, self.command_topic, self._on_command, 10)
        self._wrench_sub = self.create_subscription(
            WrenchStamped, '~/external_wrench', self._on_wrench, 10)
        wall_period = self.tick_period
        if self.publish_clock:
            wall_period = (self.tick_period / self.real_time_factor
                           if self.real_time_factor > 0.0 else 0.001)
        self._timer = self.create_timer(wall_period, self._on_timer,
                                        clock=Clock(clock_type=ClockType.STEADY_TIME))
        self.add_on_set_parameters_callback(self._on_set_parameters)
        self._diagnostics = PlantDiagnostics(self)      # /diagnostics
        self.get_logger().info(
            f'{n} joints, {self._engine_text()}, {self.method} at {self.dt * 1e3:g} ms, '
            f'/joint_states every '
            f'{self.tick_period * 1e3:g} ms'
            + (' after a command (publish_on_command)' if self.publish_on_command
               and not self.publish_clock else '')
            + (', publishing /clock' + (' in lock-step' if self.lockstep else '')
               if self.publish_clock else '')
            + f'; efforts from {self.command_topic} ({describe(self.command_message)})'
            + (' (+ g(q): drives_compensate_gravity)' if self.drives_compensate_gravity
               else '')
            + (f'; {self.measurement_noise.describe()}' if self.measurement_noise.enabled
               else '')
            + ('; joint limits and contacts from MuJoCo' if self.engine_name == 'mujoco'
               else '; mechanical stops at robot.position_min/max' if self._stops is not None
               and self._stops.any else '; no mechanical stops' if self._stops is not None
               else '; mechanical stops off (joint_stops false)')
            + ('; brakes engaged until the first effort command' if self.brakes
               else '; no brakes (brakes false): zero effort lets the arm fall'))

    # ------------------------------------------------------------------ the engine

    def _make_engine(self):
        """The engine the `engine` parameter selects (engines.make_engine);
        ConfigurationError (one line) when MuJoCo is absent or refuses the model."""
        try:
            engine = engines.make_engine(
                self.engine_name, self.model, self.joints, self.dt, self.method,
                stops=self._stops, model_file=self.mujoco_model_file,
                limits=self.joint_stops, log=self.get_logger().warning)
        except ImportError as error:
            raise ConfigurationError(f'engine mujoco: {error}') from None
        except ValueError as error:
            raise ConfigurationError(f'engine mujoco: {error}') from None
        if self.engine_name == 'mujoco' and self.drives_compensate_gravity:
            engine.set_gravity((0.0, 0.0, 0.0))
        return engine

    def _engine_text(self):
        if self.engine_name == 'own':
            return 'engine own'
        return ('engine mujoco (' + (self.mujoco_model_file or 'MJCF generated from the '
                                     'robot model') + ')')

    # ------------------------------------------------------------------ parameters

    def _declare_parameters(self):
        zero = np.clip(0.0, self.model.position_min, self.model.position_max).tolist()
        self.q = np.array(_parameter(self, 'initial_positions', zero))
        self.qd = np.array(_parameter(self, 'initial_velocities'))
        self.dt = _parameter(self, 'integration_step')
        self.method = _parameter(self, 'integration_method')
        rate = _parameter(self, 'publish_rate')
        self.steps_per_tick = max(1, round(1.0 / (rate * self.dt)))
        self.tick_period = self.steps_per_tick * self.dt
        if abs(self.tick_period * rate - 1.0) > 1e-9:
            self.get_logger().warning(
                f'publish_rate {rate:g} Hz is not a whole number of integration steps; '
                f'publishing every {self.steps_per_tick} steps ({1.0 / self.tick_period:g} Hz)')
        self.command_topic = _parameter(self, 'command_topic')
        self.command_message = declare_command_message(self)
        self.stamp_joint = _parameter(self, 'stamp_joint')
        if self.stamp_joint in self.joints:
            raise ConfigurationError(f'stamp_joint: {self.stamp_joint!r} is a joint of the '
                                     'arm; give it a name of its own')
        for name in ('command_timeout', 'publish_clock', 'lockstep', 'publish_on_command',
                     'domain_check_wait', 'lockstep_timeout', 'real_time_factor',
                     'drives_compensate_gravity'):
            setattr(self, name, _parameter(self, name))
        self.realtime = declare_realtime(self)    # applied by the runner's loop
        self.divergence_velocity = _parameter(self, 'divergence_velocity')
        self.measurement_noise = declare_measurement_noise(self)
        self.joint_stops = _parameter(self, 'joint_stops')
        self.engine_name = _parameter(self, 'engine')
        self.mujoco_model_file = _parameter(self, 'mujoco.model_file')
        self.brakes = _parameter(self, 'brakes')

    def _on_set_parameters(self, parameters):
        """robot.payload.{mass,com,inertia} at runtime: validated and built here (the new
        model shares the compiled kernels of the old one: microseconds), taken by the next
        tick."""
        changes = {p.name[14:]: p.value for p in parameters
                   if p.name in ('robot.payload.mass', 'robot.payload.com',
                                 'robot.payload.inertia')}
        if not changes:
            return SetParametersResult(successful=True)
        try:
            model = payload_model(self._target_model, changes)
        except (ConfigurationError, TypeError, ValueError) as error:
            return SetParametersResult(successful=False, reason=str(error))
        try:
            prepared = self.engine.prepare_model(model)   # binds the new model's kernels
        except ValueError as error:
            return SetParametersResult(successful=False, reason=str(error))
        self._target_model = model
        with self._model_lock:
            self._new_model = (model, prepared)
        return SetParametersResult(successful=True)

    def _take_new_model(self):
        if self._new_model is None:
            return
        with self._model_lock:
            (self.model, prepared), self._new_model = self._new_model, None
        self.engine.use_model(self.model, prepared)
        self.get_logger().info(f'payload {self.model.payload.mass:g} kg in effect')

    # ------------------------------------------------------------------ time

    @property
    def sim_time(self):
        """Simulated time [s] (with publish_clock)."""
        return self._steps * self.dt

    def _plant_time(self):
        if self.publish_clock:
            return self.sim_time
        return self.get_clock().now().nanoseconds * 1e-9

    def _stamp(self, clock_ns=None):
        """The state's stamp: simulated time, else the node clock (`clock_ns` if given)."""
        if self.publish_clock:
            nanoseconds = self._steps * round(self.dt * 1e9)
        else:
            nanoseconds = self.get_clock().now().nanoseconds if clock_ns is None else clock_ns
        return Time(sec=nanoseconds // 1_000_000_000, nanosec=nanoseconds % 1_000_000_000)

    # ------------------------------------------------------------------ callbacks

    def _on_command(self, msg):
        self._command_heard = True        # answered with a state, even if refused
        try:
            tau = self._command_reader.read(msg)
        except Refused as refused:
            line = (f'{self.command_topic}: {refused}; command ignored (the last good one '
                    'stays, within command_timeout)')
            log_throttled(self, 'info' if refused.level == 'info' else 'warning', line,
                          THROTTLE)
            return
        self._tau_command = tau
        self._command_time = self._plant_time()
        stamp = getattr(msg, 'header', None)
        self._command_written = (stamp.stamp.sec + stamp.stamp.nanosec * 1e-9
                                 if stamp is not None else None) or None
        self._answered = True
        self._holding = False
        if self._closed_at is None and self._wall_start is not None:
            self._closed_at = self._counters()
        if self._awaiting_command or not self._started:
            self._awaiting_command = False
            self._started = True
            if self.real_time_factor == 0.0 and self.publish_clock:
                self._advance()

    def _on_wrench(self, msg):
        """~/external_wrench: the wrench on link header.frame_id from now on (all zero
        clears it); a bad one is refused in one line naming the field."""
        try:
            force, moment = msg.wrench.force, msg.wrench.torque
            self.engine.set_wrench(msg.header.frame_id, (force.x, force.y, force.z),
                                   (moment.x, moment.y, moment.z))
        except engines.FrameError as error:
            log_throttled(self, 'warning', f'~/external_wrench: {error}; wrench ignored',
                          THROTTLE)
            return
        except ValueError as error:
            text = str(error).replace('moment.', 'wrench.torque.').replace(
                'force.', 'wrench.force.')
            log_throttled(self, 'warning', f'~/external_wrench: {text}; wrench ignored',
                          THROTTLE)
            return
        wrench = self.engine.wrench
        self.get_logger().info(
            'external wrench cleared' if wrench is None else
            f'external wrench on {msg.header.frame_id or "the tip"}: force '
            f'{np.round(wrench[:3], 6).tolist()} N, moment {np.round(wrench[3:], 6).tolist()} '
            'N m (base frame)')

    def _on_timer(self):
        if self.stopped:
            return
        if not self.publish_clock:
            self._free_running_tick()
            return
        if not self._started or self._awaiting_command:
            waited = time.monotonic() - self._last_publish_wall
            if not self._started or waited < self.lockstep_timeout:
                if waited >= RESEND_PERIOD:
                    self._resend()        # let a late controller find the state
                if not self._started:
                    self._no_first_command_hint()
                return
            log_throttled(
                self, 'warning',
                f'lock-step: no command within {self.lockstep_timeout:g} s (wall) for the '
                f'state at t = {self.sim_time:.3f} s; advancing without it', THROTTLE)
        self._advance()

    # ------------------------------------------------------------------ the plant

    def effort(self, now=None):
        """The held command if fresh at plant time `now` (else zero), clipped to
        robot.effort_max."""
        age = (self._plant_time() if now is None else now) - self._command_time
        if self.command_timeout > 0.0 and age > self.command_timeout + 1e-9:
            if np.isfinite(self._command_time) and not self.brakes:
                log_throttled(self, 'warning',
                              f'no effort command for {age:.3f} s > command_timeout '
                              f'{self.command_timeout:g} s: applying zero effort', THROTTLE)
            return np.zeros(self.model.n)
        tau, joints = self._clipped_command()
        if joints:
            self.clipped_steps += 1
            log_throttled(
                self, 'warning',
                f'effort command clipped to robot.effort_max on {joints} ({self.clipped_steps}'
                ' ticks so far); /joint_states effort shows what was applied', THROTTLE)
        return tau

    def _clipped_command(self):
        """(the held command clipped to robot.effort_max, the joints it clips): computed
        once per command and model, not every tick."""
        command, model = self._tau_command, self.model
        cached = self._clipped
        if cached is None or cached[0] is not command or cached[1] is not model:
            tau = np.clip(command, -model.effort_max, model.effort_max)
            joints = [self.joints[i] for i in np.flatnonzero(tau != command)]
            self._clipped = cached = (command, model, tau, joints)
        return cached[2], cached[3]

    def _free_running_tick(self):
        """Integrate the ticks due by now on the steady clock (catching up, at most
        MAX_CATCH_UP), count the late and dropped ones, publish once."""
        now = time.monotonic()
        if self._wall_start is None:
            self._wall_start = self._wall_origin = self._timer_due(now)
        # 1 % of a period of tolerance: a timer firing on time is never counted as early.
        elapsed = (now - self._wall_start) / self.tick_period
        due = int(elapsed + 0.01) + 1 - self.ticks
        if due <= 0:
            return
        if due > MAX_CATCH_UP:
            self.dropped_ticks += due - MAX_CATCH_UP
            self._wall_start += (due - MAX_CATCH_UP) * self.tick_period
            elapsed -= due - MAX_CATCH_UP
            due = MAX_CATCH_UP
        # tick k is late if processed after its due time + one period: k < elapsed - 1
        self.late_ticks += max(0, min(due, math.ceil(elapsed - 1.0) - self.ticks))
        if not self._answered:
            self.unanswered_states += 1
        self.ticks += due
        if self._holding:                 # no command yet: publish the initial state
            if self._publication_due():
                self._publish()
            return
        self._advance(due)

    def spin_free_running(self, executor, running=None):
        """The plant executable's loop when free-running, instead of the timer: sleep
        until the next tick is due, take the commands that arrived meanwhile straight from
        the subscription, tick, and let `executor` serve the rest (parameter services) once
        every SERVICE_PERIOD. Per tick that is one wake-up and no executor wait-set rebuild
        (≈ 0.2 ms each in rclpy; with the timer there were two per tick: the timer and the
        command). Returns when `running()` turns false (a stop request), the context shuts
        down or the integration stopped."""
        take = getattr(self._command_sub.handle, 'take_message', None)
        if take is None:                  # an rclpy without it: the timer does the work
            return
        self._timer.cancel()
        if self._wall_start is None:
            self._wall_start = self._wall_origin = time.monotonic()
        self._grid_stamps = True
        serve_at = time.monotonic()
        running = running or self.context.ok
        while running() and self.context.ok() and not self.stopped:
            delay = self._wall_start + self.ticks * self.tick_period - time.monotonic()
            if delay > 0.0:
                time.sleep(delay)
            try:
                arrival = self._take_commands()
                if arrival is not None and self.publish_on_command:
                    self._lock_phase(arrival)
                self._free_running_tick()
                now = time.monotonic()
                if now >= serve_at:
                    serve_at = now + SERVICE_PERIOD
                    executor.spin_once(timeout_sec=0.0)
            except Exception:  # noqa: B902 - rclpy's RCLError on a context shut down meanwhile
                if self.context.ok():
                    raise
                return                    # another thread shut the context down

    def _take_commands(self):
        """Every command waiting in the subscription's queue, oldest first; the arrival of
        the last one on the steady clock [s] (None if none was waiting)."""
        handle = self._command_sub.handle
        received = None
        with handle:
            taken = handle.take_message(self._command_type, False)
            while taken is not None:
                self._on_command(taken[0])
                received = taken[1].get('received_timestamp') or received
                taken = handle.take_message(self._command_type, False)
        if not received:
            return None
        return received * 1e-9 - (time.time() - time.monotonic())

    def _lock_phase(self, arrival):
        """publish_on_command: the tick grid moved by `phase_shift` (the tick due now and
        the arrival of the last command taken for it)."""
        shift = phase_shift(self._wall_start + self.ticks * self.tick_period, arrival,
                            self.tick_period)
        self._wall_start -= shift
        self._stretch -= shift   # the simulated arm keeps to the wall clock: the tick that
        #                          comes earlier integrates that much less (`_advance`)

    def _timer_due(self, now):
        """The steady time [s] this timer call was due: the timer's next call (rcl keeps
        its calls on the grid start + k·period, skipping missed ones) less one period.
        Tick 0 is due then, so the ticks are due when the timer is, not when this first
        call happened to run: anchored there, every later call that woke up a little less
        late than the first looked early and its tick waited a whole period. (A call that
        runs more than a period after rcl took it gives a negative `until`: the modulo
        keeps the result on the grid.)"""
        until = self._timer.time_until_next_call()
        if until is None:
            return now
        period = round(self.tick_period * 1e9)
        return now - ((-until) % period) * 1e-9

    def _counters(self):
        return (time.monotonic(), self._steps, self.ticks, self.late_ticks,
                self.dropped_ticks, self.unanswered_states, self._stretched)

    def loop_statistics(self):
        """Free-running, since the first command closed the loop (before it: since the
        first tick): ticks, late/dropped ticks, unanswered states, simulated and wall time,
        and their ratio (the real-time factor)."""
        origin = self._closed_at
        if origin is None:
            origin = (self._wall_origin if self._wall_start is not None else time.monotonic(),
                      0, 0, 0, 0, 0, 0.0)
        wall, steps, ticks, late, dropped, unanswered, stretched = (
            b - a for a, b in zip(origin, self._counters()))
        simulated = steps * self.dt + stretched
        return {'closed_loop': self._closed_at is not None, 'ticks': ticks,
                'late_ticks': late, 'dropped_ticks': dropped,
                'unanswered_states': unanswered, 'simulated': simulated, 'wall': wall,
                'real_time_factor': simulated / wall if wall > 0.0 else 0.0}

    def destroy_node(self):
        lock, self.domain_lock = getattr(self, 'domain_lock', None), None
        if lock is not None:          # the domain's simulation lock (`_refuse_a_second_clock`)
            lock.close()
        # getattr: a start-up that failed half-way (bad parameter) has no counters yet
        if getattr(self, 'ticks', 0) and not self.publish_clock:
            stats = self.loop_statistics()
            self.get_logger().info(
                'free-running loop (closed_loop={closed_loop}): {ticks} ticks, '
                '{simulated:.3f} s simulated in {wall:.3f} s wall (real-time factor '
                '{real_time_factor:.4f}), {late_ticks} late (> 1 period), {dropped_ticks} '
                'dropped, {unanswered_states} states unanswered '
                'before the next tick'.format(**stats)
                + (f', {self.held_states} held back (the previous state not yet read: its '
                   'command was written before it was sent)' if self.held_states else ''))
        return super().destroy_node()

    @measured
    def _advance(self, ticks=1):
        """Integrate `ticks` ticks (steps_per_tick steps each, effort held) and publish. On
        simulated time the state at the end of the step, stamped with that time. On the
        wall clock the state when the last tick was due, stamped then (the effort that
        acted until then), and after it the step under the command of now: a state is the
        arm at its stamp, never one a step ahead, and a command acts from the tick that
        took it on."""
        if self.stopped:
            return
        self._take_new_model()
        if self.publish_clock:
            if self._integrate(self.sim_time, ticks):
                self._publish()
            return
        clock_ns = self._tick_stamp_ns()
        if ticks > 1 and not self._integrate(clock_ns * 1e-9, ticks - 1):
            return                          # catching up: to the last tick due
        if self._stretch > 0.0 and not self._integrate_lag():
            return
        if self._publication_due():
            if self._drain_tick():
                self._command_heard = False
            else:               # a grid moved earlier (the stretch < 0 still to come off
                #                 the next ticks): the arm is that much ahead of the tick
                self._publish(clock_ns - min(round(self._stretch * 1e9), 0))
        self._integrate(clock_ns * 1e-9, 1)

    def _integrate(self, now, ticks):
        """`ticks` ticks under the command held at `now`; False if the state diverged
        (integration stopped, said in one line)."""
        tau = self.effort(now)
        if self._brakes_hold(now):         # the joints stay where they are
            self.stop_effort = np.zeros(self.model.n)
            return self._hold(tau, self.steps_per_tick * ticks, self._take_stretch())
        return self._run_engine(tau, self.steps_per_tick * ticks, self._take_stretch())

    def _integrate_lag(self):
        """The tick grid moved later (the phase lock): the wall time it moved, integrated
        before the state is published, under the effort that acted until now; False if the
        state diverged."""
        lag, self._stretch = self._stretch, 0.0
        steps = max(1, math.ceil(lag / self.dt - 1e-9))
        first = lag - (steps - 1) * self.dt      # in (0, dt]
        if self.braked:
            return self._hold(self._tau_applied, steps, first - self.dt)
        return self._run_engine(self._tau_applied, steps, first - self.dt)

    def _hold(self, tau, steps, stretch):
        """Brakes on: time passes, the joints stay where they are."""
        self.qd, self._tau_applied = np.zeros(self.model.n), np.zeros(self.model.n)
        self._steps += steps
        self._stretched += stretch
        return True

    def _run_engine(self, tau, steps, stretch):
        """`steps` steps under `tau`, the first one `stretch` longer; the stops' efforts,
        the divergence check (False: integration stopped, said in one line)."""
        q, qd, stop, peak = self.engine.advance(self.model, self.q, self.qd, tau, steps,
                                                stretch)
        if stop is not None:
            self.stop_effort = stop
            if peak is not None:
                self.stop_peak = np.maximum(self.stop_peak, peak)
            if self.stop_peak.any():
                self._log_first_contacts(q)
        # one vectorised test first (abs(qd) <= limit is False for NaN and inf too)
        if not ((np.abs(qd) <= self.divergence_velocity).all() and np.isfinite(q).all()):
            bad = np.flatnonzero(~(np.isfinite(q) & np.isfinite(qd))
                                 | ~(np.abs(qd) <= self.divergence_velocity))
            self.stopped = True
            self._timer.cancel()
            self.get_logger().error(
                f'state diverged in the step from t = {self._plant_time():.4f} s (joint '
                f'{self.joints[bad[0]]}: '
                f'q = {q[bad[0]]}, qd = {qd[bad[0]]}); integration stopped, nothing more is '
                'published')
            return False
        self.q, self.qd, self._tau_applied = q, qd, tau
        self._steps += steps
        self._stretched += stretch
        self._check_velocity(qd)
        return True

    def _take_stretch(self):
        """The wall time [s] to add to this tick's integration for the moves of the tick
        grid (publish_on_command), at most half a step per tick, the rest carried on."""
        if not self._stretch:
            return 0.0
        stretch = min(max(self._stretch, -0.5 * self.dt), 0.5 * self.dt)
        self._stretch -= stretch
        return stretch

    def _tick_stamp_ns(self):
        """The node clock [ns] when the tick being integrated was due on the grid of the
        plant's own loop (not when the loop woke up for it: that jitter is not the arm's),
        else now."""
        if not self._grid_stamps or self._wall_start is None:
            return self.get_clock().now().nanoseconds
        best = None
        for _ in range(CLOCK_READS):   # the node clock between two steady readings: a
            #                            preemption between two single readings (tens of µs
            #                            under load) would stamp the state that much early
            before = time.monotonic()
            now_ns = self.get_clock().now().nanoseconds
            after = time.monotonic()
            if best is None or after - before < best[0]:
                best = (after - before, now_ns, 0.5 * (before + after))
            if after - before <= CLOCK_READ_SPAN:
                break
        _, now_ns, steady = best
        late = steady - (self._wall_start + (self.ticks - 1) * self.tick_period)
        if late <= 0.0:
            return now_ns
        return now_ns - round(late * 1e9)

    def _drain_tick(self):
        """publish_on_command, the loop closed: True at one answered tick in
        QUEUE_DRAIN_PERIOD, which then publishes no state. topic_based_ros2_control's read()
        takes the oldest state queued (one per cycle): once one state came too late for its
        read, every later read takes a state one cycle old, until a cycle brings none. The
        plant cannot see that queue; a cycle without a state every QUEUE_DRAIN_PERIOD ends
        such a run within that many cycles and otherwise costs one read of a state a cycle
        old (the broadcaster repeats the last one under a new stamp; this package's
        controller takes it for the older measurement it is). Where a command's stamp shows
        that the last state is still waiting (`_last_state_unread`), the tick holds its
        state back at once, and such a run does not start. A tick that finds no command
        (it came late) publishes no state either, and does not wait for it: the command acts
        from the next tick."""
        if not self.publish_on_command or self._closed_at is None:
            return False
        if self._last_state_unread():
            self.held_states += 1
            return True
        self._answers += 1
        return self._answers % QUEUE_DRAIN_PERIOD == 0

    def _last_state_unread(self):
        """The newest command taken was stamped before the plant's last state was sent:
        topic_based_ros2_control stamps its command in write(), after the read() of the
        same cycle, so that read cannot have taken the state; the state waits for the next
        read, and a state sent now would queue behind it (every read a cycle old from then
        on: the backlog the drain ends). Held back, the next read takes the waiting state
        and nothing waits behind it. Only for a command stamped on the plant's system clock
        (within SAME_CLOCK s of it): a command without a stamp, or on simulated time, says
        nothing of the read. A controller that answers each state stamps its command after
        that state was sent, and is never held back."""
        written = self._command_written
        if written is None:
            return False
        now = time.time()
        return abs(now - written) < SAME_CLOCK and written < self._last_sent

    def _publication_due(self):
        """Free-running: always; with publish_on_command once a command has arrived since
        the last state (at most one state a tick however many came), or after
        IDLE_PUBLISH_PERIOD wall s without one."""
        return (not self.publish_on_command or self._command_heard
                or time.monotonic() - self._last_publish_wall >= IDLE_PUBLISH_PERIOD)

    def _log_first_contacts(self, q):
        """One line per joint and stop at the first contact with it (the stop's effort
        acted in this tick or since the last report); /diagnostics reports every one."""
        for i in np.flatnonzero(self.stop_peak):
            lower, upper = self.model.position_min[i], self.model.position_max[i]
            side = ('max' if not math.isfinite(lower) or (
                math.isfinite(upper) and q[i] > 0.5 * (lower + upper)) else 'min')
            if (i, side) in self._stops_met:
                continue
            self._stops_met.add((i, side))
            unit = 'm' if self.model.joint_types[i] == 'prismatic' else 'rad'
            self.get_logger().warning(
                f'joint {self.joints[i]} hit its {"upper" if side == "max" else "lower"} '
                f'mechanical stop (robot.position_{side}[{i}] = '
                f'{getattr(self.model, "position_" + side)[i]:g} {unit}) at '
                f'{self._plant_time():.3f} s: the stop holds it there (said once per stop; '
                '/diagnostics reports each contact)')

    def _brakes_hold(self, now):
        """With brakes: True (engaged) before the first command and while the last one is
        older than command_timeout; logs each engagement and release."""
        if not self.brakes:
            return False
        engaged = not math.isfinite(self._command_time) or (
            self.command_timeout > 0.0
            and now - self._command_time > self.command_timeout + 1e-9)
        if engaged != self.braked:
            self.braked = engaged
            if engaged:
                self.get_logger().warning(
                    f'brakes engaged: no effort command for {now - self._command_time:.3f} s '
                    f'> command_timeout {self.command_timeout:g} s; every joint held still')
            else:
                self.get_logger().info('brakes released: effort command received')
        return engaged

    def _check_velocity(self, qd):
        """|q̇| beyond robot.velocity_max: kept for /diagnostics and warned about."""
        fast = np.abs(qd) > self.model.velocity_max
        if fast.any():
            self.velocity_peak = np.maximum(self.velocity_peak, np.where(fast, np.abs(qd), 0.0))
            i = int(np.flatnonzero(fast)[0])
            log_throttled(
                self, 'warning',
                f'joint {self.joints[i]}: |qd| = {abs(qd[i]):.4g} beyond robot.velocity_max '
                f'{self.model.velocity_max[i]:g}', THROTTLE)

    def _publish(self, clock_ns=None):
        """/clock (with publish_clock) and the state, stamped with simulated time or with
        the node clock (free-running: `clock_ns`, read once per tick)."""
        stamp = self._stamp(clock_ns)
        if self._clock_pub is not None:
            self._clock_pub.publish(ClockMsg(clock=stamp))
        msg = self._state_msg
        msg.header.stamp = stamp
        q, qd = self.measurement_noise.measure(self.q, self.qd)
        msg.position = q.tolist()
        msg.velocity = qd.tolist()
        msg.effort = self._tau_applied.tolist()
        if self.stamp_joint:            # the time of this state, through any restamping
            msg.position.append(stamp.sec + stamp.nanosec * 1e-9)
            msg.velocity.append(1.0)
            msg.effort.append(0.0)
        self._state_pub.publish(msg)
        self._last_publish_wall = time.monotonic()
        self._last_sent = time.time()
        self._awaiting_command = self.publish_clock and self.lockstep
        self._answered = False
        self._command_heard = False

    def _no_first_command_hint(self):
        """Lock-step, no first command LOCKSTEP_HINT wall s after start although a node
        publishes on the command topic: one warning saying the likely cause (a controller in
        control_mode timer on simulated time waits for a clock that only its answer would
        advance)."""
        if self._hinted or time.monotonic() - self._created_wall < LOCKSTEP_HINT:
            return
        publishers = self.count_publishers(self.command_topic)
        if not publishers:
            return
        self._hinted = True
        self.get_logger().warning(
            f'lock-step: {publishers} publisher(s) on {self.command_topic} but no command for '
            f'the state at t = 0 after {LOCKSTEP_HINT:g} s: a controller in control_mode timer '
            'on simulated time never answers a lock-step plant (its timer waits for the clock, '
            'which advances only on an answer); give the controller control_mode: on_state '
            '(config/sim.yaml does), or the plant lockstep: false')

    def _resend(self):
        """Lock-step: the state nobody has answered, published again exactly as it was (the
        same stamp and the same measurement: a fresh noise draw would make it a different
        state, which a controller answers a second time, and the plant would then take that
        second command as the answer to its next state, applying every later command one
        cycle late)."""
        if self._last_publish_wall == -math.inf:     # nothing published yet
            self._publish()
            return
        if self._clock_pub is not None:
            self._clock_pub.publish(ClockMsg(clock=self._state_msg.header.stamp))
        self._state_pub.publish(self._state_msg)
        self._last_publish_wall = time.monotonic()


def phase_shift(due, arrival, period):
    """How much earlier [s] to put a free-running plant's tick grid so that its ticks fall
    PHASE_TARGET periods after the commands arrive, as a fieldbus device locks to its
    master's cycle: PHASE_GAIN of the phase error at each tick, the error wrapped to half a
    period either way (a command that came just after a tick means the tick was a little
    early, not almost a period late: unwrapped, the jitter around the target pulled the grid
    ever earlier and the simulation ran faster than the wall clock). The state answering a
    command then leaves at a steady time after it, whatever phase the two loops started
    with, and a command waits about that long to act. due: steady time [s] the tick is due;
    arrival: of the last command before it."""
    error = (due - arrival) - PHASE_TARGET * period
    return PHASE_GAIN * ((error + 0.5 * period) % period - 0.5 * period)

def _own_loop(node):
    """The free-running loop if the plant runs on the wall clock (not publish_clock, not
    use_sim_time); with publish_clock the executor, after `_refuse_a_second_clock`."""
    if node.publish_clock:
        return lambda executor, running: _refuse_a_second_clock(node, executor, running)
    if node.get_parameter('use_sim_time').value:
        return None
    return node.spin_free_running


def _refuse_a_second_clock(node, executor, running):
    """The plant executable with publish_clock: the domain's simulation lock
    (`runner.lock_domain`: another simulation of this machine starting at the same
    moment), then up to domain_check_wait wall s of discovery (the executor runs
    meanwhile); another /clock publisher on the ROS domain (another simulation, a bag
    played with --clock) raises StartRefused: two simulated clocks on one domain drive
    each other's nodes. domain_check_wait 0: neither."""
    if node.domain_check_wait > 0.0 and getattr(node, 'domain_lock', None) is None:
        node.domain_lock = lock_domain()     # a simulation starting at the same moment
    deadline = time.monotonic() + node.domain_check_wait
    while running() and node.context.ok():
        if node.count_publishers('/clock') > 1:          # ours and another
            raise StartRefused(domain_in_use_message(['/clock']))
        if time.monotonic() >= deadline:
            return
        executor.spin_once(timeout_sec=0.02)


def main(args=None):
    """Entry point `plant`: exits 1 with one log line on a bad parameter file."""
    return run(PlantSimulator, NODE_NAME, args, own_loop_after_the_model(_own_loop))


if __name__ == '__main__':
    sys.exit(main())
