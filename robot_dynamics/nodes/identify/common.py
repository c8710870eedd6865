"""What the modules of `identify` (robot_dynamics.nodes.identify) share: the bad-input and
estimation errors, the exit statuses, the bags' metadata keys, the command line's defaults
and the check of the optional libraries. Below every other module of the command: it
imports none of them."""

import importlib

EFFORT_TIMING_KEY = 'robot_dynamics.effort_timing'   # the bag metadata's custom_data key
RECORDED_BY_KEY = 'robot_dynamics.recorded_by'       # which command wrote the bag
EFFORT_TIMINGS = ('instant', 'held_after', 'held_before')
ACCELERATION_SOURCES = ('velocity', 'position')      # identify_arm's `accelerations`

NOT_ENDED = 1           # excite, plan: no controller, no /joint_states, the motion did not end
BAD_INPUT = 2
NOT_EXCITED = 3         # estimate: the data do not determine the parameters
NOT_CONSISTENT = 4      # estimate: the estimate is not physically consistent
BUG = 70                # sysexits' EX_SOFTWARE: an internal error, not bad input
STOPPED = 130
EXCITATION_ITERATIONS = 20   # optimal_excitation's L-BFGS iterations
CONTROLLER = '/computed_torque_controller'


class InputError(ValueError):
    """Bad input to `estimate`: one line, exit status 2."""


class EstimationError(RuntimeError):
    """The estimation itself failed (e.g. the solver): one line, exit status 1."""


def first_line(error):
    """The first line of an error's text ('' for none)."""
    lines = str(error).strip().splitlines()
    return lines[0] if lines else ''


def missing_libraries(modules):
    """One line naming the libraries of `modules` (e.g. 'scipy.optimize', 'rosbags') that
    do not import and the pip command that installs them, or None when all import."""
    missing = []
    for module in modules:
        try:
            importlib.import_module(module)
        except ImportError as error:
            cause = (getattr(error, 'name', None) or module).split('.')[0]
            package = cause if cause in {m.split('.')[0] for m in modules} else \
                module.split('.')[0]
            if package not in missing:
                missing.append(package)
    if not missing:
        return None
    return f'needs {" and ".join(missing)}: pip install {" ".join(missing)}'
