"""Tracking error and loop latency of [LEE]'s move at 1 kHz: the direct path (plant <->
controller, the 1 kHz bring-up of config/sim_1khz.yaml) against the path through a real
ros2_control stack (as launch/ros2_control_sim.launch.py starts it: topic_based_ros2_control,
joint_state_broadcaster, effort controller, controller_manager at 1 kHz). Run locally with
ROS, ros2_control and topic_based_ros2_control installed (never in CI):

    python3 benchmarks/ros2_control_tracking.py [--robot puma560] [--runs 2] [--latency]
                                                [--realtime 80 --probe-priority 20]

Each run starts the nodes of one path as processes (benchmarks/jtc_yardstick.py's `trial`),
sends the demo move (the quintic of config/sim_puma560.yaml, 2 s, 20 points) stamped to start
1 s ahead and prints, per joint: the true tracking error (the quintic at the plant's stamps
minus the plant's own state, max and RMS over the move and 1 s after), the controller's
~/error (its reference minus the state it was given: through ros2_control the broadcaster's
copy), the largest effort, and with --latency the hops of the loop timed by this probe's
receive times: direct, plant state -> effort command; through ros2_control, plant state ->
/joint_states (the same values), /joint_states -> effort command, effort command -> the
plant's JointState command (the same values). It ends with each path's median over the
runs and, with both paths, the ratio of the medians against the target (within 3x).
"""

import argparse
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import jtc_yardstick  # noqa: E402

TARGET = 3.0     # through ros2_control within this many times the direct path's error


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('--robot', default='puma560')
    parser.add_argument('--runs', type=int, default=1)
    parser.add_argument('--duration', type=float, default=2.0)
    parser.add_argument('--paths', nargs='+', default=['direct', 'ours'],
                        choices=('direct', 'ours'))
    parser.add_argument('--settle', type=float, default=1e-3)
    jtc_yardstick.add_common_options(parser)
    args = parser.parse_args(argv)
    jtc_yardstick.set_probe_priority(args)
    import tempfile
    folder = tempfile.mkdtemp(prefix='ros2_control_tracking_')
    print(f'logs in {folder}')
    largest = {path: [] for path in args.paths}
    for run in range(args.runs):
        for path in args.paths:
            load = os.getloadavg()[0]
            result = jtc_yardstick.trial(args, path, args.duration, None, folder)
            label = 'direct (plant <-> controller)' if path == 'direct' else \
                'through ros2_control (topic_based_ros2_control)'
            jtc_yardstick.show(f'run {run + 1}, {label}, load average {load:.1f}', result)
            largest[path].append(float(result['max'].max()))
    print(summary(largest))
    return 0


def summary(largest):
    """The runs' largest errors per path ({path: [rad]}), their medians and, with both
    paths, the ratio of the medians against the target (through ros2_control within 3x
    the direct path's)."""
    lines = []
    for path, values in largest.items():
        lines.append(f'{path}: largest error of each run '
                     + ', '.join(f'{1e3 * v:.4f}' for v in values)
                     + f' mrad; median {1e3 * statistics.median(values):.4f} mrad')
    if all(largest.get(path) for path in ('direct', 'ours')):
        ratio = statistics.median(largest['ours']) / statistics.median(largest['direct'])
        lines.append(f'through ros2_control / direct, medians of {len(largest["ours"])} '
                     f'interleaved runs: {ratio:.2f}, target <= {TARGET:g}: '
                     + ('met' if ratio <= TARGET else 'not met'))
    return '\n'.join(lines)


if __name__ == '__main__':
    sys.exit(main())
