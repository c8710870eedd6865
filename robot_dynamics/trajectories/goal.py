"""The outcome of one control_msgs/FollowJointTrajectory goal, decided cycle by cycle as
ros2_controllers' joint_trajectory_controller (JTC) decides it: pure math, no ROS.

- Tolerances per joint: position, velocity, acceleration; 0 means "not checked". A goal's
  `path_tolerance` / `goal_tolerance` entry overrides the default of its joint per component:
  > 0 sets it, 0 keeps the default, -1 erases it (not checked); anything else is invalid
  (JTC then falls back to the defaults; here the goal is refused, with the field named).
- While the trajectory runs (after its start, before its last point) the path tolerances are
  checked against the tracking error (q_d − q, q̇_d − q̇, q̈_d − q̈): any joint outside ⇒
  PATH_TOLERANCE_VIOLATED. The measured q̈ is the finite difference of the measured
  velocities between two joint states (`AccelerationEstimate`), kept only while a goal has
  an acceleration tolerance.
- From the last point on: SUCCESSFUL once every joint has |q − q_goal|, |q̇| and |q̈| within
  the goal tolerances; GOAL_TOLERANCE_VIOLATED once `goal_time_tolerance` s have passed after the
  last point without that (0: wait for ever, as JTC's `constraints.goal_time` default).

The result codes are control_msgs' `FollowJointTrajectory.Result` constants.
"""

from collections import namedtuple
from dataclasses import dataclass

import numpy as np

from robot_dynamics.trajectories.sampler import (EndsInThePast, finite_number, InvalidJoints,
                                                 TrajectoryRejected)
from robot_dynamics.trajectories.splines import shortest_angle

__all__ = ['SUCCESSFUL', 'INVALID_GOAL', 'INVALID_JOINTS', 'OLD_HEADER_TIMESTAMP',
           'PATH_TOLERANCE_VIOLATED', 'GOAL_TOLERANCE_VIOLATED', 'JointTolerance',
           'StateTolerances', 'GoalOutcome', 'resolve_tolerance', 'joint_tolerances',
           'rejection_code', 'AccelerationEstimate', 'TrajectoryGoalMonitor']

SUCCESSFUL = 0
INVALID_GOAL = -1
INVALID_JOINTS = -2
OLD_HEADER_TIMESTAMP = -3
PATH_TOLERANCE_VIOLATED = -4
GOAL_TOLERANCE_VIOLATED = -5

ERASE = -1.0    # a goal's tolerance value meaning "not checked"

# One entry of a goal's path_tolerance / goal_tolerance (control_msgs/JointTolerance).
JointTolerance = namedtuple('JointTolerance', 'name position velocity acceleration',
                            defaults=(0.0, 0.0, 0.0))


@dataclass(frozen=True)
class StateTolerances:
    """Per-joint tolerances (n,) each, in `joints` order; 0 = not checked."""
    position: np.ndarray
    velocity: np.ndarray
    acceleration: np.ndarray

    @classmethod
    def uniform(cls, n, position=0.0, velocity=0.0, acceleration=0.0):
        return cls(np.full(n, float(position)), np.full(n, float(velocity)),
                   np.full(n, float(acceleration)))


@dataclass(frozen=True)
class GoalOutcome:
    code: int            # SUCCESSFUL, PATH_TOLERANCE_VIOLATED, ...
    text: str            # the result's error_string


def resolve_tolerance(default, value, field):
    """A goal's tolerance `value` over `default` (JTC's rule): > 0 replaces it, 0 keeps it,
    -1 erases it (0 = not checked); NaN, inf or another negative value is refused."""
    value = finite_number(field, value)
    if value > 0.0:
        return value
    if value == 0.0:
        return float(default)
    if abs(value - ERASE) < 1e-7:          # JTC compares with float epsilon
        return 0.0
    raise TrajectoryRejected(f'{field}: {value} is not > 0, 0 (the default) or -1 '
                             '(not checked)')


def joint_tolerances(joints, defaults, entries, field):
    """`defaults` (StateTolerances) with the goal's `entries` (JointTolerance-like: name,
    position, velocity, acceleration) applied; `field` names the list in messages."""
    index = {name: i for i, name in enumerate(joints)}
    resolved = {component: np.array(getattr(defaults, component), dtype=float)
                for component in ('position', 'velocity', 'acceleration')}
    seen = set()
    for k, entry in enumerate(entries):
        name = entry.name
        if name not in index:
            raise TrajectoryRejected(f'{field}[{k}].name: unknown joint {name!r} '
                                     f'(controlled joints: {list(joints)})')
        if name in seen:
            raise TrajectoryRejected(f'{field}[{k}].name: joint {name!r} given twice')
        seen.add(name)
        i = index[name]
        for component, values in resolved.items():
            values[i] = resolve_tolerance(values[i], getattr(entry, component),
                                          f'{field}[{k}].{component} (joint {name!r})')
    return StateTolerances(**resolved)


def rejection_code(rejection):
    """The result code of a goal refused with `rejection` (a TrajectoryRejected)."""
    if isinstance(rejection, InvalidJoints):
        return INVALID_JOINTS
    if isinstance(rejection, EndsInThePast):
        return OLD_HEADER_TIMESTAMP
    return INVALID_GOAL


class AccelerationEstimate:
    """The measured acceleration q̈ [rad/s² | m/s²] as the finite difference of the measured
    velocities of two consecutive joint states: (q̇_k − q̇_k−1) / (t_k − t_k−1), t the time
    each state was received (or stamped). None until two states have been seen."""

    def __init__(self):
        self._t = None
        self._qd = None
        self.value = None

    def update(self, t, qd):
        """Feed the state of time t (a state seen before, same t, changes nothing)."""
        if self._t is not None and t <= self._t:
            if t < self._t:                 # time went back: start again
                self._t, self._qd, self.value = None, None, None
            return self.value
        qd = np.array(qd, dtype=float)
        if self._t is not None:
            self.value = (qd - self._qd) / (t - self._t)
        self._t, self._qd = t, qd
        return self.value


def _violation(errors, tolerances, joints, units):
    """'joint 'j' position error e exceeds t' for the first violated joint, else None."""
    for component, unit in zip(('position', 'velocity', 'acceleration'), units):
        if component not in errors:
            continue
        error = np.asarray(errors[component], dtype=float)
        tolerance = getattr(tolerances, component)
        outside = (tolerance > 0.0) & ~(np.abs(error) <= tolerance)   # NaN error: outside
        if outside.any():
            i = int(np.flatnonzero(outside)[0])
            return (f'joint {joints[i]!r} {component} error {error[i]:.6g} {unit} exceeds '
                    f'{tolerance[i]:.6g}')
    return None


class TrajectoryGoalMonitor:
    """Decides the outcome of one accepted goal from the reference and the measured state.

    joints: the controller's joints; goal_positions (n,): where the trajectory ends (the
    sampler's `goal_positions`); start_time, end_time: when the trajectory starts and reaches
    its last point [s, controller clock]; path, goal: StateTolerances; goal_time_tolerance [s]
    (0 = no limit); continuous (n,) bool: joints whose goal position error is wrapped into
    (−π, π] (the path errors come from a reference the controller already put within half
    a turn of q)."""

    UNITS = ('rad|m', 'rad/s|m/s', 'rad/s^2|m/s^2')

    def __init__(self, joints, goal_positions, start_time, end_time, path, goal,
                 goal_time_tolerance, continuous=None):
        self.joints = tuple(joints)
        self.continuous = (np.zeros(len(self.joints), dtype=bool) if continuous is None
                           else np.asarray(continuous, dtype=bool))
        self._wraps = bool(self.continuous.any())     # checked every cycle: once here
        self.goal_positions = np.array(goal_positions, dtype=float)
        self.start_time = float(start_time)
        self.end_time = float(end_time)
        self.path = path
        self.goal = goal
        self.goal_time_tolerance = float(goal_time_tolerance)
        self._check_path = bool((path.position > 0.0).any() or (path.velocity > 0.0).any()
                                or (path.acceleration > 0.0).any())
        self.acceleration = None
        if (path.acceleration > 0.0).any() or (goal.acceleration > 0.0).any():
            self.acceleration = AccelerationEstimate()

    def check(self, t, q, qd, reference, state_time=None):
        """The outcome at time t (a GoalOutcome), or None while the goal goes on.
        reference: q_d, q̇_d, q̈_d at t (anything with `positions`, `velocities` and
        `accelerations`); state_time: when (q, q̇) was measured (default t), for the
        acceleration estimate when an acceleration tolerance is set."""
        qdd = None
        if self.acceleration is not None:
            qdd = self.acceleration.update(t if state_time is None else state_time, qd)
        if t < self.start_time:
            return None
        if t < self.end_time:
            if not self._check_path:
                return None
            errors = {'position': reference.positions - q, 'velocity': reference.velocities - qd}
            if qdd is not None:
                errors['acceleration'] = reference.accelerations - qdd
            violation = _violation(errors, self.path, self.joints, self.UNITS)
            if violation is None:
                return None
            return GoalOutcome(PATH_TOLERANCE_VIOLATED,
                               f'path_tolerance violated at t = {t - self.start_time:.3f} s '
                               f'of the trajectory: {violation}; holding the position')
        position_error = self.goal_positions - q
        if self._wraps:
            position_error = np.where(self.continuous, shortest_angle(position_error),
                                      position_error)
        errors = {'position': position_error, 'velocity': -np.asarray(qd)}
        if qdd is not None:
            errors['acceleration'] = -qdd
        elif self.acceleration is not None and (self.goal.acceleration > 0.0).any():
            return None                     # no estimate yet: not decided this cycle
        violation = _violation(errors, self.goal, self.joints, self.UNITS)
        if violation is None:
            worst = float(np.max(np.abs(errors['position'])))
            return GoalOutcome(SUCCESSFUL, f'goal reached: max |q_goal - q| = {worst:.3g} '
                                           'rad|m, every joint within the goal tolerance and '
                                           'stopped')
        late = t - self.end_time
        if self.goal_time_tolerance > 0.0 and late > self.goal_time_tolerance:
            return GoalOutcome(GOAL_TOLERANCE_VIOLATED,
                               f'goal_tolerance violated {late:.3f} s after the last point '
                               f'(goal_time_tolerance {self.goal_time_tolerance:g} s): '
                               f'{violation}; holding the position')
        return None
