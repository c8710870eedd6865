"""Moved to robot_dynamics.trajectories: the sampler and its message types to
robot_dynamics.trajectories.sampler, the spline maths to robot_dynamics.trajectories.splines;
this module keeps old imports working."""

from robot_dynamics.trajectories.sampler import *  # noqa: F401,F403
from robot_dynamics.trajectories.sampler import (  # noqa: F401
    __all__ as _sampler_names, FLOAT_EPSILON, MAX_ABS_VALUE, PAUSED)
from robot_dynamics.trajectories.splines import *  # noqa: F401,F403
from robot_dynamics.trajectories.splines import (  # noqa: F401
    __all__ as _spline_names, STOP_RAMP_SHARE, STOP_RAMP_TIME)

__all__ = list(_sampler_names) + list(_spline_names)
