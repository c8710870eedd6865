"""The closed-loop demo on any arm (`sim`, launch/sim.launch.py): where the arm starts (the
plant's `initial_positions`) and where the demo move takes it (`demo_move`'s
`start_positions`, `goal_positions`), derived from the robot file's joint count, joint
types and position limits; and the robot's own demo settings file, if it has one.

The derived move: every joint starts in the middle of its position range (0 where a
side is unlimited, moved inside a one-sided limit by the step) and moves by a step of
0.5 rad (revolute) or 0.1 m (prismatic), at most a quarter of its range, alternately up
and down (joint 1 up, joint 2 down, ...): so start and goal lie inside every limit
whatever the arm.

A robot file <name>.yaml may come with sim_<name>.yaml beside it, its own demo
(config/sim_puma560.yaml: [LEE] §5's move on the PUMA 560; a robot file of yours can have
one too). `sim` and
launch/sim.launch.py layer the files as

    robot file, the derived settings, the robot's demo file (if any), the sim files

so that the robot's demo file and the user's files win over what is derived here (all of
it under /**, as in the robot file: a later file's /** value wins, and so does any node
section).

Numpy, PyYAML and the model only (the launch file imports it)."""

import hashlib
import math
import os
import tempfile
import warnings

from robot_dynamics.model import RobotModel

__all__ = ['REVOLUTE_STEP', 'PRISMATIC_STEP', 'RANGE_FRACTION', 'demo_positions',
           'robot_demo_file', 'derived_parameters', 'write_derived_parameters']

REVOLUTE_STEP = 0.5      # rad (about 29 degrees): the move of a revolute joint at most
PRISMATIC_STEP = 0.1     # m: the move of a prismatic joint at most
RANGE_FRACTION = 0.25    # of a joint's position range: the move at most
PLANT, DEMO = 'plant_simulator', 'demo_move'


def demo_positions(model):
    """(start, goal) of the derived demo move of `model` (lists of floats, rad | m)."""
    start, goal = [], []
    for i, kind in enumerate(model.joint_types):
        step = PRISMATIC_STEP if kind == 'prismatic' else REVOLUTE_STEP
        low, high = float(model.position_min[i]), float(model.position_max[i])
        if math.isfinite(low) and math.isfinite(high):
            step = min(step, RANGE_FRACTION * (high - low))
            here = 0.5 * (low + high)
        elif math.isfinite(low):
            here = max(0.0, low + step)
        elif math.isfinite(high):
            here = min(0.0, high - step)
        else:
            here = 0.0
        start.append(here)
        goal.append(here + (step if i % 2 == 0 else -step))
    return start, goal


def robot_demo_file(robot_file):
    """sim_<name>.yaml beside the robot file <name>.yaml, if it exists; else None."""
    folder, name = os.path.split(os.path.abspath(robot_file))
    if name.startswith('sim'):          # node settings, not a robot file
        return None
    path = os.path.join(folder, 'sim_' + name)
    return path if os.path.isfile(path) else None


def derived_parameters(robot_file):
    """{node: {parameter: value}}: the plant's initial_positions and the demo move's
    start_positions and goal_positions for the robot of `robot_file`; {} if the file
    gives no model (the nodes then say why, naming the file)."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter('ignore')      # the nodes log the model's warnings
            model = RobotModel.from_yaml(robot_file)
    except Exception:  # noqa: B902 - any unreadable robot file: the nodes report it
        return {}
    start, goal = demo_positions(model)
    return {PLANT: {'initial_positions': start},
            DEMO: {'start_positions': start, 'goal_positions': goal}}


def write_derived_parameters(robot_file, directory=None, shared=False):
    """`derived_parameters` written as a ROS 2 parameter file in `directory` (default: the
    temporary folder); its path, or None when there is nothing to write. The caller
    removes the file; or, `shared`, it is named by its content and left for the next
    run with the same arm (a launch file, whose nodes read it after it returns). The values go under /**, as the robot file's: each is read by the
    node that has it; a later file's /** value wins over them, and so does a node section
    (the robot file opened the /** section first, and rcl applies the sections in the
    order they first appear)."""
    parameters = derived_parameters(robot_file)
    if not parameters:
        return None
    from robot_dynamics.parameters.layering import parameter_file_text
    text = parameter_file_text(
        {'/**': {name: [float(v) for v in values]
                 for values_of in parameters.values() for name, values in values_of.items()}},
        header=f'the demo move derived from {os.path.abspath(robot_file)} '
               '(robot_dynamics.nodes.common.demo_plan)')
    descriptor, path = tempfile.mkstemp(prefix='demo_move_', suffix='.yaml', dir=directory)
    with os.fdopen(descriptor, 'w', encoding='utf-8') as stream:
        stream.write(text)
    if shared:                           # in place at once (os.replace), never half written
        named = os.path.join(os.path.dirname(path), 'robot_dynamics_demo_move_'
                             + hashlib.sha1(text.encode()).hexdigest()[:16] + '.yaml')
        os.replace(path, named)
        path = named
    return path
