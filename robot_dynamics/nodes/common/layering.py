"""Moved to robot_dynamics.parameters.layering; this name is the same module."""

import sys

from robot_dynamics.parameters import layering as _moved

sys.modules[__name__] = _moved
