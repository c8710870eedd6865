"""model_from_mjcf: the robot model of an MJCF arm as a ROS 2 parameter file, printed or
written (robot_dynamics.simulation.mjcf_model). No ROS needed:

    ros2 run robot_dynamics model_from_mjcf panda.xml --output menagerie_panda.yaml
    python3 -m robot_dynamics.nodes.model_from_mjcf panda.xml --output menagerie_panda.yaml

Exit status 0, or 1 with one line saying why (a file MuJoCo cannot load, joints that are not
one chain, mujoco not installed); 2 for bad arguments.
"""

import argparse
import os
import sys
import warnings

from robot_dynamics.nodes.common.outputs import write_file
from robot_dynamics.simulation.mjcf_model import (arm_of_mjcf, MjcfModelWarning,
                                                  parameter_file_text)
from robot_dynamics.simulation.mujoco_engine import load_mjcf_file

PROG = 'model_from_mjcf'


def main(argv=None):
    """``model_from_mjcf MJCF [--joints NAME ...] [--output FILE]``: the arm's parameter
    file, printed or written."""
    parser = argparse.ArgumentParser(
        prog=PROG, description='The robot model of an MJCF arm as a ROS 2 '
        'parameter file: the controller then knows the arm the plant runs in MuJoCo.')
    parser.add_argument('mjcf', help='the MJCF (or URDF) file MuJoCo loads')
    parser.add_argument('--joints', nargs='+', metavar='NAME',
                        help='the driven joints (default: every hinge joint, one chain)')
    parser.add_argument('--output', metavar='FILE', help='write here (default: print)')
    parser.add_argument('--urdf', metavar='FILE',
                        help='also write the URDF here (e.g. for robot_state_publisher); the '
                        'parameter file then names it (robot.urdf_file, an absolute path) '
                        'instead of holding it')
    args = parser.parse_args(argv)
    try:
        mj = load_mjcf_file(args.mjcf)
        with warnings.catch_warnings(record=True) as said:
            warnings.simplefilter('always', MjcfModelWarning)
            arm = arm_of_mjcf(mj, args.joints,
                              os.path.splitext(os.path.basename(args.mjcf))[0])
        urdf_file = os.path.abspath(args.urdf) if args.urdf else None
        text = parameter_file_text(arm, os.path.basename(args.mjcf), urdf_file=urdf_file)
    except (ImportError, ValueError) as error:
        print(f'model_from_mjcf: {str(error).replace("mujoco.model_file: ", "")}',
              file=sys.stderr)
        return 1
    for warning in said:
        print(f'model_from_mjcf: warning: {warning.message}', file=sys.stderr)
    for option, path, content in (('--urdf', args.urdf, arm['urdf']),
                                  ('--output', args.output, text)):
        if path:
            try:
                write_file(path, content)
            except OSError as error:
                print(f'model_from_mjcf: {option}: cannot write {path}: {error.strerror}',
                      file=sys.stderr)
                return 1
    if args.output:
        print(f'model_from_mjcf: wrote {args.output}: joints {arm["joints"]}, links '
              f'{arm["links"]}', file=sys.stderr)
    else:
        print(text, end='')
    return 0


if __name__ == '__main__':
    raise SystemExit(main())
