"""computed_torque_controller: the [LEE] §4 computed-torque law as a ROS 2 node.

Each cycle: sample the reference (q_d, q̇_d, q̈_d) of the current trajectory and publish
τ = inverse_dynamics(q, q̇, q̈_d + Kd(q̇_d − q̇) + Kp(q_d − q)) ([LEE] eq. 4.4: one
Newton–Euler call), clipped to the effort limits, as Float64MultiArray in `joints` order.
The live parameter `control_law` switches to gravity compensation, joint or Cartesian
impedance (nodes/common/control_laws.py, doc/control-laws.md).
Interfaces: README "Topics and parameters"; parameters: doc/parameters.md; failure behaviour:
doc/safety.md.

The node (node.py) is built from its parameters (parameters.py, declared and checked from
robot_dynamics/parameters/controller.py), its state input (state_input.py: /joint_states
by name), the dead time measured from echoed efforts (loop_delay.py: measure_latency) and
the control-law selection (law_selection.py); `python -m
robot_dynamics.nodes.controller` runs it (__main__.py).
"""

from robot_dynamics.nodes.controller.guard import doubles, guarded, THROTTLE
from robot_dynamics.nodes.controller.law_selection import LawSwap
from robot_dynamics.nodes.controller.node import (ComputedTorqueController, CONTROL_MODES,
                                                  main, NODE_NAME, SERVICE_PERIOD,
                                                  ZERO_ACK_WAIT)
from robot_dynamics.nodes.controller.parameters import (effort_limit_vector, LIVE_FLAGS,
                                                        LIVE_SCALARS, PAYLOAD_KEYS)
from robot_dynamics.nodes.controller.state_input import (CLOCK_RESET, FUTURE_LIMIT,
                                                         MAX_ABS_STATE)

__all__ = ['ComputedTorqueController', 'main', 'NODE_NAME', 'CONTROL_MODES', 'THROTTLE',
           'MAX_ABS_STATE', 'CLOCK_RESET', 'FUTURE_LIMIT', 'LIVE_SCALARS', 'LIVE_FLAGS',
           'PAYLOAD_KEYS', 'SERVICE_PERIOD', 'ZERO_ACK_WAIT', 'LawSwap', 'guarded', 'doubles',
           'effort_limit_vector']
