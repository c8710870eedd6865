"""The same FollowJointTrajectory goals to ros2_controllers' joint_trajectory_controller and
to this controller, each driving the simulated PUMA 560 behind the same ros2_control stack
(benchmarks/jtc_yardstick.py's processes): accepted or refused, status and error_code, and
the error_string, side by side. Run locally (never in CI):

    python3 benchmarks/jtc_parity.py [--only NAME ...]

Goals (joint names of config/puma560.yaml; the arm rests at [LEE]'s start pose): a valid
move; no points; an unknown joint; a partial goal; a NaN position; times not increasing; a
stamp that ends the trajectory in the past; a path tolerance of -2; a goal tolerance no arm
meets (1e-12 rad within 0.3 s); multi-DOF joint names; a position beyond the joint limits.
"""

import argparse
import math
import os
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import jtc_yardstick  # noqa: E402

STATUS = {4: 'SUCCEEDED', 5: 'CANCELED', 6: 'ABORTED'}
CODES = {0: 'SUCCESSFUL', -1: 'INVALID_GOAL', -2: 'INVALID_JOINTS',
         -3: 'OLD_HEADER_TIMESTAMP', -4: 'PATH_TOLERANCE_VIOLATED',
         -5: 'GOAL_TOLERANCE_VIOLATED'}


def goals(joints, start, clock_now):
    """[(name, FollowJointTrajectory.Goal)]."""
    from builtin_interfaces.msg import Duration
    from control_msgs.action import FollowJointTrajectory
    from control_msgs.msg import JointTolerance
    from trajectory_msgs.msg import JointTrajectoryPoint

    def point(positions, seconds):
        return JointTrajectoryPoint(
            positions=[float(p) for p in positions], velocities=[0.0] * len(positions),
            time_from_start=Duration(sec=int(seconds), nanosec=int(round(
                (seconds - int(seconds)) * 1e9))))

    def goal(points, names=None, **extra):
        made = FollowJointTrajectory.Goal()
        made.trajectory.joint_names = list(names or joints)
        made.trajectory.points = points
        for key, value in extra.items():
            setattr(made, key, value)
        return made
    target = np.array(start) + 0.1
    out = [('valid move', goal([point(target, 1.5)])),
           ('no points', goal([]))]
    out.append(('unknown joint', goal([point(target, 1.5)],
                                      names=['shoulder'] + joints[1:])))
    out.append(('partial goal (3 of 6)', goal([point(target[:3], 1.5)], names=joints[:3])))
    bad = target.copy()
    bad[2] = math.nan
    out.append(('NaN position', goal([point(bad, 1.5)])))
    out.append(('times not increasing', goal([point(target, 1.0), point(target + 0.05, 1.0)])))
    old = goal([point(target, 1.0)])
    past = clock_now() - 10.0
    old.trajectory.header.stamp.sec, old.trajectory.header.stamp.nanosec = int(past), 0
    out.append(('stamp: ends in the past', old))
    out.append(('path tolerance -2', goal(
        [point(start, 1.0)], path_tolerance=[JointTolerance(name=joints[1], position=-2.0)])))
    out.append(('goal tolerance 1e-12 within 0.3 s', goal(
        [point(target, 1.0)], goal_tolerance=[JointTolerance(name=j, position=1e-12)
                                              for j in joints],
        goal_time_tolerance=Duration(nanosec=300_000_000))))
    multi = goal([point(start, 1.0)])
    multi.multi_dof_trajectory.joint_names = ['base']
    out.append(('multi-DOF joint names', multi))
    far = np.array(start)
    far[0] = 9.0
    out.append(('position beyond the limits', goal([point(far, 2.0)])))
    return out


def send(node, client, goal, timeout=15.0):
    """(accepted, status, error_code, error_string)."""
    import rclpy
    future = client.send_goal_async(goal)
    end = time.monotonic() + timeout
    while not future.done() and time.monotonic() < end:
        rclpy.spin_once(node, timeout_sec=0.01)
    if not future.done():
        return (None, 'no answer', None, '')
    handle = future.result()
    if not handle.accepted:
        return (False, 'REJECTED', None, '')
    result = handle.get_result_async()
    while not result.done() and time.monotonic() < end:
        rclpy.spin_once(node, timeout_sec=0.01)
    if not result.done():
        handle.cancel_goal_async()
        return (True, 'no result within the timeout', None, '')
    answer = result.result()
    return (True, STATUS.get(answer.status, str(answer.status)), answer.result.error_code,
            answer.result.error_string)


def run(which, args, folder):
    """Start the stack of `which` ('jtc' or 'ours'), send every goal, return the rows."""
    import rclpy
    from rclpy.action import ActionClient
    from control_msgs.action import FollowJointTrajectory
    from robot_dynamics.model import RobotModel
    from robot_dynamics.parameters.layering import layered_parameters
    files = jtc_yardstick.robot_files('puma560')
    values = layered_parameters(files, '/plant_simulator')
    model = RobotModel.from_yaml(files[0])
    joints = list(values['joints'])
    start = list(values['initial_positions'])
    gains = jtc_yardstick.jtc_gains(model, np.array(start), 40.0, 0.2)
    stack, node = jtc_yardstick.start_stack(args, which, gains, folder)
    action = ('/joint_trajectory_controller' if which == 'jtc'
              else '/computed_torque_controller') + '/follow_joint_trajectory'
    client = ActionClient(node, FollowJointTrajectory, action)
    rows = []
    try:
        end = time.monotonic() + 60.0
        while not client.server_is_ready() and time.monotonic() < end:
            rclpy.spin_once(node, timeout_sec=0.05)
        settle = time.monotonic() + 3.0
        while time.monotonic() < settle:
            rclpy.spin_once(node, timeout_sec=0.01)

        def now():
            return node.get_clock().now().nanoseconds * 1e-9
        for name, goal in goals(joints, start, now):
            if args.only and name not in args.only:
                continue
            rows.append((name, send(node, client, goal)))
            print(f'{which:4s} {name:34s} {rows[-1][1]}', flush=True)
            pause = time.monotonic() + 1.0
            while time.monotonic() < pause:
                rclpy.spin_once(node, timeout_sec=0.01)
    finally:
        client.destroy()
        jtc_yardstick.stop_stack(stack, node)
    return rows


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('--only', nargs='*', default=None)
    jtc_yardstick.add_common_options(parser)
    args = parser.parse_args(argv)
    args.robot = 'puma560'
    jtc_yardstick.set_probe_priority(args)
    folder = tempfile.mkdtemp(prefix='jtc_parity_')
    print(f'logs in {folder}')
    results = {which: dict(run(which, args, os.path.join(folder, which) + '/'))
               for which in ('jtc', 'ours')}
    print('\n| goal | joint_trajectory_controller | this controller |\n|---|---|---|')
    for name in results['ours']:
        cells = []
        for which in ('jtc', 'ours'):
            accepted, status, code, text = results[which].get(name, (None, '-', None, ''))
            cell = status + (f', {CODES.get(code, code)}' if code is not None else '')
            if text:
                cell += f': `{text[:90]}`'
            cells.append(cell.replace('|', '\\|'))
        print(f'| {name} | {cells[0]} | {cells[1]} |')
    return 0


if __name__ == '__main__':
    sys.exit(main())
