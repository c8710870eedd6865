"""computed_torque_controller as a managed (lifecycle) node: the executable
`controller_managed`. The control law, parameters and topics are the unmanaged node's
(`controller`, still the default); the lifecycle states have their ros2_control meaning:

- construction (unconfigured): every parameter is declared, as ros2_control declares a
  controller's on load, so that `ros2 param get/set` work before configure; nothing is
  checked yet.
- configure: build and validate the model and every parameter, as the unmanaged node does
  at start-up, and create its topics. A bad parameter fails the transition: one error line
  names it and the node stays unconfigured (configure again after fixing it; read-only
  parameters are read when the node starts, so fixing one of those means a restart).
- inactive (configured): listens to /joint_states, keeps the measured position, commands
  nothing; trajectories are rejected.
- activate: the first cycle holds the position measured then (the reference starts at the
  measured position: no jump; a trajectory from before is dropped).
- deactivate: one zero-effort command, then nothing (what a ros2_control effort controller
  leaves on its command interfaces; doc/lifecycle-and-diagnostics.md explains the choice).
- cleanup: back to unconfigured, the topics are destroyed; shutdown: from any state (from
  active: zero effort first).

The executable applies the `realtime.*` options (doc/realtime.md) after each configure and
drops them again on cleanup (unconfigured: normal priority, every CPU it had).
"""

import math
import sys

import numpy as np
from rclpy.lifecycle import LifecycleNode, TransitionCallbackReturn

from robot_dynamics.nodes.controller import ComputedTorqueController, NODE_NAME
from robot_dynamics.nodes.common.ros_params import (ConfigurationError, declare_robot,
                                                   keep_float_types, name_unknown_parameters)
from robot_dynamics.nodes.common.runner import run, spin_applying_realtime

# Node entities created by configure and destroyed by cleanup: (property, destroy method).
ENTITY_KINDS = (('publishers', 'destroy_publisher'), ('subscriptions', 'destroy_subscription'),
                ('timers', 'destroy_timer'), ('services', 'destroy_service'),
                ('clients', 'destroy_client'), ('guards', 'destroy_guard_condition'))


class ManagedComputedTorqueController(ComputedTorqueController, LifecycleNode):
    """The computed-torque controller with configure / activate / deactivate / cleanup."""

    def __init__(self, **kwargs):
        LifecycleNode.__init__(self, NODE_NAME, **kwargs)   # not the unmanaged start-up
        self.model = None               # until configured
        self.unexpected_errors = 0
        self.lifecycle_state = 'unconfigured'
        self._described = None          # (model, joints) once built
        self._configured = None         # entities before configure, callbacks added since
        self.declaring_only = False     # see _declare_parameters_now
        self.parameters_declared = False    # all of them (not with the URDF from a topic)
        keep_float_types(self)          # integers set live on floats stay floats
        name_unknown_parameters(self)   # `ros2 param set` of a misspelt name
        self._declare_parameters_now()
        self.get_logger().info(f'unconfigured: bring it up with `ros2 lifecycle set '
                               f'{self.get_fully_qualified_name()} configure`, then activate')

    # ------------------------------------------------------------------ transitions

    def on_configure(self, state):
        try:
            robot = self._robot()
            self._configured = (self._entities(), [])   # what cleanup will destroy: the rest
            self._start(*robot)
        except ConfigurationError as error:
            self._release()
            self.get_logger().error(f'configure failed: {error}')
            return TransitionCallbackReturn.FAILURE
        except Exception as error:  # noqa: B902 - rclpy would swallow it without a word
            self._release()
            self.get_logger().error(f'configure failed: unexpected {type(error).__name__}: '
                                    f'{error}')
            return TransitionCallbackReturn.ERROR
        self.lifecycle_state = 'inactive'
        self._set_status('inactive')
        self.get_logger().info('configured (inactive): activate to command efforts')
        return TransitionCallbackReturn.SUCCESS

    def on_activate(self, state):
        self._ready = False             # the first cycle holds the measured position
        self._stale = False
        self._last_t = -math.inf
        self._goal_reached = None
        self._command_check.start()     # the effort controller's joints, asked again
        self.lifecycle_state = 'active'
        self.get_logger().info('active: holding the measured position from the next cycle')
        return TransitionCallbackReturn.SUCCESS

    def on_deactivate(self, state):
        self._stop_commanding()
        self.get_logger().info('inactive: zero effort commanded once, then nothing')
        return TransitionCallbackReturn.SUCCESS

    def on_cleanup(self, state):
        self._release()
        self.get_logger().info('cleaned up (unconfigured)')
        return TransitionCallbackReturn.SUCCESS

    def on_shutdown(self, state):
        if self.lifecycle_state == 'active':
            self._stop_commanding()
        if self.model is not None:
            self._release()
        self.lifecycle_state = 'finalized'
        return TransitionCallbackReturn.SUCCESS

    def on_error(self, state):
        if self.model is not None:
            self._release()
        return TransitionCallbackReturn.SUCCESS

    # ------------------------------------------------------------------ the controller

    def _control_cycle(self, t, clock_now):
        if self.lifecycle_state == 'active':
            super()._control_cycle(t, clock_now)

    def _on_trajectory(self, msg):
        if self.lifecycle_state != 'active':
            self._warn(f'joint_trajectory rejected: the controller is {self.lifecycle_state} '
                       '(activate it first)')
            return
        super()._on_trajectory(msg)

    def _stop_commanding(self):
        self.lifecycle_state = 'inactive'
        self._ready = False
        self._action.preempt('aborted: the controller was deactivated')
        self._publish_command(np.zeros(self.model.n))
        self._commanding = False        # the zero is out: nothing more at exit
        self._set_status('inactive')

    # ------------------------------------------------------------------ configure / cleanup

    def _robot(self):
        """(model, joints) from the parameters, or from the robot_description topic: with
        robot.source urdf and no URDF among the parameters the first configure starts
        listening to it (for the node's lifetime) and fails until a valid URDF came."""
        listener = getattr(self, '_robot_description_listener', None)
        if listener is None:
            self._described = None
            declare_robot(self, self._keep_model)
            listener = getattr(self, '_robot_description_listener', None)
        if self._described is None:
            topic = listener._subscription.topic_name
            raise ConfigurationError(
                f'robot.source urdf: no valid URDF received on {topic} yet'
                + (f' (the last one: {listener.last_error})' if listener.last_error else '')
                + '; configure again once it is published')
        return self._described

    def _declare_parameters_now(self):
        """Declare every parameter at construction, as ros2_control declares a controller's
        on load: `ros2 param get/set/list` work while unconfigured, and configure checks
        the values as before. The robot block is read now (a bad one is named by
        configure); the rest is declared by running the start-up once with each parameter's
        default standing in for its value (nothing is checked, nothing is logged) and
        destroying what it created. With the URDF from the robot_description topic the
        joints are not known yet: then the other parameters are declared by configure."""
        try:
            declare_robot(self, self._declare_the_rest, listen=False)
        except ConfigurationError:
            pass                        # configure names it
        finally:
            self.declaring_only = False

    def _declare_the_rest(self, model, joints):
        self.parameters_declared = True     # the runner warns about unknown ones now
        self.declaring_only = True
        self._configured = (self._entities(), [])
        quiet = _QuietLogger()
        self.get_logger = lambda: quiet     # the start-up's lines belong to configure
        try:
            self._start(model, joints)
        finally:
            del self.get_logger
            self._release()

    def _keep_model(self, model, joints):
        self._described = (model, joints)

    def destroy_node(self):
        """As the unmanaged node's, then the lifecycle state machine: rclpy leaves it to the
        garbage collector, and until it is collected it keeps the node itself alive, so the
        destroyed node stayed on the ROS graph with its lifecycle services listed (a later
        node of the same name in the same process, or a client looking for it, saw both)."""
        super().destroy_node()
        machine = getattr(self, '_state_machine', None)
        if machine is not None and hasattr(machine, 'destroy_when_not_in_use'):
            machine.destroy_when_not_in_use()

    def add_on_set_parameters_callback(self, callback):
        """As Node's; the callbacks added by configure are removed by cleanup."""
        configured = getattr(self, '_configured', None)     # None: during Node.__init__
        if configured is not None:
            configured[1].append(callback)
        return super().add_on_set_parameters_callback(callback)

    def _entities(self):
        entities = {kind: set(getattr(self, kind)) for kind, _ in ENTITY_KINDS}
        entities['waitables'] = set(self.waitables)
        return entities

    def _release(self):
        """Destroy what configure created (topics, timers, services, actions, parameter
        callbacks); the parameters stay declared. Back to unconfigured."""
        before, callbacks = self._configured or (self._entities(), [])
        for kind, destroy in ENTITY_KINDS:
            for entity in set(getattr(self, kind)) - before[kind]:
                getattr(self, destroy)(entity)
        for waitable in set(self.waitables) - before['waitables']:
            if hasattr(waitable, 'destroy'):
                waitable.destroy()          # an ActionServer also removes itself
            if waitable in self.waitables:
                self.remove_waitable(waitable)
        for callback in callbacks:
            self.remove_on_set_parameters_callback(callback)
        self._configured = None
        self.model = None
        self.lifecycle_state = 'unconfigured'


class _QuietLogger:
    """Drops every line (the start-up run by _declare_the_rest)."""

    def __getattr__(self, name):
        return lambda *args, **kwargs: True


def main(args=None):
    """Entry point `controller_managed`: starts unconfigured; `ros2 lifecycle set
    /computed_torque_controller configure`, then `activate`, bring it up."""
    return run(ManagedComputedTorqueController, NODE_NAME, args, spin_applying_realtime)


if __name__ == '__main__':
    sys.exit(main())
