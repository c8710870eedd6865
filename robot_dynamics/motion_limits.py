"""Moved to robot_dynamics.trajectories.motion_limits; this module keeps old imports working.

It is an alias of the moved module (sys.modules), so attributes set on one are seen by both.
"""

import sys

from robot_dynamics.trajectories import motion_limits as _moved

sys.modules[__name__] = _moved
