"""Joint-trajectory sampling with joint_trajectory_controller (JTC) semantics: pure math, no ROS.

A `JointTrajectorySampler` turns accepted `TrajectoryCommand`s (the content of a
`trajectory_msgs/JointTrajectory`) into a reference (q_d, q̇_d, q̈_d) at any time `now`
(float seconds on the controller's clock). The polynomial segments, plans, the stop profile
and the angle wraparound it uses are in `robot_dynamics.trajectories.splines`; this module
holds the sampler and its message types. Conventions (doc/trajectories.md):

- Segments between consecutive knots are polynomials in τ = t − t_k: quintic when the points
  give positions, velocities and accelerations; cubic with positions and velocities; with
  positions only, velocities and accelerations at the points come from a C2 cubic spline
  clamped at the start velocity and at zero end velocity, the first segment is bent to start
  at the current acceleration and the last to end at zero acceleration (so q̈_d is
  continuous everywhere, also at acceptance and at the end).
- Knot 0 is the current reference at the start time (no jump); a point at time_from_start 0
  replaces it (a step, as in JTC).
- A future `start_time` keeps the running reference until then (ROS 1 splicing); the new
  trajectory starts from the old one's state at that time.
- After the last point the reference holds its positions with zero velocity/acceleration.
- A point's `effort` is a feed-forward effort, interpolated linearly between the points (as
  JTC), starting from the feed-forward effort of the current reference; after the last point
  the last point's effort stays, a hold or a stop drops it.
- `interpolation_method` 'none' (JTC's): no interpolation; on [t_k, t_k+1) the reference is
  point k+1 as given (missing velocities and accelerations are zero), before the first point
  the start state with zero acceleration.
- `allow_integration_in_goal_trajectories` (JTC's): points without positions get them (and
  missing velocities) by trapezoidal integration of their velocities (accelerations) from
  the start reference, as JTC's `deduce_from_derivatives`.
- `stop`: to rest at once (hold) or, with `max_deceleration_on_cancel`, along a reference
  per joint whose deceleration never exceeds it (JTC's `decelerate_on_cancel`; here
  jerk-limited, q̈_d continuous, `deceleration_plan`).
- Continuous joints (`continuous`, JTC's angle wraparound): knot 0 of a new trajectory is
  moved by whole turns to within half a turn of its first point, so the joint takes the
  short way; `shortest_angle` wraps position errors into (−π, π] (`at_goal`; the
  controller's law and tolerances).
- Speed scaling (speed_scaling.py): the trajectory's time s advances at a factor f ∈ [0, 1]
  of the controller's time; every method takes controller time and maps it to s, and the
  reference's velocity and acceleration are scaled (f·q_d', f²·q_d'' + ḟ·q_d').
"""

from dataclasses import dataclass

import numpy as np

from robot_dynamics.trajectories.speed_scaling import (check_factor, DEFAULT_RATE_LIMIT,
                                                       scale_derivatives, ScaledTime)
from robot_dynamics.trajectories.splines import (_hold_plan, _Plan, _segments, _StepPlan,
                                                 deceleration_plan, nearest_turn,
                                                 shortest_angle)

__all__ = ['TrajectoryRejected', 'InvalidJoints', 'EndsInThePast', 'OutsideTrajectory',
           'finite_number', 'INTERPOLATION_METHODS',
           'TrajectoryPoint', 'TrajectoryCommand', 'Reference', 'JointTrajectorySampler']


# |position|, |velocity|, |acceleration| beyond this [rad, m, s]: rejected (larger finite
# values overflow the segment polynomials to inf and NaN).
MAX_ABS_VALUE = 1.0e6
# A last point's velocity counts as non-zero beyond this (JTC compares with float epsilon).
FLOAT_EPSILON = float(np.finfo(np.float32).eps)
INTERPOLATION_METHODS = ('splines', 'none')


class TrajectoryRejected(ValueError):
    """A trajectory that cannot be executed; the message names the field, index and joint."""


class InvalidJoints(TrajectoryRejected):
    """Rejected for its joint names: unknown, duplicate, missing or none."""


class EndsInThePast(TrajectoryRejected):
    """Rejected because its header stamp puts the whole trajectory in the past."""


class OutsideTrajectory(ValueError):
    """`JointTrajectorySampler.query` at a time the current trajectory does not cover; the
    message says why. `reference`: what JTC's ~/query_state then returns, the reference
    held at that time (at or after the last point, or while holding), or None before the
    trajectory's start (JTC then returns the measured state)."""

    def __init__(self, message, reference=None):
        super().__init__(message)
        self.reference = reference


@dataclass(frozen=True)
class TrajectoryPoint:
    time_from_start: float
    positions: tuple
    velocities: tuple = ()
    accelerations: tuple = ()
    effort: tuple = ()


@dataclass(frozen=True)
class TrajectoryCommand:
    joint_names: tuple
    points: tuple                       # of TrajectoryPoint
    start_time: float = 0.0             # header.stamp in seconds; 0.0 means "start now"

    @classmethod
    def from_message(cls, msg):
        """From a trajectory_msgs/JointTrajectory (duck-typed: no ROS import here)."""
        stamp = msg.header.stamp
        points = tuple(
            TrajectoryPoint(_seconds(p.time_from_start), tuple(p.positions),
                            tuple(p.velocities), tuple(p.accelerations),
                            tuple(getattr(p, 'effort', ())))
            for p in msg.points)
        return cls(tuple(msg.joint_names), points, _seconds(stamp))


def _seconds(stamp):
    return stamp.sec + stamp.nanosec * 1e-9


@dataclass(frozen=True)
class Reference:
    positions: np.ndarray               # (n,) in the sampler's `joints` order
    velocities: np.ndarray
    accelerations: np.ndarray
    effort: np.ndarray = None           # (n,) feed-forward effort of the points, or None
    speed_scaling_factor: float = 1.0   # f in effect at that time


PAUSED = 1e-3       # a speed scaling factor at most this: a stop holds at once

# --- the sampler -------------------------------------------------------------------------

class JointTrajectorySampler:
    """Reference generator for the joints `joints`, with JTC's topic semantics
    (see the module docstring and doc/trajectories.md). Call `hold` once before use."""

    def __init__(self, joints, position_min=None, position_max=None,
                 allow_partial_joints_goal=False, allow_nonzero_velocity_at_trajectory_end=True,
                 interpolation_method='splines', allow_integration_in_goal_trajectories=False,
                 max_deceleration_on_cancel=None,
                 speed_scaling_factor=1.0, speed_scaling_rate_limit=DEFAULT_RATE_LIMIT,
                 continuous=None):
        self.joints = tuple(str(j) for j in joints)
        if not self.joints or len(set(self.joints)) != len(self.joints):
            raise ValueError(f'joints: expected unique names, got {list(self.joints)}')
        self.n = len(self.joints)
        self._index = {name: i for i, name in enumerate(self.joints)}
        self.position_min = self._limit('position_min', position_min, -np.inf)
        self.position_max = self._limit('position_max', position_max, np.inf)
        for j in range(self.n):
            if not self.position_min[j] <= self.position_max[j]:
                raise ValueError(f'position_min[{j}] > position_max[{j}] '
                                 f'(joint {self.joints[j]!r})')
        self.allow_partial_joints_goal = bool(allow_partial_joints_goal)
        self.allow_nonzero_velocity_at_trajectory_end = bool(
            allow_nonzero_velocity_at_trajectory_end)
        if interpolation_method not in INTERPOLATION_METHODS:
            raise ValueError(f'interpolation_method: expected one of {INTERPOLATION_METHODS}, '
                             f'got {interpolation_method!r}')
        self.interpolation_method = interpolation_method
        self.allow_integration_in_goal_trajectories = bool(
            allow_integration_in_goal_trajectories)
        self.max_deceleration_on_cancel = None
        if max_deceleration_on_cancel is not None:
            decel = self._limit('max_deceleration_on_cancel', max_deceleration_on_cancel, 0.0)
            if not (np.isfinite(decel) & (decel > 0.0)).all():
                raise ValueError(f'max_deceleration_on_cancel: expected {self.n} finite '
                                 f'values > 0, got {list(decel)}')
            self.max_deceleration_on_cancel = decel
        self.continuous = np.zeros(self.n, dtype=bool)
        if continuous is not None:
            flags = np.asarray(continuous).reshape(-1)
            if flags.shape != (self.n,) or flags.dtype != bool:
                raise ValueError(f'continuous: expected {self.n} booleans, got {continuous!r}')
            self.continuous = flags.copy()
        self.continuous.setflags(write=False)
        self._wraps = bool(self.continuous.any())     # checked every cycle: once here
        self._plan = None
        self.scaled_time = ScaledTime(speed_scaling_factor, speed_scaling_rate_limit)
        self._deferred_factor = None        # a factor that came during a stop

    def _limit(self, name, values, default):
        if values is None:
            return np.full(self.n, default)
        array = np.asarray(values, dtype=float).reshape(-1)
        if array.shape != (self.n,) or np.isnan(array).any():
            raise ValueError(f'{name}: expected {self.n} numbers (inf allowed), got {values!r}')
        return array

    # -- state --

    def outside_limits(self, positions):
        """[(joint index, how far beyond (> 0 above position_max, < 0 below position_min))]
        of the joints of `positions` (n,) outside their limits."""
        q = np.asarray(positions, dtype=float).reshape(-1)
        over, under = q - self.position_max, q - self.position_min
        return [(int(j), float(over[j]) if over[j] > 0.0 else float(under[j]))
                for j in np.flatnonzero((over > 0.0) | (under < 0.0))]

    def describe_outside(self, positions):
        """The joints of `positions` outside their limits in words ('' if none): 'joint_3
        at 1.5708, 0.7854 above position_max 0.7854'."""
        q = np.asarray(positions, dtype=float).reshape(-1)
        return ', '.join(self._beyond(j, q[j], d) for j, d in self.outside_limits(q))

    def _beyond(self, j, value, distance):
        return (f'{self.joints[j]} at {value:.6g}, {abs(distance):.4g} '
                + (f'above position_max {self.position_max[j]:.6g}' if distance > 0.0
                   else f'below position_min {self.position_min[j]:.6g}'))

    def hold(self, positions, now):
        """Hold `positions` (zero velocity and acceleration); cancels any trajectory."""
        array = np.asarray(positions, dtype=float).reshape(-1)
        if array.shape != (self.n,):
            raise ValueError(f'hold positions: expected {self.n} values, got {array.size}')
        bad = np.flatnonzero(~np.isfinite(array))
        if bad.size:
            j = int(bad[0])
            raise ValueError(f'hold positions[{j}] (joint {self.joints[j]!r}): not finite')
        self.scaled_time.start(float(now))
        self._plan = _hold_plan(array, self.trajectory_time(now))

    def stop(self, now, positions=None, velocities=None):
        """Bring the reference to rest from (positions, velocities), by default the
        reference's own at `now`: along `deceleration_plan` with max_deceleration_on_cancel
        (JTC's decelerate_on_cancel), else held at those positions at once. Cancels any
        trajectory; drops the feed-forward effort.

        Under speed scaling the stop runs in trajectory time like any trajectory (JTC's stop
        trajectory too), with the factor f0 of `now` frozen until the stop is over (a factor
        arriving meanwhile applies then) and the deceleration limit divided by f0², so that
        on the clock it starts from the reference's (or the measured) velocity, decelerates
        within max_deceleration_on_cancel and covers the distance that velocity needs; a
        paused reference (f0 ≈ 0, at rest on the clock) is held where it stands."""
        clock = float(now)
        now, f0, _ = self.scaled_time.at(clock)
        plan = self._require_plan()
        plan.prune(now)
        p_ref, v_ref, a_ref = plan.sample(now)
        p = p_ref if positions is None else self._state_vector('stop positions', positions)
        if self.max_deceleration_on_cancel is None:
            self._plan = _hold_plan(p, now)
            return
        if velocities is None:              # from the reference: q̈_d stays continuous
            v, a = v_ref, a_ref
        else:                               # from a measured state (no acceleration)
            v, a = self._state_vector('stop velocities', velocities), None
            v = v / f0 if f0 > PAUSED else v
        if f0 <= PAUSED:                    # at rest on the clock already
            v, a = np.zeros(self.n), None
        else:
            self.scaled_time.request(f0, clock)     # freeze: ḟ = 0 during the stop
        self._plan = deceleration_plan(p, v, self.max_deceleration_on_cancel
                                       / max(f0, PAUSED) ** 2, now, a)
        self._plan.freezes_factor = True

    def _state_vector(self, name, values):
        array = np.array(values, dtype=float).reshape(-1)
        if array.shape != (self.n,) or not np.isfinite(array).all():
            raise ValueError(f'{name}: expected {self.n} finite values, got {values!r}')
        return array

    def settle(self):
        """The current trajectory's goal is reached: cmd_timeout no longer applies to it
        (JTC holds the last point once an action goal succeeds)."""
        self._require_plan().armed = False

    def command_timed_out(self, now, cmd_timeout):
        """True when an accepted trajectory (not a hold, a stop or a settled one) ended more
        than cmd_timeout s ago (JTC's cmd_timeout, counted from the last point in trajectory
        time, as JTC); 0 = never."""
        plan = self._plan
        return (plan is not None and plan.armed and cmd_timeout > 0.0
                and self.trajectory_time(now) - plan.end > cmd_timeout)

    def sample(self, now):
        plan = self._require_plan()
        s, f, fdot = self.scaled_time.at(float(now))
        if self._deferred_factor is not None and self._apply_deferred_factor(plan, s, now):
            s, f, fdot = self.scaled_time.at(float(now))
        plan.prune(s)
        q, qd, qdd = plan.sample(s)
        qd, qdd = scale_derivatives(qd, qdd, f, fdot)
        return Reference(np.array(q, dtype=float), np.array(qd, dtype=float),
                         np.array(qdd, dtype=float), plan.effort_at(s), f)

    def accelerations(self, now):
        """q̈_d (n,) at controller time `now`, without changing anything (no pruning, no
        deferred speed-scaling factor applied): for a prediction over an interval, whose
        mean acceleration is that at its middle."""
        plan = self._require_plan()
        s, f, fdot = self.scaled_time.at(float(now))
        _, qd, qdd = plan.sample(s)
        return np.array(scale_derivatives(qd, qdd, f, fdot)[1], dtype=float)

    # -- speed scaling --

    def trajectory_time(self, now):
        """The trajectory time s at controller time `now` (= now without speed scaling)."""
        return self.scaled_time.at(float(now))[0]

    def trajectory_start(self, start_time, now):
        """The trajectory time at which a trajectory stamped `start_time` (0: now) received
        at controller time `now` starts: the wait until a future stamp passes in trajectory
        time too, as in JTC."""
        s_now = self.trajectory_time(now)
        start_time = float(start_time)
        if start_time <= 0.0:
            return s_now
        return start_time if s_now == now else s_now + (start_time - now)

    def set_speed_scaling_factor(self, factor, now):
        """Move the speed scaling factor from its value at `now` towards `factor` at the
        rate limit; ValueError (nothing changes) unless factor is a finite number in [0, 1].
        During a stop (see `stop`) the factor is kept and this one applies after it."""
        plan = self._plan
        if (getattr(plan, 'freezes_factor', False) and now is not None
                and self.trajectory_time(now) < plan.end):
            self._deferred_factor = check_factor(factor)
            return
        self._deferred_factor = None
        self.scaled_time.request(factor, now)

    def _apply_deferred_factor(self, plan, s, now):
        """After a stop (or once another plan replaced it): the factor that came during it."""
        if getattr(plan, 'freezes_factor', False) and s < plan.end:
            return False
        factor, self._deferred_factor = self._deferred_factor, None
        self.scaled_time.request(factor, now)
        return True

    def speed_scaling_factor(self, now):
        return self.scaled_time.factor(float(now))

    def query(self, t):
        """The reference of the current trajectory at time t, without changing anything
        (the trajectory's start, replaced plans and what `sample` prunes stay as they are;
        safe beside a concurrent `sample`, `accept` or `hold`). As ros2_controllers'
        joint_trajectory_controller answers its ~/query_state: only t in [start, last point)
        of the trajectory being (or last) followed; OutsideTrajectory otherwise, and while
        holding a position (before any trajectory, after a stop)."""
        plan = self._require_plan()         # one read: a concurrent accept swaps the whole plan
        t = float(t)
        s, f, fdot = self.scaled_time.at(t)
        when = f'time {t:.6f} s' if s == t else (f'time {t:.6f} s (trajectory time {s:.6f} s '
                                                 'under speed scaling)')
        if not s >= plan.start:             # NaN too
            raise OutsideTrajectory(f'{when} is before the start of the current '
                                    f'trajectory ({plan.start:.6f} s)')
        if plan.hold:
            raise OutsideTrajectory('no trajectory: holding a position (none accepted since, '
                                    'or stopped)', self._reference(plan, s, f, fdot))
        if s >= plan.end:
            raise OutsideTrajectory(f'{when} is not before the last point of the '
                                    f'current trajectory ({plan.end:.6f} s)',
                                    self._reference(plan, s, f, fdot))
        return self._reference(plan, s, f, fdot)  # s >= start: the replaced plan is not used

    @staticmethod
    def _reference(plan, s, f, fdot):
        q, qd, qdd = plan.sample(s)
        qd, qdd = scale_derivatives(qd, qdd, f, fdot)
        return Reference(np.array(q, dtype=float), np.array(qd, dtype=float),
                         np.array(qdd, dtype=float), plan.effort_at(s), f)

    def status(self, now):
        """'holding' | 'waiting' (future start) | 'running' | 'finished'."""
        plan = self._require_plan()
        if plan.hold:
            return 'holding'
        s = self.trajectory_time(now)
        if s < plan.start:
            return 'waiting'
        return 'running' if s < plan.end else 'finished'

    @property
    def plan(self):
        """The plan in effect: a new object with every accept, hold and stop."""
        return self._plan

    @property
    def goal_positions(self):
        """Where the reference will end up: the last point (or the held positions)."""
        return self._require_plan().final.copy()

    def at_goal(self, q, qd, now, goal_tolerance, stopped_velocity_tolerance):
        """True after the last point when every joint has |q − goal| ≤ goal_tolerance and
        |q̇| ≤ stopped_velocity_tolerance (scalars or per joint; as in JTC a tolerance of 0
        is not enforced)."""
        if self.status(now) in ('waiting', 'running'):
            return False
        q = np.asarray(q, dtype=float).reshape(-1)
        qd = np.asarray(qd, dtype=float).reshape(-1)
        if q.shape != (self.n,) or qd.shape != (self.n,):
            raise ValueError(f'at_goal: q and qd need {self.n} values, got {q.size}, {qd.size}')
        if type(goal_tolerance) is float and type(stopped_velocity_tolerance) is float:
            return self._at_goal_scalar(q, qd, goal_tolerance, stopped_velocity_tolerance)
        goal_tol = np.asarray(goal_tolerance, dtype=float)
        vel_tol = np.asarray(stopped_velocity_tolerance, dtype=float)
        for name, tol in (('goal_tolerance', goal_tol), ('stopped_velocity_tolerance', vel_tol)):
            if tol.ndim > 1 or tol.size not in (1, self.n):
                raise ValueError(f'at_goal: {name} needs 1 or {self.n} values, got {tol.size}')
        position_ok = (goal_tol <= 0.0) | (np.abs(self.position_error(self._plan.final, q))
                                           <= goal_tol)
        velocity_ok = (vel_tol <= 0.0) | (np.abs(qd) <= vel_tol)
        return bool((position_ok & velocity_ok).all())

    def _at_goal_scalar(self, q, qd, goal_tol, vel_tol):
        """`at_goal` with one tolerance for all joints (the controller's case, every cycle
        while holding): on lists of floats, a few µs instead of ~20 with numpy."""
        error = (self.position_error(self._plan.final, q) if self._wraps
                 else q - self._plan.final)
        if not goal_tol <= 0.0 and not all(abs(e) <= goal_tol     # NaN tolerance: never
                                           for e in error.tolist()):
            return False
        return vel_tol <= 0.0 or all(abs(v) <= vel_tol for v in qd.tolist())

    def position_error(self, desired, actual):
        """desired − actual (n,), wrapped into (−π, π] for the continuous joints."""
        error = np.asarray(desired, dtype=float) - np.asarray(actual, dtype=float)
        if self._wraps:
            error = np.where(self.continuous, shortest_angle(error), error)
        return error

    def near(self, positions, q):
        """`positions` (n,) with each continuous joint's moved by whole turns to within
        half a turn of `q` (so that positions − q is the wrapped error); the array itself
        without continuous joints."""
        if not self._wraps:
            return positions
        q = np.asarray(q, dtype=float)
        return np.where(self.continuous, q + self.position_error(positions, q), positions)

    def _require_plan(self):
        if self._plan is None:
            raise RuntimeError('JointTrajectorySampler: no reference yet, call hold() first')
        return self._plan

    # -- accepting trajectories --

    def accept(self, command, now, check=None):
        """Validate and install `command`; raises TrajectoryRejected and changes nothing
        if it is invalid. An empty trajectory stops: hold the current reference position.
        `check(plan)`, if given, sees the new plan (`times`, `coefficients`, ...) before it
        is installed and may refuse it by raising TrajectoryRejected."""
        if self._plan is None:
            raise TrajectoryRejected('no current reference yet (joint states not received)')
        now = float(now)
        s_now = self.trajectory_time(now)
        if not command.points:              # stop (ROS 1 JTC), whatever joint_names says
            self.stop(now)
            return
        start_time = finite_number('start_time', command.start_time)
        if start_time < 0.0:
            raise TrajectoryRejected(f'start_time: {start_time} s is negative')
        columns = self._columns(command.joint_names)
        reference = np.asarray(self._plan.sample(
            max(self.trajectory_start(start_time, now), s_now))[0], dtype=float)
        self._check_start(columns, reference)
        times, fields = self._points(command, columns, reference)
        start = start_time if start_time > 0.0 else now
        if start + times[-1] < now:
            raise EndsInThePast(
                f'start_time: the trajectory ends at {start + times[-1]:.6f} s, in the past '
                f'(now {now:.6f} s)')
        plan = self._new_plan(self.trajectory_start(start_time, now), times, fields,
                              command, columns, s_now)
        if check is not None:
            check(plan)
        self._plan.prune(s_now)
        self.scaled_time.forget_before(now)
        self._plan = plan

    def _columns(self, joint_names):
        """Index into `joints` of each message column; rejects unknown/duplicate/missing."""
        names = tuple(joint_names)
        if not names:
            raise InvalidJoints('joint_names: empty')
        columns, seen = [], set()
        for i, name in enumerate(names):
            if name not in self._index:
                raise InvalidJoints(f'joint_names[{i}]: unknown joint {name!r} '
                                         f'(controlled joints: {list(self.joints)})')
            if name in seen:
                raise InvalidJoints(f'joint_names[{i}]: duplicate joint {name!r}')
            seen.add(name)
            columns.append(self._index[name])
        missing = [j for j in self.joints if j not in seen]
        if missing and not self.allow_partial_joints_goal:
            raise InvalidJoints(f'joint_names: joints {missing} missing and '
                                     'allow_partial_joints_goal is false')
        return columns

    def _points(self, command, columns, reference=None):
        """(times (m,), {field: (m, c) array or None}) for positions, velocities,
        accelerations and effort; `reference`: the positions the trajectory starts from
        (named in a rejection)."""
        width = len(columns)
        times = np.empty(len(command.points))
        integrate = self.allow_integration_in_goal_trajectories
        fields = {'positions': [], 'velocities': [], 'accelerations': [], 'effort': []}
        for k, point in enumerate(command.points):
            times[k] = finite_number(f'points[{k}].time_from_start', point.time_from_start)
            if k == 0 and times[k] < 0.0:
                raise TrajectoryRejected(f'points[0].time_from_start: {times[k]} s is negative')
            if k > 0 and times[k] <= times[k - 1]:
                raise TrajectoryRejected(
                    f'points[{k}].time_from_start: {times[k]} s is not after points[{k - 1}] '
                    f'({times[k - 1]} s); times must strictly increase')
            for field, values in fields.items():
                values.append(self._vector(command, k, field, width,
                                           field == 'positions' and not integrate))
        arrays = {field: self._array(command, field, values) for field, values in fields.items()}
        if arrays['positions'] is None:     # allow_integration_in_goal_trajectories
            if arrays['velocities'] is None and arrays['accelerations'] is None:
                raise TrajectoryRejected('points[0]: no positions, velocities or '
                                         'accelerations')
        else:
            if arrays['accelerations'] is not None and arrays['velocities'] is None:
                raise TrajectoryRejected('points[0].accelerations: given without velocities')
            self._check_limits(arrays['positions'], columns, reference)
        self._check_final_velocity(arrays['velocities'], command, columns)
        return times, arrays

    def _vector(self, command, k, field, width, required):
        values = getattr(command.points[k], field)
        if values is None or (len(values) == 0 and not required):
            return None
        try:
            array = np.asarray(values, dtype=float).reshape(-1)
        except (TypeError, ValueError):
            raise TrajectoryRejected(f'points[{k}].{field}: not numbers: {values!r}') from None
        if array.shape != (width,):
            raise TrajectoryRejected(f'points[{k}].{field}: {array.size} values for '
                                     f'{width} joints')
        return array

    @staticmethod
    def _array(command, field, values):
        """(m, c) array of one field: given for every point or for none, all finite."""
        given = [v is not None for v in values]
        if not any(given):
            return None
        if not all(given):
            k = given.index(False)
            first = given.index(True)
            raise TrajectoryRejected(f'points[{k}].{field}: empty but points[{first}] has '
                                     f'{field}; give {field} for every point or for none')
        array = np.array(values)
        bad = np.argwhere(~(np.abs(array) <= MAX_ABS_VALUE))      # NaN compares false
        if bad.size:
            k, i = (int(x) for x in bad[0])
            value = array[k, i]
            why = (f'not finite ({value})' if not np.isfinite(value)
                   else f'{value} is beyond +-{MAX_ABS_VALUE:g}')
            raise TrajectoryRejected(f'points[{k}].{field}[{i}] (joint '
                                     f'{command.joint_names[i]!r}): {why}')
        return array

    def _check_start(self, columns, reference):
        """A joint whose reference at the start is outside its limits must be named (the
        points, all inside the limits, then bring it back); one left out would stay there."""
        named = set(columns)
        for j, distance in self.outside_limits(reference):
            if j not in named:
                raise TrajectoryRejected(
                    f'joint_names: joint {self.joints[j]!r} is outside its limits '
                    f'({self._beyond(j, reference[j], distance)}) and the trajectory leaves '
                    f'it out; name it with points inside [{self.position_min[j]}, '
                    f'{self.position_max[j]}] to bring it back')

    def _check_limits(self, positions, columns, reference=None):
        low, high = self.position_min[columns], self.position_max[columns]
        outside = (positions < low) | (positions > high)
        if outside.any():
            k, i = (int(x) for x in np.argwhere(outside)[0])
            j = columns[i]
            where = ''
            if reference is not None:
                distance = dict(self.outside_limits(reference)).get(j)
                if distance is not None:
                    where = (f'; the joint starts outside its limits '
                             f'({self._beyond(j, reference[j], distance)}): every point '
                             'must be inside them, the trajectory then brings it back')
            raise TrajectoryRejected(
                f'points[{k}].positions[{i}] (joint {self.joints[j]!r}): {positions[k, i]} '
                f'outside [{self.position_min[j]}, {self.position_max[j]}]' + where)

    def _check_final_velocity(self, velocities, command, columns):
        if velocities is None or self.allow_nonzero_velocity_at_trajectory_end:
            return
        moving = np.flatnonzero(np.abs(velocities[-1]) > FLOAT_EPSILON)
        if moving.size:
            i = int(moving[0])
            raise TrajectoryRejected(
                f'points[{len(velocities) - 1}].velocities[{i}] (joint '
                f'{command.joint_names[i]!r}): {velocities[-1, i]} is non-zero at the '
                'trajectory end and allow_nonzero_velocity_at_trajectory_end is false')

    def _new_plan(self, start, times, fields, command, columns, now):
        """Knot 0 is the current reference at t0 = max(start, now); points before t0 are
        dropped and a point exactly at t0 replaces knot 0 (a step, as in JTC)."""
        t0 = max(start, now)
        absolute = start + times
        keep = absolute >= t0
        p_ref, v_ref, a_ref = (np.array(x, dtype=float) for x in self._plan.sample(t0))
        e_ref = self._plan.effort_at(t0)
        fields = {name: None if values is None else values[keep]
                  for name, values in fields.items()}
        knot_times = absolute[keep]
        if fields['positions'] is None:
            self._integrate(fields, knot_times, t0, p_ref[columns], v_ref[columns],
                            a_ref[columns], columns)
        knots_p = self._widen(fields['positions'], columns, p_ref)
        if self._wraps and len(knots_p):      # the short way to the first point
            turn = self.continuous & self._named(columns)
            p_ref = np.where(turn, nearest_turn(p_ref, knots_p[0]), p_ref)
        knots_v, knots_a, knots_e = (
            None if fields[name] is None else self._widen(fields[name], columns, 0.0)
            for name in ('velocities', 'accelerations', 'effort'))
        from_start = bool(keep.all()) and knot_times[0] > t0
        if knot_times[0] == t0:                 # time_from_start 0: replaces knot 0
            p_ref = knots_p[0]
            v_ref = knots_v[0] if knots_v is not None else np.zeros(self.n)
            a_ref = knots_a[0] if knots_a is not None else np.zeros(self.n)
            e_ref = knots_e[0] if knots_e is not None else None
            knot_times, knots_p = knot_times[1:], knots_p[1:]
            knots_v = None if knots_v is None else knots_v[1:]
            knots_a = None if knots_a is None else knots_a[1:]
            knots_e = None if knots_e is None else knots_e[1:]
        previous = self._plan if t0 > now else None
        final = knots_p[-1] if len(knots_p) else p_ref
        times = np.concatenate([[t0], knot_times])
        p = np.vstack([p_ref, knots_p])
        e = None
        if knots_e is not None:
            e = np.vstack([np.zeros(self.n) if e_ref is None else e_ref, knots_e])
        if self.interpolation_method == 'none':
            zero = np.zeros((len(knot_times), self.n))
            v = np.vstack([v_ref, zero if knots_v is None else knots_v])
            a = np.vstack([np.zeros(self.n), zero if knots_a is None else knots_a])
            return _StepPlan(times, (p, v, a), final.copy(), previous, e, from_start)
        v = None if knots_v is None else np.vstack([v_ref, knots_v])
        a = None if knots_a is None else np.vstack([a_ref, knots_a])
        coefficients = _segments(times, p, v, a, v_ref, a_ref)
        return _Plan(times, coefficients, final.copy(), previous, effort=e)

    def _integrate(self, fields, times, t0, p0, v0, a0, columns):
        """allow_integration_in_goal_trajectories: positions (and velocities, if missing)
        of the points from their velocities (accelerations), by the trapezoidal rule from
        the start reference (p0, v0, a0 at t0), as JTC's deduce_from_derivatives."""
        velocities, accelerations = fields['velocities'], fields['accelerations']
        m = len(times)
        positions = np.empty((m, len(columns)))
        derived_v = velocities is None
        if derived_v:
            velocities = np.empty_like(positions)
        p, v, a, t = p0, v0, a0, t0
        for k in range(m):
            h = times[k] - t
            a_k = accelerations[k] if accelerations is not None else np.zeros_like(p)
            if derived_v:
                velocities[k] = v + 0.5 * (a + a_k) * h
            positions[k] = p + 0.5 * (v + velocities[k]) * h
            p, v, a, t = positions[k], velocities[k], a_k, times[k]
        bad = np.argwhere(~(np.abs(positions) <= MAX_ABS_VALUE))
        if bad.size:
            k, i = (int(x) for x in bad[0])
            raise TrajectoryRejected(f'points[{k}].positions[{i}]: integrated to '
                                     f'{positions[k, i]}, beyond +-{MAX_ABS_VALUE:g}')
        self._check_limits(positions, columns)
        fields['positions'] = positions
        fields['velocities'] = velocities

    def _named(self, columns):
        named = np.zeros(self.n, dtype=bool)
        named[columns] = True
        return named

    def _widen(self, values, columns, fill):
        """(m, c) message columns -> (m, n) in `joints` order; missing joints get `fill`."""
        full = np.empty((values.shape[0], self.n))
        full[:] = fill
        full[:, columns] = values
        return full


def finite_number(field, value):
    """float(value), or TrajectoryRejected naming `field` for a non-number or NaN/inf."""
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise TrajectoryRejected(f'{field}: not a number: {value!r}') from None
    if not np.isfinite(number):
        raise TrajectoryRejected(f'{field}: not finite ({number})')
    return number
