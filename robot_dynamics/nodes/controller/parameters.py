"""The controller's parameters: declared from its table (robot_dynamics/parameters/
controller.py: description, range, read-only, default), checked by the table's rules at
start-up and for live changes (`validated`: one check and one message per rule); here only
what is the controller's own: the law built from them, effort limits within
robot.effort_max, a new payload model, the sampler's flags."""

import math

import numpy as np
from rcl_interfaces.msg import SetParametersResult

from robot_dynamics.control import ComputedTorqueLaw
from robot_dynamics.nodes.common import control_laws
from robot_dynamics.nodes.common.realtime import declare_realtime
from robot_dynamics.nodes.common.ros_params import (ConfigurationError, declare, payload_model,
                                                   validated)
from robot_dynamics.nodes.controller.loop_delay import LoopDelayEstimate
from robot_dynamics.nodes.trajectories import speed_scaling
from robot_dynamics.nodes.trajectories.feasibility_check import FeasibilityCheck
from robot_dynamics.nodes.trajectories.joint_constraints import JointConstraints
from robot_dynamics.trajectories.sampler import JointTrajectorySampler

LIVE_SCALARS = ('state_timeout', 'latency_compensation', 'measure_latency', 'state_age',
                'constraints.goal_tolerance',
                'constraints.stopped_velocity_tolerance', 'cmd_timeout')
LIVE_FLAGS = ('allow_nonzero_velocity_at_trajectory_end',
              'allow_integration_in_goal_trajectories', 'allow_partial_joints_goal')
PAYLOAD_KEYS = ('mass', 'com', 'inertia')


def effort_limit_vector(node, value, model):
    """effort_limits checked by the table's rules (one finite value > 0 per joint), at most
    robot.effort_max; empty or unset: robot.effort_max (unlimited where that is not given)."""
    limits = validated(node, 'effort_limits', value)
    if limits is None:
        return np.array(model.effort_max, dtype=float)
    for i, v in enumerate(limits):
        if v > model.effort_max[i]:
            raise ConfigurationError(f'effort_limits[{i}]: {v} exceeds robot.effort_max[{i}] '
                                     f'= {model.effort_max[i]}')
    return np.array(limits)


def _parameter(node, name):
    """Declare `name` from the node's table and return its checked value."""
    return validated(node, name, declare(node, name))


class ControllerParameters:
    """The parameter side of ComputedTorqueController (a mixin)."""

    def _declare_parameters(self):
        self.control_rate = _parameter(self, 'control_rate')
        self.control_mode = _parameter(self, 'control_mode')
        self.command_topic = _parameter(self, 'command_topic')
        self.command_controller = _parameter(self, 'command_controller')
        self.check_command_controller = _parameter(self, 'check_command_controller')
        kp = np.array(_parameter(self, 'gains.kp'))
        kd = np.array(_parameter(self, 'gains.kd'))
        self.compensate_gravity = _parameter(self, 'compensate_gravity')
        law_model = (self.model if self.compensate_gravity
                     else self.model.with_gravity((0.0, 0.0, 0.0)))
        self.law = ComputedTorqueLaw(law_model, kp, kd)
        self._gains = (kp, kd)          # of computed_torque, whichever law is in effect
        zero = np.zeros(self.model.n)
        self.law.effort(zero, zero, zero, zero, zero)   # generates the kernels now, not in
        #                                                 the first control cycle
        self.effort_limits = effort_limit_vector(self, declare(self, 'effort_limits'),
                                                 self.model)
        self.law_settings = control_laws.declare_parameters(self, self.model)
        self.control_law = self.law_settings['control_law']     # the latest accepted
        self._law_name = 'computed_torque'                      # the one in effect
        self._rate_limit = None         # an EffortRateLimit, or None: nothing per cycle
        if self.control_law != 'computed_torque':
            self._use_law(control_laws.build_law(law_model, kp, kd, self.law_settings),
                          self.law_settings, math.inf)
        else:
            self._set_rate_limit(self.law_settings)
        self.state_timeout = _parameter(self, 'state_timeout')
        self.latency_compensation = _parameter(self, 'latency_compensation')
        self.measure_latency = _parameter(self, 'measure_latency')
        self.loop_delay = LoopDelayEstimate(self.latency_compensation)
        self.state_age = _parameter(self, 'state_age')
        self.stamp_joint = _parameter(self, 'stamp_joint')
        if self.stamp_joint in self.joints:
            raise ConfigurationError(f'stamp_joint: {self.stamp_joint!r} is a controlled '
                                     'joint; name the joint that carries the states\' time')
        self.goal_tolerance = _parameter(self, 'constraints.goal_tolerance')
        self.stopped_velocity_tolerance = _parameter(self,
                                                     'constraints.stopped_velocity_tolerance')
        self.joint_constraints = JointConstraints(self, self.joints)   # constraints.<joint>.*
        self.feasibility = FeasibilityCheck(self)   # feasibility.*: limits at accept time
        allow_partial = _parameter(self, 'allow_partial_joints_goal')
        self.publish_state = _parameter(self, 'publish_state')
        self.state_publish_rate = _parameter(self, 'state_publish_rate')
        self.realtime = declare_realtime(self)    # applied by the runner's loop
        interpolation = _parameter(self, 'interpolation_method')
        flags = {name: _parameter(self, name)
                 for name in ('allow_nonzero_velocity_at_trajectory_end',
                              'allow_integration_in_goal_trajectories')}
        self.cmd_timeout = _parameter(self, 'cmd_timeout')
        scaling, scaling_rate = speed_scaling.declare_parameters(self)   # speed_scaling.*
        self.sampler = JointTrajectorySampler(
            self.joints, position_min=self.model.position_min,
            position_max=self.model.position_max, allow_partial_joints_goal=allow_partial,
            interpolation_method=interpolation,
            max_deceleration_on_cancel=self.joint_constraints.max_deceleration_on_cancel,
            speed_scaling_factor=scaling, speed_scaling_rate_limit=scaling_rate,
            continuous=self.model.continuous, **flags)

    def _on_set_parameters(self, parameters):
        """Live changes, checked by the table's rules (all or none are accepted); gains,
        effort limits, payload and law parameters are built into a new law here and take
        effect together at the next control cycle."""
        model, kp, kd, limits, settings = self._target
        payload = {}
        values = {}
        try:
            for parameter in parameters:
                name, value = parameter.name, parameter.value
                if name == 'gains.kp':
                    kp = np.array(validated(self, name, value))
                elif name == 'gains.kd':
                    kd = np.array(validated(self, name, value))
                elif name == 'effort_limits':
                    limits = effort_limit_vector(self, value, model)
                elif name.startswith('robot.payload.') and name[14:] in PAYLOAD_KEYS:
                    payload[name[14:]] = value
                elif name in LIVE_SCALARS or name in LIVE_FLAGS:
                    values[name] = validated(self, name, value)
            if payload:
                model = payload_model(model, payload)
            settings = control_laws.updated(settings, parameters, model)
            target = (model, kp, kd, limits, settings)
            if any(new is not old for new, old in zip(target, self._target)):
                self._swap.request(model, kp, kd, limits, settings)
        except (ConfigurationError, TypeError, ValueError) as error:
            return SetParametersResult(successful=False, reason=str(error))
        if target is not self._target:
            self._target = target
            self.control_law = settings['control_law']
        self.state_timeout = values.get('state_timeout', self.state_timeout)
        if 'latency_compensation' in values:     # also the measurement's new start
            self.latency_compensation = values['latency_compensation']
            self.loop_delay.restart(self.latency_compensation)
        self.measure_latency = values.get('measure_latency', self.measure_latency)
        self.state_age = values.get('state_age', self.state_age)
        self.goal_tolerance = values.get('constraints.goal_tolerance', self.goal_tolerance)
        self.stopped_velocity_tolerance = values.get(
            'constraints.stopped_velocity_tolerance', self.stopped_velocity_tolerance)
        self.cmd_timeout = values.get('cmd_timeout', self.cmd_timeout)
        for name in LIVE_FLAGS:
            if name in values:
                setattr(self.sampler, name, values[name])
        return SetParametersResult(successful=True)

    def _effective_cmd_timeout(self):
        """cmd_timeout, or 0 (off) when it does not exceed constraints.goal_time (JTC)."""
        timeout = self.cmd_timeout
        if timeout > 0.0 and timeout <= getattr(self._action, 'goal_time', 0.0):
            if not self._cmd_timeout_warned:
                self._cmd_timeout_warned = True
                self.get_logger().warning(
                    f'cmd_timeout {timeout:g} s is ignored: it must exceed '
                    f'constraints.goal_time ({self._action.goal_time:g} s)')
            return 0.0
        self._cmd_timeout_warned = False
        return timeout
