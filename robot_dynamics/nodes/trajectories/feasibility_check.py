"""The controller's feasibility check of every accepted trajectory (topic and action):
`robot_dynamics.feasibility` on the plan the sampler is about to install
(doc/trajectories.md, "Feasibility").

- `feasibility.check` (bool, default true, live): refuse a trajectory whose reference
  exceeds `robot.velocity_max` or needs more than `effort_limits` (τ = ID(q_d, q̇_d, q̈_d)),
  with one line naming the joint, the time and the excess (a goal: INVALID_GOAL and that
  line as error_string); the running motion goes on.
- `feasibility.allow_time_scaling` (bool, default false, live): instead of refusing, run
  the trajectory slower (times × k, velocities / k, accelerations / k²) by the smallest k
  found that fits, and say so (log; a goal's result names the new duration).
"""

import math

from rcl_interfaces.msg import SetParametersResult

from robot_dynamics.trajectories.feasibility import check_reference, scaled_command
from robot_dynamics.nodes.common.ros_params import ConfigurationError, declare, validated
from robot_dynamics.trajectories.sampler import TrajectoryRejected

ATTEMPTS = 5            # time-scaled plans tried before refusing
MARGIN = 1.02           # each stretch 2 % beyond the estimate (the start state and friction
#                         do not scale exactly)
PARAMETERS = ('feasibility.check', 'feasibility.allow_time_scaling')


class Infeasible(TrajectoryRejected):
    """A reference beyond the velocity or effort limits; `scale`: the stretch that would
    fit (inf: none)."""

    def __init__(self, excesses, scale):
        self.excesses = excesses
        self.scale = scale
        super().__init__('infeasible: ' + '; '.join(e.text() for e in excesses))


class FeasibilityCheck:
    """Wraps the sampler's accept for a ComputedTorqueController `node`."""

    def __init__(self, node):
        self.node = node
        self.enabled, self.allow_time_scaling = (
            validated(node, name, declare(node, name)) for name in PARAMETERS)
        node.add_on_set_parameters_callback(self._on_set_parameters)

    def _check(self, plan):
        node = self.node
        model = node.law.model
        velocity, effort, scale = check_reference(model, plan, node.joints,
                                                  model.velocity_max, node.effort_limits)
        excesses = [e for e in (velocity, effort) if e is not None]
        if excesses:
            raise Infeasible(excesses, scale)

    def accept(self, command, now):
        """Install `command` (or a slower copy); (the command installed, a note on the time
        scaling or None). Raises TrajectoryRejected (nothing changes) when it is invalid or
        infeasible."""
        sampler = self.node.sampler
        if not self.enabled or not command.points:
            sampler.accept(command, now)
            return command, None
        try:
            sampler.accept(command, now, self._check)
            return command, None
        except Infeasible as error:
            if not self.allow_time_scaling:
                raise self._refusal(error) from None
            first = error
        k = 1.0
        scale = first.scale
        for _ in range(ATTEMPTS):
            if not math.isfinite(scale):
                break
            k *= max(scale, 1.0) * MARGIN
            slower = scaled_command(command, k)
            try:
                sampler.accept(slower, now, self._check)
            except Infeasible as again:
                scale = again.scale
                continue
            duration = command.points[-1].time_from_start
            note = (f'time-scaled x{k:.3g} to fit the limits: {duration:g} s -> '
                    f'{duration * k:g} s ({"; ".join(e.text() for e in first.excesses)})')
            self.node.get_logger().info(f'trajectory {note}')
            return slower, note
        raise TrajectoryRejected(f'{first}; no time scaling fits (gravity alone exceeds '
                                 'the limit, or the start state does)')

    @staticmethod
    def _refusal(error):
        hint = ('' if not math.isfinite(error.scale) else
                f'; {error.scale:.3g} times slower would fit (or set '
                'feasibility.allow_time_scaling)')
        return TrajectoryRejected(f'{error}{hint}')

    def _on_set_parameters(self, parameters):
        values = {}
        for parameter in parameters:
            if parameter.name in PARAMETERS:
                try:
                    values[parameter.name] = validated(self.node, parameter.name,
                                                       parameter.value)
                except (ConfigurationError, TypeError, ValueError) as error:
                    return SetParametersResult(successful=False, reason=str(error))
        self.enabled = values.get('feasibility.check', self.enabled)
        self.allow_time_scaling = values.get('feasibility.allow_time_scaling',
                                             self.allow_time_scaling)
        return SetParametersResult(successful=True)
