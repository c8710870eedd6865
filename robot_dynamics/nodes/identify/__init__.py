"""`ros2 run robot_dynamics identify`: identify the whole arm (every link's inertial
parameters, rotor inertia, friction) from its own motion, and write the model as a
parameter file the controller and the plant load after the robot's own (doc/identification.md).

    identify excite [--duration 30] [--controller /computed_torque_controller] [--seed 0]
                    [--iterations 20] [--joint-states-topic /joint_states] [--timeout 10]
                    [--effort-timing held_before] --record DIR
    identify estimate --params-file P [P ...] --bag DIR [DIR ...] [--validate DIR]
                      [--topic /joint_states] [--node computed_torque_controller]
                      [--effort-timing instant] [--output-section /**/NODE]
                      [--offset | --no-offset] [--friction LAW [LAW ...] | auto]
                      [--accelerations auto] [--write-inconsistent]
                      [--payload-bag DIR [DIR ...] --payload M CX CY CZ [I x 6]]
                      [--report REPORT.yaml] [--relative-std-threshold 20]
                      [--essential-ratio 100] --output OUT.yaml
    identify plan --params-file P [P ...] [--duration 30] [--rate 100] [--start Q ...]
                  [--floor Z] [--keep-out XMIN YMIN ZMIN XMAX YMAX ZMAX] [--output PLAN.yaml]
                  [--send ACTION [--record DIR]]

`excite` reads the robot model and its limits from the running controller's parameters (as
`excite` does), plans the trajectory optimised for identification from where the arm is
(robot_dynamics.identification.arm.optimal_excitation; its condition number is printed),
sends it through the controller (the FollowJointTrajectory action when the controller
offers it, else its joint_trajectory topic) and records /joint_states at its full rate
during the motion into the rosbag2 folder DIR (`ros2 bag info DIR` reads it), with the
effort timing of the recording in the bag's metadata (custom_data
``robot_dynamics.effort_timing``: held_before when this package's plant publishes
/joint_states, else instant; ``--effort-timing`` says otherwise).

`plan` plans the same motion from the robot's parameter files alone, checks it against
the joint limits, a floor and keep-out boxes, and writes it as a
trajectory_msgs/JointTrajectory YAML file and/or sends it to any FollowJointTrajectory
action server while recording /joint_states.

`estimate` builds the prior model from the parameter files (every --params-file, in order,
layered as the nodes layer them: robot_dynamics.parameters.params_file), reads the
recordings (robot_dynamics.identification.recordings: any robot's ``ros2 bag record /joint_states``
with position and effort, and velocity when recorded (else the velocities come from the
positions); jittered, dropped, duplicated or late messages,
several publishers), identifies the model, prints for the prior and the identified model
the per-joint RMS torque error and relative error on the validation data (--validate, else
the last 20 % of the samples, held out), the condition number, the sample count, the
friction law and offsets chosen from the data when not given (held out on 5 blocks), how the
directions the data cannot determine were fixed, and writes OUT.yaml:
``/**/NODE: ros__parameters: robot:`` with the identified values (NODE: --node, the
controller, so that loading the file into a simulation leaves the plant as it is;
``--output-section /**`` addresses every node), to load after the robot's files
(``--params-file P --params-file OUT.yaml``). The effort timing is the bag's (written by
`identify excite`), else instant, unless --effort-timing is given.
The report REPORT.yaml (default OUT.report.yaml): every base parameter's value, standard
deviation and relative standard deviation, the essential parameters, the friction laws,
offsets and drive gains. `--offset` estimates each joint's effort offset (a sensor bias,
written as ``effort_offset``: the controller does not add it to its command); `--friction`
sets the joints' friction laws (coulomb, asymmetric, tanh, stribeck; one for all or one per
joint); `--payload-bag` with `--payload` (a second recording with a known payload
attached: mass, centre of mass in the last link frame [, inertia about it]) estimates
each joint's drive gain (joint effort = gain × recorded effort). `--accelerations`: the
accelerations from the recorded velocities' derivative or the recorded positions' second
derivative; by default the one the estimation data fit better (printed), also used for the
validation errors.

Exit status: 0 done; 1 (excite) no controller, no /joint_states or no subscriber within
--timeout, or the motion did not end, (estimate) the estimation failed (the solver) or scipy
or cvxpy is missing (the line says what to pip install); 2 bad arguments or bad input (a
missing bag, no JointState topic, joints missing, no efforts or efforts without
information (0, constant, far below the gravity torques), too short, a bad parameter file,
rosbags missing); 3 (estimate) the data do not excite the parameters (nothing written;
which ones is printed), (excite) the goal was refused; 4 (estimate) the estimate is not
physically consistent (nothing written unless --write-inconsistent), (excite) the goal was
aborted or canceled;
70 (estimate) an internal error: a bug, not bad data (one line; please report it);
130 stopped (Ctrl-C, SIGTERM).
`plan`: 0 done; 1 no /joint_states or action server within --timeout, the arm moved while
the motion was planned, a library missing; 2 bad input or a limit the motion would break
(one line naming the joint or link point, the time and the limit); 3, 4, 130 as `excite`.

Modules: `common` (the errors, exit statuses, bag metadata keys and defaults they share),
`prior` (the prior model from layered parameter files), `data` (the recordings, the
held-out split, the effort timing), `estimate` (its options, the estimate and its
validation), `report` (the printed tables, the report and the parameter file), `excite`,
`plan` and `send` (`plan --send`, a ROS node like `excite`); this module parses the command
line and runs the subcommand.
"""

import argparse
import math
import os
import sys

from robot_dynamics.parameters.params_file import ros_args_positions
from robot_dynamics.identification.recordings import DEFAULT_TOPIC
from robot_dynamics.nodes.identify import estimate, plan
from robot_dynamics.nodes.identify.common import (  # noqa: F401 - identify's names
    BAD_INPUT, BUG, CONTROLLER, EFFORT_TIMING_KEY, EFFORT_TIMINGS, EstimationError,
    EXCITATION_ITERATIONS, InputError, NOT_CONSISTENT, NOT_EXCITED, RECORDED_BY_KEY, STOPPED)
from robot_dynamics.nodes.identify.data import (  # noqa: F401 - identify's names
    held_out, HELD_OUT, pieces, read_recordings)
from robot_dynamics.nodes.identify.prior import (  # noqa: F401 - identify's names
    layered_parameters, prior_model)
from robot_dynamics.nodes.identify.report import (  # noqa: F401 - identify's names
    parameter_file_text, report_path, yaml_value)


def parse_arguments(argv):
    """The subcommand and its options (without ROS arguments); exits with status 2."""
    parser = argparse.ArgumentParser(
        prog='identify', description='Identify the whole arm from its own motion: record '
        'an optimised excitation, estimate, write a parameter file.')
    commands = parser.add_subparsers(dest='command', required=True,
                                     metavar='{excite,estimate,plan}')
    add_excite_arguments(commands)
    estimate.add_arguments(commands)
    plan.add_arguments(commands, CONTROLLER, EXCITATION_ITERATIONS)
    args = parser.parse_args(argv)
    if args.command == 'excite':
        check_excite_arguments(parser, args)
    elif args.command == 'estimate':
        estimate.check_arguments(parser, args)
    return args


def add_excite_arguments(commands):
    """The `excite` subcommand's parser in `commands` (identify's subparsers)."""
    excite = commands.add_parser(
        'excite', help='send the optimised excitation through the running controller and '
        'record /joint_states into a bag')
    excite.add_argument('--duration', type=float, default=30.0,
                        help='length of the motion [s] (default: 30)')
    excite.add_argument('--controller', default=CONTROLLER,
                        help=f'the controller node (default: {CONTROLLER}); its parameters '
                        'give the model and limits, its joint_trajectory topic and '
                        'follow_joint_trajectory action take the motion')
    excite.add_argument('--seed', type=int, default=0,
                        help='seed of the optimisation (default: 0)')
    excite.add_argument('--iterations', type=int, default=EXCITATION_ITERATIONS,
                        help='iterations of the optimisation after the best of 8 random '
                        f'draws (default: {EXCITATION_ITERATIONS}; 0: that draw, planned in '
                        'a second)')
    excite.add_argument('--joint-states-topic', default=DEFAULT_TOPIC, dest='states_topic')
    excite.add_argument('--timeout', type=float, default=10.0,
                        help='seconds to wait for the model, /joint_states and the '
                        'controller, and past the end of the motion (default: 10)')
    excite.add_argument('--record', required=True, metavar='DIR',
                        help='the rosbag2 folder to write (must not exist)')
    excite.add_argument('--effort-timing', default=None, dest='effort_timing',
                        choices=EFFORT_TIMINGS,
                        help='the effort timing written into the bag for `estimate` '
                        "(default: held_before when this package's plant publishes the "
                        'joint states, else instant)')
    return excite


def check_excite_arguments(parser, args):
    """Cross-argument checks of `excite`: parser.error (exit status 2)."""
    for name in ('duration', 'timeout'):
        value = getattr(args, name)
        if not (math.isfinite(value) and value > 0.0):
            parser.error(f'--{name}: must be finite and > 0, got {value}')
    if args.iterations < 0:
        parser.error(f'--iterations: must be >= 0, got {args.iterations}')
    if os.path.exists(args.record):
        parser.error(f'--record: {args.record} exists already; give a new folder name')


def main(args=None):
    argv = sys.argv if args is None else list(args)
    try:
        options = parse_arguments(_without_ros_args(argv)[1:])
    except SystemExit as stop:        # --help (0) or a bad argument (2, said on stderr)
        return stop.code
    # excite and plan --send are ROS nodes: their modules import rclpy, which `identify
    # estimate` does without (it runs where ROS is not installed)
    if options.command == 'excite':
        from robot_dynamics.nodes.identify.excite import run_excite
        return run_excite(argv, options)
    if options.command == 'plan':
        def send(*arguments):
            from robot_dynamics.nodes.identify.send import send as send_plan
            return send_plan(*arguments)
        return plan.run_plan(argv, options, send)
    return estimate.main(options)


def _without_ros_args(argv):
    """argv without a ``--ros-args ... [--]`` part (estimate does not use ROS)."""
    return [arg for _, arg, inside in ros_args_positions(argv) if not inside]
