"""Moved to robot_dynamics.simulation.mujoco_engine; this module keeps old imports working.

It is an alias of the moved module (sys.modules), so attributes set on one are seen by both.
"""

import sys

from robot_dynamics.simulation import mujoco_engine as _moved

sys.modules[__name__] = _moved
