"""The parameter table's entry (`Parameter`) and the one check of each rule, with its one
message, used at start-up and for live changes (`ros2 param set`).

An entry says, in the spirit of generate_parameter_library's YAML: the name (`<joint>`
standing for each joint name), the type as rcl names it, the default (per joint: one value
repeated for each of the `joints`; `FROM_MODEL`: computed from the robot model, the
description says how), the range (`minimum`, `maximum`, inclusive; `exclusive_minimum`:
strictly above `minimum`) or the `choices`, whether it is `live` (settable while the node
runs; otherwise read-only), the array `length` (`per_joint`: one value per joint) and the
description. No rclpy here: the nodes turn an entry into a ParameterDescriptor
(nodes/common/ros_params.py), tools/parameter_doc.py into doc/parameters.md.
"""

import math
from dataclasses import dataclass, field

__all__ = ['Parameter', 'ConfigurationError', 'FROM_MODEL', 'JOINT', 'check', 'as_float',
           'as_floats', 'as_bool', 'as_choice', 'as_string', 'is_empty']

JOINT = '<joint>'       # in a name: each joint's name


class _FromModel:
    def __repr__(self):
        return 'FROM_MODEL'


FROM_MODEL = _FromModel()   # a default computed from the robot model


class ConfigurationError(ValueError):
    """A bad parameter; the message names the parameter (and index)."""


@dataclass(frozen=True)
class Parameter:
    name: str
    type: str = None          # 'double', 'double[]', 'integer', 'bool', 'string', ... None: any
    default: object = None    # None: no default (unset unless given)
    description: str = ''
    live: bool = False        # settable while the node runs (else read_only)
    minimum: float = None
    maximum: float = None
    exclusive_minimum: bool = False
    choices: tuple = ()
    per_joint: bool = False   # an array of one value per joint
    length: int = None        # an array of this many values
    empty: bool = False       # an array that may be empty (or unset): None
    nonempty: bool = False    # a string that must not be empty
    extra: dict = field(default_factory=dict, compare=False)

    @property
    def read_only(self):
        return not self.live

    @property
    def is_array(self):
        return bool(self.type) and self.type.endswith('[]')

    def default_value(self, n=None):
        """The default as the node declares it (per joint: repeated n times)."""
        if self.per_joint and self.default is not None and not isinstance(
                self.default, (list, tuple)) and self.default is not FROM_MODEL:
            return [self.default] * n
        if isinstance(self.default, tuple):
            return list(self.default)
        return self.default

    def matches(self, name):
        """True when `name` is this entry's name (`<joint>`: any one name part)."""
        if JOINT not in self.name:
            return name == self.name
        head, _, tail = self.name.partition(JOINT)
        middle = name[len(head):len(name) - len(tail)] if len(name) > len(head) + len(tail) \
            else ''
        return (name.startswith(head) and name.endswith(tail) and middle
                and '.' not in middle)

    def bounds_text(self):
        """'> 0', '>= 0 and <= 1000' or '' (the range rule's words)."""
        parts = []
        if self.minimum is not None:
            parts.append(f'{">" if self.exclusive_minimum else ">="} {self.minimum:g}')
        if self.maximum is not None:
            parts.append(f'<= {self.maximum:g}')
        return ' and '.join(parts)


# ---------------------------------------------------------------- the rules

def _is_number(value):
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def is_empty(value):
    return value is None or (hasattr(value, '__len__') and not isinstance(value, str)
                             and len(value) == 0)


def _within(entry, name, value):
    """The range rule: one message for scalars and array items, worded as the control
    laws' own checks word it (robot_dynamics/control/_parameters.py)."""
    low, high = entry.minimum, entry.maximum
    if (low is not None and (value < low or (entry.exclusive_minimum and value == low))) or (
            high is not None and value > high):
        raise ConfigurationError(f'{name}: must be finite and {entry.bounds_text()}, '
                                 f'got {value}')
    return value


def check(entry, value, n=None, name=None):
    """`value` of parameter `entry` checked by its rules (type, length, range, choices):
    the value to use (floats for doubles, None for an empty optional array);
    ConfigurationError names the parameter (and index) and the rule. `n`: the number of
    joints (per-joint arrays); `name`: the actual name (for `<joint>` entries)."""
    name = name or entry.name
    kind = entry.type
    if kind == 'double':
        return _within(entry, name, as_float(name, value))
    if kind == 'integer':
        if not isinstance(value, int) or isinstance(value, bool):
            raise ConfigurationError(f'{name}: expected an integer, got {value!r}')
        return _within(entry, name, value)
    if kind == 'bool':
        return as_bool(name, value)
    if kind == 'string':
        if entry.choices:
            return as_choice(name, value, entry.choices)
        if entry.nonempty:
            return as_string(name, value)
        if not isinstance(value, str):
            raise ConfigurationError(f'{name}: expected a string, got {value!r}')
        return value
    if kind == 'double[]':
        if entry.empty and is_empty(value):
            return None
        length = n if entry.per_joint else entry.length
        values = as_floats(name, value, length)
        for i, v in enumerate(values):
            _within(entry, f'{name}[{i}]', v)
        return values
    return value


def as_float(name, value, minimum=None, positive=False):
    """A finite number (integers accepted), optionally >= minimum or > 0."""
    if not _is_number(value) or not math.isfinite(value):
        raise ConfigurationError(f'{name}: expected a finite number, got {value!r}')
    value = float(value)
    if positive or minimum is not None:
        _within(Parameter(name, minimum=0.0 if positive else minimum,
                          exclusive_minimum=positive), name, value)
    return value


def as_floats(name, value, length=None):
    """A list of `length` finite numbers (integers accepted) as a list of floats."""
    count = f'{length} numbers' if length is not None else 'numbers'
    if isinstance(value, str) and value.strip().startswith('['):
        raise ConfigurationError(
            f'{name}: expected a list of {count}, got the string {value!r}: a list '
            'that mixes integers and floats arrives as a string (ros2 param set, -p); write '
            'every value as a float, e.g. 150.0')
    if isinstance(value, (str, bytes)) or not hasattr(value, '__len__'):
        raise ConfigurationError(f'{name}: expected a list of {count}, got {value!r}')
    if length is not None and len(value) != length:
        raise ConfigurationError(f'{name}: expected {length} values (one per joint), '
                                 f'got {len(value)}')
    out = []
    for i, v in enumerate(value):
        if not _is_number(v) or not math.isfinite(v):
            raise ConfigurationError(f'{name}[{i}]: expected a finite number, got {v!r}')
        out.append(float(v))
    return out


def as_bool(name, value):
    if not isinstance(value, bool):
        raise ConfigurationError(f'{name}: expected true or false, got {value!r}')
    return value


def as_string(name, value):
    if not isinstance(value, str) or not value:
        raise ConfigurationError(f'{name}: expected a non-empty string, got {value!r}')
    return value


def as_choice(name, value, choices):
    if value not in choices:
        raise ConfigurationError(f'{name}: {value!r} is not one of {", ".join(choices)}')
    return value
