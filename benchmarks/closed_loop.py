"""Closed-loop rows of issue 6: controller reaction latency and the 1 kHz loop's speed.

    PYTHONPATH=. /tmp/venvs/kilted/bin/python benchmarks/closed_loop.py

1. Reaction latency: a probe publishes /joint_states (PUMA 560) and waits for the effort
   command of `computed_torque_controller` (control_mode on_state). A bare rclpy relay
   (subscribe a JointState topic of its own, publish a Float64MultiArray) is the
   yardstick, measured the same way in the same process and executor, alternately.
   Medians over the round trips.
2. Real-time factor of the closed loop at 1 kHz: `robot_dynamics.nodes.sim` (plant RK4 at
   1 ms, /joint_states and one controller cycle every 1 ms of simulated time, lock-step on
   /clock), run as fast as possible: simulated seconds per wall second, node start-up and
   kernel generation included.

Both use a private ROS_DOMAIN_ID and ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST.
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

import rclpy  # noqa: E402
from rclpy.executors import SingleThreadedExecutor  # noqa: E402
from rclpy.node import Node  # noqa: E402
from rclpy.parameter import Parameter  # noqa: E402
from rclpy.qos import QoSProfile, ReliabilityPolicy  # noqa: E402
from sensor_msgs.msg import JointState  # noqa: E402
from std_msgs.msg import Float64MultiArray  # noqa: E402

from robot_dynamics import dynamics  # noqa: E402
from robot_dynamics.nodes import sim  # noqa: E402
from robot_dynamics.nodes.controller import ComputedTorqueController  # noqa: E402

PUMA = os.path.join(REPO, 'config', 'puma560.yaml')
JOINTS = [f'joint_{i}' for i in range(1, 7)]
RELIABLE = QoSProfile(depth=10, reliability=ReliabilityPolicy.RELIABLE)


class Relay(Node):
    """The yardstick: /joint_states in, a Float64MultiArray of the positions out."""

    def __init__(self, states, topic):
        super().__init__('bare_relay')
        self.pub = self.create_publisher(Float64MultiArray, topic, RELIABLE)
        self.create_subscription(JointState, states, self.relay, RELIABLE)

    def relay(self, msg):
        self.pub.publish(Float64MultiArray(data=list(msg.position)))


class Probe(Node):
    def __init__(self, name, states, topic):
        super().__init__(name)
        self.pub = self.create_publisher(JointState, states, RELIABLE)
        self.create_subscription(Float64MultiArray, topic, self.answer, RELIABLE)
        self.answered = False

    def answer(self, msg):
        self.answered = True

    def round_trip(self, executor, k):
        msg = JointState(name=JOINTS, position=[0.1 * ((k % 7) - 3)] * 6, velocity=[0.0] * 6)
        msg.header.stamp = self.get_clock().now().to_msg()
        self.answered = False
        start = time.perf_counter()
        self.pub.publish(msg)
        while not self.answered:
            executor.spin_once(timeout_sec=1.0)
            if time.perf_counter() - start > 2.0:
                return None
        return time.perf_counter() - start


def wait_matched(executor, pairs, limit=10.0):
    start = time.monotonic()
    while time.monotonic() - start < limit:
        if all(p.get_subscription_count() > 0 for p in pairs):
            return
        executor.spin_once(timeout_sec=0.05)
    raise RuntimeError('publishers and subscriptions did not match')


def reaction_latency(count):
    rclpy.init(args=['latency', '--ros-args', '--params-file', PUMA])
    try:
        controller = ComputedTorqueController(parameter_overrides=[
            Parameter('control_mode', value='on_state'),
            Parameter('command_topic', value='/controller/commands'),
            Parameter('publish_state', value=False)])
        relay = Relay('/relay/joint_states', '/relay/commands')
        probes = {'controller': Probe('probe_controller', '/joint_states',
                                      '/controller/commands'),
                  'relay': Probe('probe_relay', '/relay/joint_states', '/relay/commands')}
        executor = SingleThreadedExecutor()
        for node in (controller, relay, *probes.values()):
            executor.add_node(node)
        wait_matched(executor, [p.pub for p in probes.values()]
                     + [controller._command_pub, relay.pub])
        samples = {name: [] for name in probes}
        for k in range(count + 20):
            for name, probe in probes.items():
                dt = probe.round_trip(executor, k)
                if k >= 20 and dt is not None:        # the first 20 warm up
                    samples[name].append(dt)
        executor.shutdown()
        for node in (controller, relay, *probes.values()):
            node.destroy_node()
    finally:
        rclpy.try_shutdown()
    return {name: statistics.median(v) for name, v in samples.items()}, \
        {name: len(v) for name, v in samples.items()}


def real_time_factor(duration):
    args = sim.parse_args(['--duration', str(duration), '--control-rate', '1000'])
    rclpy.init(args=['sim', '--ros-args', '--params-file', PUMA, '--params-file',
                     os.path.join(REPO, 'config', 'sim.yaml')])
    try:
        start = time.monotonic()
        _, plant = sim.run(args, wall_limit=120.0)
        wall = time.monotonic() - start
    finally:
        rclpy.try_shutdown()
    return plant.sim_time / wall, plant.sim_time, wall


def main():
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--count', type=int, default=300, help='round trips per node (300)')
    parser.add_argument('--duration', type=float, default=3.0,
                        help='simulated seconds of the 1 kHz loop (3)')
    parser.add_argument('--backend', default='generated', help='dynamics backend')
    args = parser.parse_args()
    dynamics.set_backend(args.backend)
    print(f'# backend {dynamics.get_backend()}, ROS_DOMAIN_ID {os.environ["ROS_DOMAIN_ID"]}')
    medians, counts = reaction_latency(args.count)
    ratio = medians['controller'] / medians['relay']
    print(f'reaction latency, median of {counts["controller"]} round trips: controller '
          f'{medians["controller"] * 1e6:.0f} µs, bare relay {medians["relay"] * 1e6:.0f} µs, '
          f'ratio {ratio:.2f}')
    rtf, simulated, wall = real_time_factor(args.duration)
    print(f'1 kHz closed loop (plant RK4 1 ms + controller every 1 ms, lock-step): '
          f'{simulated:.2f} s simulated in {wall:.2f} s wall, real-time factor {rtf:.2f}')


if __name__ == '__main__':
    main()
