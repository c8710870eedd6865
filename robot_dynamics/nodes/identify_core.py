"""What `identify estimate` asks of robot_dynamics.arm_identification, in its own words:
the estimate of a list of gap-free recordings, the validation errors of a model, and the
parameter-file keys of the identified model."""

from typing import NamedTuple

import numpy as np

from robot_dynamics import arm_identification


class Estimate(NamedTuple):
    model: object          # the identified RobotModel
    samples: int           # samples used
    condition: float       # condition number of the (weighted) base regressor
    not_excited: list      # what the data do not determine ([] when all is identified)
    fixed: list            # how the directions the data cannot determine were fixed


class Errors(NamedTuple):
    rms: np.ndarray        # per joint RMS effort error [N m | N]
    relative: np.ndarray   # per joint RMS error / RMS measured effort


def _columns(pieces):
    return tuple(list(column) for column in zip(*pieces))


def identify(prior, pieces):
    """Estimate from [(t, q, qd, tau)] gap-free recordings."""
    t, q, qd, tau = _columns(pieces)
    result = arm_identification.identify_arm(prior, t, q, qd, tau)
    return Estimate(result.model, int(result.samples), float(result.condition),
                    list(result.not_excited), list(result.fixed))


def errors(model, pieces):
    t, q, qd, tau = _columns(pieces)
    rms, relative = arm_identification.validation_errors(model, t, q, qd, tau)
    return Errors(np.asarray(rms, dtype=float), np.asarray(relative, dtype=float))


def overrides(model):
    return arm_identification.robot_params_overrides(model)
