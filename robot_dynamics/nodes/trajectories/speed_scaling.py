"""The controller's speed scaling interface, with joint_trajectory_controller's (JTC's) names
(Jazzy and Kilted have the same ones): the `speed_scaling.*` parameters and the
`~/speed_scaling_input` subscription (control_msgs/msg/SpeedScalingFactor). The time
mapping itself is robot_dynamics/speed_scaling.py; doc/trajectories.md, "Speed scaling".
"""

import functools

from rclpy.event_handler import SubscriptionEventCallbacks
from rclpy.qos import (DurabilityPolicy, qos_policy_name_from_kind, QoSProfile,
                       ReliabilityPolicy)

from robot_dynamics.nodes.common.diagnostics import WARN
from robot_dynamics.nodes.common.ros_params import ConfigurationError, declare, validated
from robot_dynamics.trajectories.speed_scaling import check_factor, DEFAULT_RATE_LIMIT

try:
    from control_msgs.msg import SpeedScalingFactor
    UNAVAILABLE = None
except ImportError as error:        # no control_msgs, or one built before the message
    SpeedScalingFactor = None
    UNAVAILABLE = str(error)

TOPIC = 'speed_scaling_input'
# JTC's QoS: system defaults (reliable) made transient local, so a factor published before
# the controller (re)starts still reaches it; a publisher must offer transient local too.
QOS = QoSProfile(depth=1, reliability=ReliabilityPolicy.RELIABLE,
                 durability=DurabilityPolicy.TRANSIENT_LOCAL)


def declare_parameters(node):
    """(initial factor, rate limit [1/s]) from the node's parameters; ConfigurationError
    for a bad one, and for JTC's hardware interface names, which this controller has no
    use for."""
    name = 'speed_scaling.initial_scaling_factor'
    initial = validated(node, name, declare(node, name))
    try:
        initial = check_factor(initial)
    except ValueError as error:
        raise ConfigurationError(f'{name}: {error}') from None
    rate = validated(node, 'speed_scaling.rate_limit',
                     declare(node, 'speed_scaling.rate_limit', DEFAULT_RATE_LIMIT))
    for name in ('state_interface', 'command_interface'):
        value = validated(node, f'speed_scaling.{name}', declare(node, f'speed_scaling.{name}'))
        if value != '':
            raise ConfigurationError(
                f'speed_scaling.{name}: {value!r}: this controller has no ros2_control '
                'hardware interfaces; leave it empty and publish the factor on '
                f'~/{TOPIC} (control_msgs/msg/SpeedScalingFactor)')
    return initial, rate


def attach(node):
    """`~/speed_scaling_input` of the controller `node` (once its sampler exists), or None,
    with one info line, when control_msgs lacks the message. Its /diagnostics keys come
    from `diagnose`, through ``node.describe_speed_scaling(report)``."""
    node.speed_scaling_refused = None
    node.describe_speed_scaling = functools.partial(diagnose, node)
    if UNAVAILABLE is not None:
        node.get_logger().info(f'control_msgs.msg.SpeedScalingFactor cannot be imported '
                               f'({UNAVAILABLE}): ~/{TOPIC} is off; the factor stays '
                               f'{node.sampler.scaled_time.requested:g}')
        return None
    return node.create_subscription(SpeedScalingFactor, f'~/{TOPIC}',
                                    lambda msg: on_factor(node, msg.factor), QOS,
                                    event_callbacks=SubscriptionEventCallbacks(
                                        incompatible_qos=incompatible_publisher(node)))


def incompatible_publisher(node):
    """The incompatible-QoS event callback of ~/speed_scaling_input: a warning saying how
    to publish the factor (e.g. `ros2 topic pub` without `--qos-durability transient_local`,
    whose messages would never arrive), once per such publisher discovered."""
    def warn(event):
        try:
            policy = qos_policy_name_from_kind(event.last_policy_kind)
        except ValueError:
            policy = f'policy {event.last_policy_kind}'
        topic = f'{node.get_fully_qualified_name().rstrip("/")}/{TOPIC}'
        node.get_logger().warning(
            f'{topic}: a publisher with incompatible QoS ({policy}) is ignored, none of its '
            'factors arrive: publish reliable and transient local (JTC\'s QoS), e.g. '
            '`ros2 topic pub --once --qos-durability transient_local --qos-reliability '
            f'reliable {topic} control_msgs/msg/SpeedScalingFactor "{{factor: 0.5}}"`')
    return warn


def on_factor(node, value):
    """Apply a factor received on ~/speed_scaling_input, or refuse it with one log line
    naming the value (NaN, inf, < 0 or > 1 + 1e-6; up to that, 1) and keep the refusal
    for /diagnostics (`refusal`) until a valid factor arrives; never raises."""
    sampler = node.sampler
    old = sampler.scaled_time.requested
    try:
        sampler.set_speed_scaling_factor(value, node._last_t if node._ready else None)
    except ValueError as error:
        node.speed_scaling_refused = f'{error}; the factor stays {old:g}'
        node.get_logger().warning(f'{TOPIC}: factor refused: {node.speed_scaling_refused}')
        return False
    node.speed_scaling_refused = None
    new = sampler.scaled_time.requested
    if new != old:
        node.get_logger().info(f'{TOPIC}: speed scaling factor {old:g} -> {new:g}')
    return True


def diagnose(node, report):
    """The `speed scaling factor` of /diagnostics (in effect, and requested while on its
    way) and, until a valid factor arrives after a refused one, `speed scaling refused`
    with a WARN."""
    sampler = getattr(node, 'sampler', None)
    if sampler is None:
        return
    requested = sampler.scaled_time.requested
    now = node._last_t if node._ready else None
    current = sampler.scaled_time.factor(now) if now is not None else requested
    report.add('speed scaling factor', f'{current:g}' if current == requested
               else f'{current:g} (ramping to {requested:g})')
    refused = getattr(node, 'speed_scaling_refused', None)
    report.add('speed scaling refused', refused or 'none')
    if refused:
        report.flag(WARN, f'{TOPIC}: factor refused: {refused}')
