"""The old name of `robot_dynamics.identification.arm` (whole-arm identification): this
module, and each of its submodules (``robot_dynamics.arm_identification.estimator``, ...),
is the moved module itself, so that attributes set on one are seen through the other."""

import sys

from robot_dynamics.identification import arm
from robot_dynamics.identification.arm import (base, estimator, excitation, least_squares,
                                               libraries, models, parameters, recording,
                                               regressor, study)

for _module in (base, estimator, excitation, least_squares, libraries, models, parameters,
                recording, regressor, study):
    sys.modules[f'{__name__}.{_module.__name__.rpartition(".")[2]}'] = _module
sys.modules[__name__] = arm
