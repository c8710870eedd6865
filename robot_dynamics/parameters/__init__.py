"""The parameters of the package's nodes, as tables (one per node), and the one check of
each rule.

    from robot_dynamics import parameters
    entry = parameters.lookup('computed_torque_controller', 'gains.kp')
    kp = parameters.check(entry, [100.0] * 6, n=6)    # ConfigurationError names index, rule

The nodes declare their parameters from these tables (nodes/common/ros_params.declare:
description, read_only and range come from the entry), tools/parameter_doc.py writes
doc/parameters.md from them, and the warning about a parameter file's unknown key names the
closest name they hold. No rclpy, no node: the core may import this package.
"""

from robot_dynamics.parameters.common import DIAGNOSTICS_AND_REALTIME
from robot_dynamics.parameters.controller import CONTROLLER
from robot_dynamics.parameters.demo_move import DEMO_MOVE
from robot_dynamics.parameters.plant import PLANT
from robot_dynamics.parameters.robot import ROBOT
from robot_dynamics.parameters.schema import (as_bool, as_choice, as_float, as_floats,
                                              as_string, check, ConfigurationError,
                                              FROM_MODEL, is_empty, JOINT, Parameter)

__all__ = ['TABLES', 'WHERE', 'ROBOT', 'ROBOT_KEYS', 'Parameter', 'ConfigurationError',
           'FROM_MODEL', 'JOINT', 'check', 'lookup', 'table', 'catalogue', 'as_bool',
           'as_choice', 'as_float', 'as_floats', 'as_string', 'is_empty']

# node name -> its parameters (the managed controller has the controller's)
TABLES = {
    'computed_torque_controller': ROBOT + CONTROLLER + DIAGNOSTICS_AND_REALTIME,
    'plant_simulator': ROBOT + PLANT + DIAGNOSTICS_AND_REALTIME,
    'demo_move': DEMO_MOVE,
}

# node name -> where it runs (doc/parameters.md)
WHERE = {
    'computed_torque_controller': 'the executables `controller` and `controller_managed` (the '
                                  'managed one declares the same parameters, at construction) '
                                  'and in `sim`',
    'plant_simulator': 'the executable `plant` and in `sim`',
    'demo_move': '`sim`: it sends the demo move',
}

# the keys of the robot block (`robot.` left out), for RobotModel's unknown-key check
ROBOT_KEYS = tuple(entry.name[len('robot.'):] for entry in ROBOT
                   if entry.name.startswith('robot.'))


def table(node_name):
    """The entries of node `node_name` (KeyError for a node without a table)."""
    return TABLES[node_name]


def lookup(node_name, name):
    """The entry of parameter `name` of node `node_name`, or None."""
    for entry in TABLES.get(node_name, ()):
        if entry.matches(name):
            return entry
    return None


def catalogue():
    """{node name: sorted parameter names} (`<joint>`: any joint name)."""
    return {node: tuple(sorted(entry.name for entry in entries))
            for node, entries in TABLES.items()}
