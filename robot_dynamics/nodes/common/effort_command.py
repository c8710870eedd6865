"""The plant's effort command: which message it takes on `command_topic` and how it reads it.

`command_message` (read-only):

- ``float64_multi_array`` (default): std_msgs/Float64MultiArray, one effort per joint in
  `joints` order (what this package's controller publishes, and what ros2_controllers'
  effort controllers take);
- ``joint_state``: sensor_msgs/JointState with `name` and `effort`, mapped by name (any
  order), as a ros2_control hardware plugin that talks over topics sends its commands
  (topic_based_ros2_control's TopicBasedSystem publishes every joint of its
  <ros2_control> block with its effort command interface on `joint_commands_topic`;
  `position` and `velocity` are empty then, and ignored here in any case).

A command must give one finite effort for every joint of the plant, each joint once; a
message that does not (a subset of the joints, a name the plant does not have, a name
twice, `effort` shorter or longer than `name`, a NaN or infinite effort) is refused whole
with one throttled log line naming the field and the joints, and the plant keeps the last
good command: as ros2_control does with a command it refuses (the effort controller
then writes nothing, so the hardware's command interfaces keep their last values), and as
the Float64MultiArray path does. That command ages as usual: `command_timeout` counts from
the last good one (brakes or zero effort after it), whatever arrives meanwhile. A message
whose efforts are all NaN is ros2_control's "no command": the value a command interface
holds before any controller wrote it (declare it with <param name="initial_value">nan
</param> on the effort state interface; TopicBasedSystem starts its commands from the state
interfaces' initial values); it is refused like the others, at info level, so the plant
stays on its brakes until a controller commands the arm.
"""

import numpy as np

from robot_dynamics.nodes.common.ros_params import as_choice, declare, validated

FLOAT64_MULTI_ARRAY = 'float64_multi_array'
JOINT_STATE = 'joint_state'
COMMAND_MESSAGES = (FLOAT64_MULTI_ARRAY, JOINT_STATE)
THROTTLE = 2.0        # s between repeated log lines about refused commands


def declare_command_message(node):
    """Declare `command_message` on `node` and return its value (checked)."""
    return validated(node, 'command_message', declare(node, 'command_message'))


def message_type(kind):
    """The ROS message class of a `command_message` value."""
    if kind == JOINT_STATE:
        from sensor_msgs.msg import JointState
        return JointState
    from std_msgs.msg import Float64MultiArray
    return Float64MultiArray


class Refused(ValueError):
    """A command refused whole: `str()` is the reason, naming the field and the joints;
    `level` is the log level to say it at ('warning', or 'info' for "no command")."""

    def __init__(self, reason, level='warning'):
        super().__init__(reason)
        self.level = level


def _joints_text(names, limit=6):
    names = list(names)
    shown = ', '.join(str(name) for name in names[:limit])
    return shown + (f' (+{len(names) - limit} more)' if len(names) > limit else '')


class EffortCommand:
    """Reads a command message into the efforts in `joints` order (an (n,) float array),
    or raises Refused. No ROS import: the messages are read through their fields."""

    def __init__(self, joints, kind=FLOAT64_MULTI_ARRAY, ignored=()):
        """ignored: names a JointState command may also give, whose efforts are dropped
        (the plant's stamp_joint, which the hardware plugin sends a command for too)."""
        self.joints = list(joints)
        self.kind = as_choice('command_message', kind, COMMAND_MESSAGES)
        self._index = {name: i for i, name in enumerate(self.joints)}
        n = len(self.joints)
        self._index.update({name: n for name in ignored if name not in self._index})
        self._last_names = None          # the name list of the last good JointState
        self._last_order = None          # and where each of its efforts goes

    def read(self, msg):
        if self.kind == JOINT_STATE:
            return self._read_joint_state(msg)
        return self._read_array(msg)

    def _read_array(self, msg):
        data, n = msg.data, len(self.joints)
        if len(data) != n:
            raise Refused(f'data has {len(data)} values for {n} joints')
        tau = np.array(data, dtype=float)
        if not np.isfinite(tau).all():
            bad = np.flatnonzero(~np.isfinite(tau))
            raise Refused(f'data[{bad[0]}] (joint {self.joints[bad[0]]}) is not finite')
        return tau

    def _order(self, names):
        """Where each of `names` goes in `joints` order (an index array), or Refused."""
        if names == self._last_names:     # the same list as last time (every cycle)
            return self._last_order
        index = self._index
        seen, twice, unknown = set(), [], []
        for name in names:
            if name in seen:
                if name not in twice:
                    twice.append(name)
            seen.add(name)
            if name not in index:
                unknown.append(name)
        if twice:
            raise Refused(f'name lists {_joints_text(twice)} more than once')
        if unknown:
            raise Refused(f'name has joints this plant does not have: {_joints_text(unknown)}'
                          f' (its joints: {_joints_text(self.joints)})')
        missing = [joint for joint in self.joints if joint not in seen]
        if missing:
            raise Refused(f'name lacks {_joints_text(missing)}: a command must give every '
                          f'joint of the plant ({len(names)} of {len(self.joints)} named)')
        order = np.array([index[name] for name in names], dtype=np.intp)
        self._last_names, self._last_order = list(names), order
        return order

    def _read_joint_state(self, msg):
        names, efforts = list(msg.name), msg.effort
        if len(efforts) != len(names):
            what = 'is empty' if len(efforts) == 0 else f'has {len(efforts)} values'
            raise Refused(f'effort {what} for {len(names)} names '
                          f'({_joints_text(names) or "none"})')
        order = self._order(names)
        values = np.array(efforts, dtype=float)
        n = len(self.joints)
        if len(values) > n:                # ignored names: their efforts go nowhere
            kept = order < n
            names = [name for name, keep in zip(names, kept) if keep]
            values, order = values[kept], order[kept]
        finite = np.isfinite(values)
        if not finite.all():
            if np.isnan(values).all():
                raise Refused('effort is NaN for every joint (no command yet: a ros2_control '
                              'command interface nobody has written)', level='info')
            bad = [names[i] for i in np.flatnonzero(~finite)]
            raise Refused(f'effort is not finite for {_joints_text(bad)}')
        tau = np.empty(len(self.joints))
        tau[order] = values
        return tau


def describe(kind):
    """A few words for the plant's start-up line."""
    return ('sensor_msgs/JointState, by name' if kind == JOINT_STATE
            else 'std_msgs/Float64MultiArray, joints order')


__all__ = ['COMMAND_MESSAGES', 'declare_command_message', 'describe', 'EffortCommand',
           'FLOAT64_MULTI_ARRAY', 'JOINT_STATE', 'message_type', 'Refused']
