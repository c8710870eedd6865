"""The controller's Cartesian topics:

- `~/target_pose` (geometry_msgs/PoseStamped): the target of `cartesian_impedance`, in the
  robot's base frame (`cartesian.base_frame`; an empty frame_id is taken as that frame),
  held at rest (zero target velocity and acceleration) until the next one, as franka_ros's
  cartesian_impedance_example_controller takes its equilibrium pose. Refused in one warning
  naming the field (another frame, a non-finite value, a quaternion whose norm is not 1) or
  the law (under any other `control_law`).
- `~/target_twist` (geometry_msgs/TwistStamped, base frame, optional): the target's velocity
  [m/s, rad/s] for tracking a moving target: it applies to the latest target pose and is
  cleared by the next `~/target_pose` (send the pose, then its twist).
- `~/target_accel` (geometry_msgs/AccelStamped, base frame, optional): the target's
  acceleration [linear; angular] (m/s², rad/s²), fed forward (Λ (a_d − J̇ q̇) + C q̇); same
  semantics as `~/target_twist`: it applies to the latest target pose and is cleared by the
  next `~/target_pose` (send the pose, its twist, then its acceleration).
- `~/tool_pose` (geometry_msgs/PoseStamped, base frame): the measured pose of the
  controlled frame (the model's tip frame times `cartesian.tool`) under every law, with
  ~/feedback (publish_state, at most state_publish_rate), while somebody subscribes.

The messages arrive between cycles; the cycle itself tests one flag (`wanted`, kept by the
publisher's matched events), and computes the tool pose after the effort went out.
"""

import math

import numpy as np
from geometry_msgs.msg import AccelStamped, PoseStamped, TwistStamped
from rclpy.event_handler import PublisherEventCallbacks

from robot_dynamics import control
from robot_dynamics.dynamics import kinematics
from robot_dynamics.nodes.common import control_laws
from robot_dynamics.nodes.common.throttled_log import log_throttled

THROTTLE = 2.0              # s between repeated warnings
UNIT_TOLERANCE = 1.0e-3     # |‖q‖ − 1| accepted for a target quaternion


class CartesianTopics:
    """~/target_pose, ~/target_twist, ~/target_accel and ~/tool_pose of the controller
    `node`."""

    def __init__(self, node):
        self.node = node
        node.create_subscription(PoseStamped, '~/target_pose', self._on_target_pose, 10)
        node.create_subscription(TwistStamped, '~/target_twist', self._on_target_twist, 10)
        node.create_subscription(AccelStamped, '~/target_accel', self._on_target_accel, 10)
        self.wanted = False         # ~/tool_pose has subscribers
        self._counted = False       # without matched events: count them at each publish
        try:
            events = PublisherEventCallbacks(matched=self._on_matched)
        except TypeError:           # an rclpy without matched events (Humble)
            events, self.wanted, self._counted = None, True, True
        self._tool_pose_pub = node.create_publisher(PoseStamped, '~/tool_pose', 10,
                                                    event_callbacks=events)
        self._msg = PoseStamped()

    def _on_matched(self, info):
        self.wanted = info.current_count > 0

    @property
    def base_frame(self):
        return control_laws.base_frame(self.node, self.node.law_settings)

    def _warn(self, text):
        log_throttled(self.node, 'warning', text, THROTTLE, depth=2)   # per caller

    def _cartesian_law(self, topic):
        """The Cartesian law in effect, or None (a warning said why)."""
        node = self.node
        refusal = control_laws.refusal(node.control_law, 'target_pose')
        if refusal is not None:
            self._warn(f'{topic} refused: {refusal}')
            return None
        law = node.law
        if not isinstance(law, control_laws.CartesianLaw) or not node._ready:
            self._warn(f'{topic} refused: cartesian_impedance not in effect yet (the first '
                       'cycle after the switch, with every joint seen, holds the tool pose)')
            return None
        return law

    def _frame_ok(self, topic, msg):
        frame = msg.header.frame_id
        if frame and frame != self.base_frame:
            self._warn(f'{topic}.header.frame_id: {frame!r} is not the base frame '
                       f'{self.base_frame!r} (cartesian.base_frame); refused')
            return False
        return True

    def _on_target_pose(self, msg):
        law = self._cartesian_law('target_pose')
        if law is None or not self._frame_ok('target_pose', msg):
            return
        p, o = msg.pose.position, msg.pose.orientation
        position = np.array([p.x, p.y, p.z])
        quaternion = np.array([o.x, o.y, o.z, o.w])
        if not np.all(np.isfinite(position)):
            self._warn(f'target_pose.pose.position: {position.tolist()} is not finite; '
                       'refused')
            return
        norm = float(np.linalg.norm(quaternion))
        if not (math.isfinite(norm) and abs(norm - 1.0) <= UNIT_TOLERANCE):
            self._warn(f'target_pose.pose.orientation: (x y z w) = {quaternion.tolist()} '
                       f'is not a unit quaternion (norm {norm:.6g}); refused')
            return
        quaternion = quaternion / norm
        try:
            law.law.validate_target(position, quaternion)
        except ValueError as error:
            self._warn(f'target_pose.pose: {error}; refused')
            return
        law.target = control.CartesianTarget(position, quaternion, None, None)

    def _on_target_twist(self, msg):
        law = self._cartesian_law('target_twist')
        if law is None or not self._frame_ok('target_twist', msg):
            return
        v, w = msg.twist.linear, msg.twist.angular
        velocity = np.array([v.x, v.y, v.z, w.x, w.y, w.z])
        if not np.all(np.isfinite(velocity)):
            self._warn(f'target_twist.twist: {velocity.tolist()} is not finite; refused')
            return
        law.target = law.target._replace(velocity=velocity)

    def _on_target_accel(self, msg):
        law = self._cartesian_law('target_accel')
        if law is None or not self._frame_ok('target_accel', msg):
            return
        a, alpha = msg.accel.linear, msg.accel.angular
        acceleration = np.array([a.x, a.y, a.z, alpha.x, alpha.y, alpha.z])
        if not np.all(np.isfinite(acceleration)):
            self._warn(f'target_accel.accel: {acceleration.tolist()} is not finite; refused')
            return
        law.target = law.target._replace(acceleration=acceleration)

    def publish_tool_pose(self, stamp):
        """~/tool_pose at the measured q (called by the cycle when `wanted`)."""
        node = self.node
        if self._counted and self._tool_pose_pub.get_subscription_count() == 0:
            return
        law = node.law
        if isinstance(law, control_laws.CartesianLaw):
            position, quaternion = law.law.pose(node._q)
        else:
            transform = kinematics.tool_pose(node.model, node._q,
                                             node.law_settings['cartesian.tool'])
            position = transform[:3, 3]
            quaternion = kinematics.quaternion_from_matrix(transform[:3, :3])
        msg = self._msg
        msg.header.stamp = stamp
        msg.header.frame_id = self.base_frame
        msg.pose.position.x, msg.pose.position.y, msg.pose.position.z = (
            float(v) for v in position)
        (msg.pose.orientation.x, msg.pose.orientation.y, msg.pose.orientation.z,
         msg.pose.orientation.w) = (float(v) for v in quaternion)
        self._tool_pose_pub.publish(msg)
