"""Moved to robot_dynamics.dynamics.lagrange; this module keeps old imports working.

It is an alias of the moved module (sys.modules), so attributes set on one are seen by both.
"""

import sys

from robot_dynamics.dynamics import lagrange as _moved

sys.modules[__name__] = _moved
