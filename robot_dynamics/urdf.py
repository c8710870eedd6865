"""Moved to robot_dynamics.model.urdf; this module keeps old imports working.

It is an alias of the moved module (sys.modules), so attributes set on one are seen by both.
"""

import sys

from robot_dynamics.model import urdf as _moved

if __name__ == '__main__':          # python -m robot_dynamics.urdf
    raise SystemExit(_moved.main())

sys.modules[__name__] = _moved
