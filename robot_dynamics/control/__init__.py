"""The control laws: pure math on numpy arrays, no ROS.

Joint-space laws share ``effort(q, qd, q_ref, qd_ref, qdd_ref) -> tau (n,)``:
`ComputedTorqueLaw` ([LEE] eq. 4.4), `GravityCompensationLaw`, `JointImpedanceLaw`;
`CartesianImpedanceLaw.effort(q, qd, target)` follows a `CartesianTarget`;
`EffortRateLimiter` limits the change of the efforts per period; `saturate` clips them.
The equations, parameters and sources: doc/control-laws.md.
"""

from robot_dynamics.control.cartesian_impedance import (CartesianImpedanceLaw,
                                                        CartesianTarget, validate_target)
from robot_dynamics.control.computed_torque import (ComputedTorqueLaw, saturate,
                                                    servo_acceleration)
from robot_dynamics.control.gravity_compensation import GravityCompensationLaw
from robot_dynamics.control.joint_impedance import JointImpedanceLaw
from robot_dynamics.control.rate_limit import EffortRateLimiter

__all__ = ['CartesianImpedanceLaw', 'CartesianTarget', 'ComputedTorqueLaw',
           'EffortRateLimiter', 'GravityCompensationLaw', 'JointImpedanceLaw', 'saturate',
           'servo_acceleration', 'validate_target']
