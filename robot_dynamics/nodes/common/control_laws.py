"""The controller's choice of control law (`control_law`) and its parameters: declaration,
validation of live changes, building the law, and what happens at a switch.

- `computed_torque` (default): the [LEE] computed-torque law with `gains.kp`, `gains.kd`.
- `gravity_compensation`: τ = g(q) − D q̇ (`gravity_compensation.damping`); the arm floats.
- `joint_impedance`: a joint spring-damper around the joint reference (the trajectory
  sampler's, as computed torque), plus g(q) (`joint_impedance.*`).
- `cartesian_impedance`: a spring-damper at the tool frame around `~/target_pose`
  (`cartesian.*`).

A switch is taken by the next control cycle, without a jump of the effort at rest: a joint
law starts by holding the measured position (a running trajectory continues when switching
between the two joint-reference laws), a Cartesian law holds the measured tool pose.
`effort_rate_limit` bounds |Δτ|/Δt after saturation under every law (the maths of the laws:
doc/control-laws.md). Nothing here runs in a computed-torque cycle without a rate limit.
"""

import math

import numpy as np

from robot_dynamics import control, parameters
from robot_dynamics.nodes.common.ros_params import ConfigurationError, declare
from robot_dynamics.parameters.controller import CONTROLLER, FEEDFORWARDS, LAWS  # noqa: F401

JOINT_REFERENCE_LAWS = ('computed_torque', 'joint_impedance')    # follow joint trajectories
DEFAULT_BASE_FRAME = 'base_link'
# Default stiffnesses: the computed-torque default's kp = 100 1/s² (10 rad/s natural
# frequency, well inside a 100 Hz loop) times the inertia each axis feels at the middle of
# the position limits (0 where unlimited): joint i M_ii; Cartesian: the smallest effective
# mass (inertia) 1 / (J M⁻¹ Jᵀ)_ii of the translational (rotational) axes (Khatib 1987).
# Values from the effort limits or fixed numbers would not do: a PUMA 560's last link feels
# 4e-5 kg m², a stiffness of franka_ros's 10 N m/rad makes that axis unstable at 100 Hz.
NATURAL_FREQUENCY = 10.0                # rad/s


def reference_posture(model):
    low = np.asarray(model.position_min, dtype=float)
    high = np.asarray(model.position_max, dtype=float)
    bounded = np.isfinite(low) & np.isfinite(high)
    return np.where(bounded, 0.5 * (np.where(bounded, low, 0.0) + np.where(bounded, high, 0.0)),
                    0.0)


def _rounded(values):
    return [float(f'{v:.3g}') for v in values]


def default_joint_stiffness(model):
    from robot_dynamics import dynamics
    inertia = np.diag(dynamics.mass_matrix(model, reference_posture(model)))
    return _rounded(NATURAL_FREQUENCY ** 2 * inertia)


def default_cartesian_stiffness(model):
    from robot_dynamics import dynamics
    from robot_dynamics.dynamics import kinematics
    q = reference_posture(model)
    J = kinematics.jacobian(model, q)
    mobility = np.einsum('ij,ji->i', J, np.linalg.solve(dynamics.mass_matrix(model, q), J.T))
    lightest = [max(mobility[:3].max(), 1e-12), max(mobility[3:].max(), 1e-12)]
    return _rounded(np.repeat(NATURAL_FREQUENCY ** 2 / np.array(lightest), 3))


# ---------------------------------------------------------------- validation
# The rules (type, length, range, choices) and descriptions are the table's
# (robot_dynamics/parameters/controller.py); here only what the law needs beyond them.

def _tool(value):
    """None or 7 values x y z qx qy qz qw (a unit quaternion) -> 4x4."""
    if value is None:
        return None
    quaternion = np.array(value[3:])
    norm = float(np.linalg.norm(quaternion))
    if abs(norm - 1.0) > 1e-3:
        raise ConfigurationError(f'cartesian.tool[3:7]: the quaternion (x y z w) must have '
                                 f'norm 1, got {norm:.6g}')
    from robot_dynamics.dynamics import kinematics
    transform = np.eye(4)
    transform[:3, :3] = kinematics.matrix_from_quaternion(quaternion / norm)
    transform[:3, 3] = value[:3]
    return transform


def _rate_limit(value):
    """None (no limit) when empty or all zero."""
    return None if value is None or not np.any(np.asarray(value) > 0.0) else np.array(value)


def _array(value):
    return None if value is None else np.array(value)


_GROUPS = ('gravity_compensation', 'joint_impedance', 'cartesian')
# the law parameters, in the table's order
PARAMETERS = {entry.name: entry for entry in CONTROLLER
              if entry.name in ('control_law', 'effort_rate_limit')
              or entry.name.partition('.')[0] in _GROUPS}
# name -> default(model), for the defaults computed from the model (FROM_MODEL)
MODEL_DEFAULTS = {'joint_impedance.stiffness': default_joint_stiffness,
                  'cartesian.stiffness': default_cartesian_stiffness,
                  'cartesian.nullspace_stiffness': default_joint_stiffness}
# name -> the value the law takes, from the checked value (arrays: numpy; else as checked)
_KEPT = {'effort_rate_limit': _rate_limit, 'cartesian.tool': _tool}


def _parse(name, value, model):
    checked = parameters.check(PARAMETERS[name], value, n=model.n)
    if name in _KEPT:
        return _KEPT[name](checked)
    return _array(checked) if PARAMETERS[name].is_array else checked


def declare_parameters(node, model):
    """Declare the law parameters (where the controller declares its others); their
    parsed values (ConfigurationError names a bad one)."""
    settings = {}
    for name in PARAMETERS:
        if name in MODEL_DEFAULTS:
            value = declare(node, name, MODEL_DEFAULTS[name](model))
        else:
            value = declare(node, name)
        settings[name] = _parse(name, value, model)
    return settings


def updated(settings, parameters, model):
    """The settings with the law parameters among `parameters` (rclpy Parameters)
    changed, or `settings` itself when none is one; ConfigurationError names a bad one."""
    changes = {}
    for parameter in parameters:
        if parameter.name in PARAMETERS:
            changes[parameter.name] = _parse(parameter.name, parameter.value, model)
    return {**settings, **changes} if changes else settings


def base_frame(node, settings):
    frame = settings['cartesian.base_frame']
    if frame:
        return frame
    if node.has_parameter('robot.base_link'):
        link = node.get_parameter('robot.base_link').value
        if isinstance(link, str) and link:
            return link
    return DEFAULT_BASE_FRAME


# ---------------------------------------------------------------- building a law

class CartesianLaw:
    """A Cartesian impedance law in the controller's joint-law slot: `effort` takes the
    joint reference (unused) and applies the law at `target` (a control.CartesianTarget)."""

    def __init__(self, law):
        self.law = law
        self.model = law.model
        self.target = None

    def effort(self, q, qd, q_ref, qd_ref, qdd_ref):
        return self.law.effort(q, qd, self.target)

    def hold(self, q):
        """The target at the current tool pose, at rest."""
        position, quaternion = self.law.pose(q)
        self.target = control.CartesianTarget(position, quaternion, None, None)


def build_law(model, kp, kd, settings):
    """The law `settings['control_law']` names, its kernels bound (called once now)."""
    name = settings['control_law']
    zero = np.zeros(model.n)
    if name == 'computed_torque':
        law = control.ComputedTorqueLaw(model, kp, kd)
    elif name == 'gravity_compensation':
        law = control.GravityCompensationLaw(model, damping=settings[
            'gravity_compensation.damping'])
    elif name == 'joint_impedance':
        damping = settings['joint_impedance.damping']
        law = control.JointImpedanceLaw(
            model, settings['joint_impedance.stiffness'], damping=damping,
            damping_ratio=(settings['joint_impedance.damping_ratio'] if damping is None
                           else None),
            feedforward=settings['joint_impedance.feedforward'])
    else:
        damping = settings['cartesian.damping']
        law = CartesianLaw(control.CartesianImpedanceLaw(
            model, settings['cartesian.stiffness'], damping=damping,
            damping_ratio=settings['cartesian.damping_ratio'] if damping is None else None,
            tool=settings['cartesian.tool'],
            nullspace_posture=settings['cartesian.nullspace_posture'],
            nullspace_stiffness=settings['cartesian.nullspace_stiffness'],
            nullspace_damping=settings['cartesian.nullspace_damping'],
            max_target_step=settings['cartesian.max_target_step']))
        law.hold(zero)
    law.effort(zero, zero, zero, zero, zero)        # binds the model's kernels now
    return law


class EffortRateLimit:
    """control.EffortRateLimiter on the cycle times t: |τ_k − τ_{k−1}| <= rate (t_k −
    t_{k−1}) per joint, the control period of either mode (on_state's follows the states).
    The first effort after `reset()`, or after time went back, passes unchanged."""

    def __init__(self, rate):
        self.limiter = control.EffortRateLimiter(rate, 1.0)     # the period: dt of each cycle
        self._t = -math.inf

    def reset(self):
        self.limiter.reset()
        self._t = -math.inf

    def limit(self, tau, t):
        if t < self._t:
            self.limiter.reset()
        dt, self._t = t - self._t, t
        return self.limiter.limit(tau, dt if math.isfinite(dt) else None)

    def carried_from(self, other):
        """This limit continuing from the last effort of `other` (a rate change)."""
        if other is not None:
            self.limiter.reset(other.limiter.last)
            self._t = other._t
        return self


def refusal(name, what):
    """The one-line reason `what` (a joint trajectory, a target pose) does not apply under
    law `name`, or None."""
    if what == 'trajectory' and name not in JOINT_REFERENCE_LAWS:
        return (f'control_law is {name}: joint trajectories apply under '
                f'{" and ".join(JOINT_REFERENCE_LAWS)}')
    if what == 'target_pose' and name != 'cartesian_impedance':
        return f'control_law is {name}: target poses apply under cartesian_impedance'
    return None


def switched(node, old, new, old_name, new_name, t):
    """Law `new` (named `new_name`) takes over from `old` in the control cycle at time t:
    without an effort jump at rest. A joint-reference law holds the measured position,
    unless a trajectory is running under the other joint-reference law (it continues); a
    law without joint reference ends the running motion (its goal aborted) and holds the
    measured position in the sampler; a Cartesian law holds the measured tool pose, or
    keeps its target across a change of its own parameters."""
    if isinstance(new, CartesianLaw):
        if isinstance(old, CartesianLaw):
            new.target = old.target
        else:
            new.hold(node._q)
    if new_name == old_name:
        return
    moving = node.sampler.status(t) in ('running', 'waiting')
    keeps_motion = (moving and old_name in JOINT_REFERENCE_LAWS
                    and new_name in JOINT_REFERENCE_LAWS)
    if not keeps_motion:
        if moving:
            node._action.preempt(f'aborted: control_law changed to {new_name}')
        node.sampler.hold(node._q.copy(), t)
        node._goal_reached = None
    node.get_logger().info(
        f'control_law {new_name} in effect (was {old_name}); '
        + ('the running trajectory continues' if keeps_motion else
           'holding the measured tool pose' if isinstance(new, CartesianLaw) else
           'holding the measured position'))
