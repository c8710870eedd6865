"""What a warning repeated every cycle costs the controller: one control cycle (the state
callback, publish included, no DDS round trip) timed in-process on the PUMA 560, its effort
clipped every cycle (effort_limits far below what holding needs: the clipping warning is
asked for every cycle and printed every 2 s) against the same cycle unclipped, samples
alternating so that the load of a shared machine cancels.

    PYTHONPATH=. .venv-kilted/bin/python benchmarks/clipped_cycle.py [--samples 15]

Two rows: the warnings throttled as the nodes do (robot_dynamics.nodes.common.throttled_log:
a repeat costs a clock read), and the same cycle with rclpy's own throttle instead
(`logger.warning(text, throttle_duration_sec=2.0)`, which looks up the caller's source on
every call). Target (doc/realtime.md): a clipped cycle costs at most 1.5x an unclipped one.
"""

import argparse
import os
import statistics
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)
os.environ.setdefault('ROS_DOMAIN_ID', str(100 + os.getpid() % 100))
os.environ['ROS_AUTOMATIC_DISCOVERY_RANGE'] = 'LOCALHOST'

import numpy as np  # noqa: E402
import rclpy  # noqa: E402
from sensor_msgs.msg import JointState  # noqa: E402

PUMA = os.path.join(REPO, 'config', 'puma560.yaml')
CALLS = 200                     # cycles per sample


def rclpy_throttle(node, level, text, period=2.0, key=None, depth=1):
    """The controller's throttled line as rclpy would throttle it (one context per site)."""
    getattr(node.get_logger(), level)(text, throttle_duration_sec=period)
    return True


def measure(samples):
    """{(throttle, clipped): [seconds per cycle, one per sample]}."""
    from rclpy.parameter import Parameter
    from robot_dynamics.nodes.controller import ComputedTorqueController, node as controller_node
    from robot_dynamics.nodes.common.throttled_log import log_throttled
    context = rclpy.Context()
    rclpy.init(args=['clipped_cycle', '--ros-args', '--params-file', PUMA], context=context)
    try:
        controller = ComputedTorqueController(context=context, parameter_overrides=[
            Parameter('control_mode', value='on_state'),
            Parameter('state_publish_rate', value=100.0),
            Parameter('check_command_controller', value=False)])
        n = controller.model.n
        msg = JointState(name=list(controller.joints), position=[0.1] * n, velocity=[0.0] * n)
        clock = controller.get_clock()
        limits = np.asarray(controller.effort_limits, dtype=float)
        low = np.full(n, 1e-3)                      # every cycle clipped

        def cycle():
            msg.header.stamp = clock.now().to_msg()
            controller._on_joint_states(msg)
        cycle()
        throttles = {'throttled_log': log_throttled, 'rclpy throttle': rclpy_throttle}
        times = {(name, clipped): [] for name in throttles for clipped in (False, True)}
        for _ in range(samples):
            for name, throttle in throttles.items():
                controller_node.log_throttled = throttle
                for clipped in (False, True):
                    controller.effort_limits = low if clipped else limits
                    cycle()                         # warm: the first clipped line printed
                    begin = time.perf_counter()
                    for _ in range(CALLS):
                        cycle()
                    times[(name, clipped)].append((time.perf_counter() - begin) / CALLS)
        controller_node.log_throttled = log_throttled
        assert controller._saturated_cycles > 0
        controller.destroy_node()
    finally:
        rclpy.try_shutdown(context=context)
    return times


def main():
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--samples', type=int, default=15)
    args = parser.parse_args()
    times = measure(args.samples)
    print('| warnings throttled by | unclipped cycle | clipped cycle | ratio (median of '
          'paired) | target <= 1.5 |')
    print('|---|---|---|---|---|')
    for name in ('throttled_log', 'rclpy throttle'):
        plain, clipped = times[(name, False)], times[(name, True)]
        ratio = statistics.median(c / p for c, p in zip(clipped, plain))
        target = ('MET' if ratio <= 1.5 else 'NOT MET') if name == 'throttled_log' else \
            '(for comparison)'
        print(f'| {name} | {statistics.median(plain) * 1e6:.0f} µs | '
              f'{statistics.median(clipped) * 1e6:.0f} µs | {ratio:.2f} | {target} |')
    return 0


if __name__ == '__main__':
    sys.exit(main())
