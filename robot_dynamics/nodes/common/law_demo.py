"""`sim --control-law LAW [--push FX FY FZ]`: what the demo does under each control law.

- computed_torque, joint_impedance: the joint demo move (DemoMove).
- cartesian_impedance: a Cartesian move: once the controller holds, a target pose
  CARTESIAN_STEP above the measured tool pose (same orientation) on ~/target_pose.
- gravity_compensation: no move; the arm floats where it is (push it with --push).
- --push FX FY FZ: a force [N] (base frame) on the tip through the plant's
  ~/external_wrench from PUSH_START s of simulated time, for --push-duration s (default: to
  the end): the arm floats away under gravity_compensation, deflects and holds under
  an impedance.
At the end one line reports the tool's displacement (from ~/tool_pose).
"""

import numpy as np
from geometry_msgs.msg import PoseStamped, WrenchStamped
from rclpy.node import Node
from rclpy.qos import DurabilityPolicy, QoSProfile
from std_msgs.msg import String

CARTESIAN_STEP = (0.0, 0.0, 0.05)   # m, base frame: the Cartesian demo's move
PUSH_START = 0.5                    # s of simulated time


class LawDemo(Node):
    """The Cartesian target and the push of `sim`'s law demos."""

    def __init__(self, control_law, push=None, push_duration=None,
                 controller='computed_torque_controller', plant='plant_simulator', **kwargs):
        super().__init__('law_demo', **kwargs)
        self.control_law = control_law
        self.push = None if push is None else [float(v) for v in push]
        self.push_end = None if push_duration is None else PUSH_START + push_duration
        self.first_pose = self.last_pose = None
        self.target = None
        self._holding = False
        self._pushing = None        # None: not yet, True: on, False: over
        self._target_pub = self.create_publisher(PoseStamped, f'{controller}/target_pose',
                                                 10)
        self._wrench_pub = self.create_publisher(WrenchStamped, f'{plant}/external_wrench', 10)
        self.create_subscription(PoseStamped, f'{controller}/tool_pose', self._on_pose, 10)
        latched = QoSProfile(depth=1, durability=DurabilityPolicy.TRANSIENT_LOCAL)
        self.create_subscription(String, f'{controller}/status', self._on_status, latched)
        self.create_timer(0.01, self._tick)

    def _on_status(self, msg):
        self._holding = msg.data == 'holding'

    def _on_pose(self, msg):
        p = msg.pose.position
        self.last_pose = np.array([p.x, p.y, p.z])
        if self.first_pose is None and self._holding:
            self.first_pose = self.last_pose.copy()
            if self.control_law == 'cartesian_impedance':
                self._send_target(msg)

    def _send_target(self, pose):
        target = PoseStamped()
        target.header.frame_id = pose.header.frame_id
        target.pose = pose.pose
        target.pose.position.x += CARTESIAN_STEP[0]
        target.pose.position.y += CARTESIAN_STEP[1]
        target.pose.position.z += CARTESIAN_STEP[2]
        self.target = self.first_pose + CARTESIAN_STEP
        self._target_pub.publish(target)
        self.get_logger().info(f'target pose sent: the tool {CARTESIAN_STEP} m from '
                               f'{np.round(self.first_pose, 4).tolist()}')

    def _tick(self):
        if self.push is None or self._pushing is False:
            return
        t = self.get_clock().now().nanoseconds * 1e-9
        if self._pushing is None and t >= PUSH_START:
            self._wrench(self.push)
            self._pushing = True
            self.get_logger().info(f'pushing the tip with {self.push} N (base frame)')
        elif self._pushing and self.push_end is not None and t >= self.push_end:
            self._wrench([0.0, 0.0, 0.0])
            self._pushing = False
            self.get_logger().info('push released')

    def _wrench(self, force):
        msg = WrenchStamped()
        msg.header.stamp = self.get_clock().now().to_msg()
        msg.wrench.force.x, msg.wrench.force.y, msg.wrench.force.z = force
        self._wrench_pub.publish(msg)

    def report(self):
        """One line: the tool's displacement (and the target's error), or ''."""
        if (self.first_pose is None or self.last_pose is None
                or self.control_law in ('computed_torque', 'joint_impedance')):
            return ''           # the tracking table says it (the move, the deflection)
        moved = self.last_pose - self.first_pose
        text = (f'{self.control_law}: tool moved {np.round(moved * 1000, 2).tolist()} mm '
                f'(|{np.linalg.norm(moved) * 1000:.2f}| mm)')
        if self.target is not None:
            text += (f'; distance to the target pose '
                     f'{np.linalg.norm(self.last_pose - self.target) * 1000:.2f} mm')
        return text
