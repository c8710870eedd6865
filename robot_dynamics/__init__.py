"""robot_dynamics: Newton–Euler computed-torque control of serial arms, for ROS 2.

The core is pure numpy and imports without ROS, in layered packages: `model` (the robot
model, URDF), `dynamics` (the public functions and their backends, kinematics, Lagrange),
`control` (the laws), `trajectories` (splines, the JTC sampler), `simulation` (the closed
loop, integration, engines); the nodes live in `robot_dynamics.nodes`.
"""

from robot_dynamics import _moved, _startup

_startup.quiet_interrupt_while_starting()   # Ctrl-C before an executable runs: exit 130
_moved.install()                            # the flat module names of earlier versions

from robot_dynamics.model import urdf as _urdf   # noqa: E402,F401 - registers robot.source urdf

__version__ = '0.1.0'
