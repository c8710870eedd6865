"""The old place of the controller's payload estimator hook: the module
``robot_dynamics.nodes.identification.payload_identification`` is
`robot_dynamics.nodes.payload_identification` itself (attributes set on one are seen
through the other). The `identify` executable is robot_dynamics.nodes.identify."""

import sys

from robot_dynamics.nodes import payload_identification

sys.modules[f'{__name__}.payload_identification'] = payload_identification
