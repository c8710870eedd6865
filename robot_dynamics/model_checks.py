"""Moved to robot_dynamics.model.checks; this module keeps old imports working
(`robot_dynamics.model_checks` is that module itself, so attributes set on one are seen by both)."""

import sys

from robot_dynamics.model import checks as _moved

sys.modules[__name__] = _moved
