"""Moved to robot_dynamics.parameters.params_file; this name is the same module."""

import sys

from robot_dynamics.parameters import params_file as _moved

sys.modules[__name__] = _moved
