"""Parameter handling shared by the nodes: declaration with descriptors, type coercion
(integers accepted where doubles are meant), the `robot` block, and one clear error that
names the parameter (and index) for a bad parameter file."""

import warnings

from rcl_interfaces.msg import FloatingPointRange, ParameterDescriptor
from rclpy.exceptions import (InvalidParameterTypeException, InvalidParameterValueException,
                               ParameterNotDeclaredException)
from rclpy.parameter import Parameter
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
from std_msgs.msg import String

from robot_dynamics import parameters
from robot_dynamics.model import RobotModel
from robot_dynamics.nodes.common.throttled_log import log_throttled
from robot_dynamics.parameters.layering import YAML_NULLS
from robot_dynamics.parameters import (as_bool, as_choice, as_float, as_floats,  # noqa: F401
                                       as_string, ConfigurationError)

__all__ = ['ConfigurationError', 'declare', 'declare_robot', 'keep_float_types', 'robot_model',
           'check_joints', 'RobotDescriptionListener', 'as_float', 'as_floats', 'as_bool',
           'as_choice', 'as_string', 'payload_model', 'seconds', 'closest_name',
           'name_unknown_parameters']

# No payload unless one is given: robot.payload.* read back 0, not unset
PAYLOAD_DEFAULTS = {'payload.mass': 0.0, 'payload.com': [0.0] * 3,
                    'payload.inertia': [0.0] * 6}

_TABLE = object()    # declare's default: the table's


def table_name(node):
    """The name of the node's parameter table (robot_dynamics.parameters.TABLES): its
    class's `parameter_table`, else its name."""
    return getattr(node, 'parameter_table', None) or node.get_name()


def entry(node, name):
    """The table entry of `node`'s parameter `name`, or None."""
    return parameters.lookup(table_name(node), name)


def validated(node, name, value, n=None):
    """`value` of `node`'s parameter `name` checked by the rules of its table entry (the one
    check per rule, at start-up and for live changes); ConfigurationError names it. `n`:
    the length of a per-joint array (default: the node's model's joint count)."""
    found = entry(node, name)
    model = getattr(node, 'model', None)
    if n is None and model is not None:
        n = model.n
    return parameters.check(found, value, n=n, name=name) if found is not None else value


def declare(node, name, default=_TABLE, description='', read_only=False, minimum=None,
            maximum=None):
    """Declare one parameter with a descriptor and return its value. Description,
    read-only and range come from the node's table entry (robot_dynamics.parameters); the
    default too unless given (a default computed from the model, e.g.); the other
    arguments serve names without an entry (other `robot.*` keys of a parameter file).
    Typing is dynamic so that ``100`` is accepted where ``100.0`` is meant; `validated`
    (or the as_* helpers) check the type.

    A node whose `declaring_only` attribute is true (a managed controller declaring its
    parameters at construction, to be checked at configure) gets the default back instead
    of the value, so that nothing is checked yet; a value rclpy refuses to declare (out of
    its range) is then left undeclared, for configure to name."""
    if node.has_parameter(name):    # a managed node configured again: the current value
        return node.get_parameter(name).value
    found = entry(node, name)
    if found is not None:
        if default is _TABLE:
            model = getattr(node, 'model', None)
            default = found.default_value(model.n if model is not None else None)
            if default is parameters.FROM_MODEL:
                raise ConfigurationError(f'{name}: its default comes from the model; the '
                                         'caller gives it')
        description = _described(found, name)
        read_only = found.read_only
        minimum = maximum = None
        if found.type == 'double':       # rcl's ranges are for scalars
            minimum, maximum = found.minimum, found.maximum
    elif default is _TABLE:
        raise ConfigurationError(f'{name}: not in the parameter table of {table_name(node)}')
    if getattr(node, 'declaring_only', False):
        try:
            _declare(node, name, default, description, read_only, minimum, maximum)
        except ConfigurationError:
            pass
        return default
    return _declare(node, name, default, description, read_only, minimum, maximum)


def _described(found, name):
    """The entry's description, `<joint>` replaced by the joint of `name`."""
    if parameters.JOINT not in found.name:
        return found.description
    head, _, tail = found.name.partition(parameters.JOINT)
    joint = name[len(head):len(name) - len(tail)]
    return found.description.replace(parameters.JOINT, joint)


def _declare(node, name, default, description, read_only, minimum, maximum):
    descriptor = ParameterDescriptor(description=description, read_only=read_only,
                                     dynamic_typing=True)
    if minimum is not None or maximum is not None:
        descriptor.floating_point_range = [FloatingPointRange(
            from_value=float(minimum if minimum is not None else -1e12),
            to_value=float(maximum if maximum is not None else 1e12), step=0.0)]
    override = (getattr(node, '_parameter_overrides', None) or {}).get(name)
    # `ros2 param dump` writes an unset parameter as null, which rcl reads as the string
    # 'null': a parameter without a default stays unset, so such a dump loads back
    unset = (default is None and override is not None
             and override.type_ == Parameter.Type.STRING and override.value in YAML_NULLS)
    try:
        return node.declare_parameter(name, default, descriptor, ignore_override=unset).value
    except InvalidParameterValueException as error:
        if override is None or not descriptor.floating_point_range:
            raise ConfigurationError(f'{name}: {error}') from None
        allowed = descriptor.floating_point_range[0]
        raise ConfigurationError(f'{name}: {override.value!r} is out of range '
                                 f'[{allowed.from_value:g}, {allowed.to_value:g}]') from None
    except InvalidParameterTypeException as error:
        raise ConfigurationError(f'{name}: {error}') from None


def keep_float_types(node):
    """Integers set at runtime on a parameter that holds floats arrive as floats:
    ``ros2 param set ... gains.kp "[150, 150]"`` sends an integer list, which dynamic typing
    would otherwise keep, changing the parameter's type (and what ``ros2 param dump``
    writes). A no-op on an rclpy without pre-set callbacks."""
    add = getattr(node, 'add_pre_set_parameters_callback', None)
    if add is None:
        return
    as_double = {Parameter.Type.INTEGER: (Parameter.Type.DOUBLE, float),
                 Parameter.Type.INTEGER_ARRAY: (Parameter.Type.DOUBLE_ARRAY,
                                                lambda values: [float(v) for v in values])}
    held = {Parameter.Type.INTEGER: Parameter.Type.DOUBLE,
            Parameter.Type.INTEGER_ARRAY: Parameter.Type.DOUBLE_ARRAY}

    def convert(parameters):
        out = []
        for parameter in parameters:
            kind = parameter.type_
            if kind in held and node.has_parameter(parameter.name) \
                    and node.get_parameter(parameter.name).type_ == held[kind]:
                kind, cast = as_double[kind]
                parameter = Parameter(parameter.name, kind, cast(parameter.value))
            out.append(parameter)
        return out
    add(convert)


def closest_name(name, names):
    """The name in `names` most like `name` (difflib), or None when none is close."""
    import difflib
    match = difflib.get_close_matches(name, sorted(set(names)), n=1, cutoff=0.6)
    return match[0] if match else None


def unknown_name_text(node, name):
    """'<node> has no parameter <name> (closest: <name>)' for a name `node` lacks."""
    closest = closest_name(name, node._parameters)
    return (f'{node.get_fully_qualified_name()} has no parameter {name}'
            + (f' (closest: {closest})' if closest else '')
            + f'; `ros2 param list {node.get_fully_qualified_name()}` lists them')


def name_unknown_parameters(node):
    """`ros2 param set` of a name the node does not have is refused naming it, with the
    closest name the node has, in the result's reason and in one warning (rclpy alone
    answers "Invalid access to undeclared parameter(s): []", its list built from a
    generator it has already used up). A no-op on an rclpy without the check it wraps."""
    original = getattr(node, '_check_undeclared_parameters', None)
    if original is None or getattr(node, '_allow_undeclared_parameters', False):
        return

    def check(parameters):
        unknown = [p.name for p in parameters if isinstance(p, Parameter)
                   and not node.has_parameter(p.name)]
        if unknown:
            text = '; '.join(unknown_name_text(node, name) for name in unknown)
            node.get_logger().warning(f'parameter set refused: {text}')
            raise UnknownParameterError(unknown, text)
        return original(parameters)
    node._check_undeclared_parameters = check


class UnknownParameterError(ParameterNotDeclaredException):
    """ParameterNotDeclaredException whose text names the parameters and the closest
    names (rclpy's parameter service answers with this text)."""

    def __init__(self, names, text):
        super().__init__(names)
        self.args = (text,)

    def __str__(self):
        return self.args[0]


def declare_robot(node, start, listen=True):
    """Declare `robot.*`, `robot_description` and `joints`, build the model and call
    ``start(model, joints)``: at once, or, with ``robot.source: urdf`` and no URDF among the
    parameters, once a valid URDF arrives on the `robot_description` topic (transient local,
    as robot_state_publisher serves it), from the executor; until then the node only
    listens (`listen` false: returns False without listening). Raises ConfigurationError
    for a bad parameter; returns True if started."""
    block = _declare_robot_block(node)
    description = declare(node, 'robot_description')
    joints = declare(node, 'joints')
    if description is not None and not isinstance(description, str):
        raise ConfigurationError(f'robot_description: expected the URDF text (a string), '
                                 f'got {description!r}')
    if block.get('source', 'dh') != 'urdf':
        if description:
            node.get_logger().info('robot_description ignored: robot.source is not urdf')
    elif description:
        if block.get('urdf') or block.get('urdf_file'):
            raise ConfigurationError('robot_description and robot.urdf/robot.urdf_file: '
                                     'both give the URDF; give one')
        block['urdf'] = description
    elif not (block.get('urdf') or block.get('urdf_file')):
        if not listen:              # the caller starts listening later
            return False
        node._robot_description_listener = RobotDescriptionListener(node, joints, start)
        return False
    start(*robot_model(node, block, joints))
    return True


def _declare_robot_block(node):
    """Declare the `robot.*` parameters; their values as a flat dict ('payload.mass': ...)."""
    for found in parameters.ROBOT:
        if found.name.startswith('robot.'):
            declare(node, found.name)
    # Other robot.* keys of the parameter file are passed on too: RobotModel names the
    # unknown ones in its error (or reads them, if it knows more keys than listed here).
    overrides = getattr(node, '_parameter_overrides', {}) or {}
    for name in sorted(overrides):
        if name.startswith('robot.') and not node.has_parameter(name):
            declare(node, name, None, 'robot model parameter', read_only=True)
    block = robot_block(node)
    if all(key in PAYLOAD_DEFAULTS for key in block):     # nothing but the payload defaults
        raise ConfigurationError(
            f'robot: no robot parameters given to {node.get_fully_qualified_name()} (pass a '
            'parameter file with a "robot" block under "/**:" or '
            f'"{node.get_fully_qualified_name()}:", e.g. --params-file '
            'config/puma560.yaml in the repository, '
            '<prefix>/share/robot_dynamics/config/puma560.yaml installed)')
    return block


def robot_block(node):
    """The current `robot.*` values, flat ('payload.mass': ...), unset ones left out."""
    return {key: parameter.value
            for key, parameter in node.get_parameters_by_prefix('robot').items()
            if parameter.type_ != Parameter.Type.NOT_SET}


NOT_PSD = 'not positive semi-definite'     # RobotModel's words for a negative moment


def robot_model(node, block, joints):
    """(model, joint names) from a robot block and the `joints` value (warnings go to the
    log); ConfigurationError names the bad parameter."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter('always')
        try:
            model = RobotModel.from_params(block)
        except ValueError as error:
            raise ConfigurationError(str(error)) from None
    refused = [issue for issue in model.nonphysical_inertia if NOT_PSD in issue]
    if refused and not model.nonphysical_inertia_accepted:
        # a negative moment of inertia is no body (e.g. an identification that failed);
        # textbook data (a massless link, a triangle inequality missed) load with a warning
        raise ConfigurationError('; '.join(refused) + ': not a physical body (refused; set '
                                 'robot.accept_nonphysical_inertia: true to load it anyway)')
    for warning in caught:
        _log_once(node.get_logger().warning, str(warning.message))
    if model.nonphysical_inertia_accepted:
        _log_once(node.get_logger().info, 'robot.accept_nonphysical_inertia: non-physical '
                  'inertias kept as given: ' + '; '.join(model.nonphysical_inertia))
    return model, check_joints(joints, model)


_LOGGED = set()     # model messages already logged by a node of this process


def _log_once(log, message):
    """Log a message about the model once per process (several nodes build the same)."""
    if message not in _LOGGED:
        _LOGGED.add(message)
        log(message)


def check_joints(value, model):
    """`joints`: n unique non-empty names; with a URDF model exactly its chain's joints in
    chain order (default when not given), so that no array can be silently permuted."""
    urdf_names = tuple(model.joint_names or ())
    if value is None or (isinstance(value, (list, tuple)) and not value and urdf_names):
        if urdf_names:
            return urdf_names
        raise ConfigurationError('joints: missing (a list of joint names)')
    if isinstance(value, str) or not all(isinstance(v, str) and v for v in value):
        raise ConfigurationError(f'joints: expected a list of non-empty names, got {value!r}')
    names = tuple(value)
    if len(names) != model.n:
        raise ConfigurationError(f'joints: {len(names)} names for a robot with {model.n} '
                                 'joints')
    for i, name in enumerate(names):
        if name in names[:i]:
            raise ConfigurationError(f'joints[{i}]: duplicate name {name!r}')
    if urdf_names and names != urdf_names:
        raise ConfigurationError(f"joints: {list(names)} differ from the URDF chain's joints "
                                 f'{list(urdf_names)} (omit joints to use those)')
    return names


class RobotDescriptionListener:
    """Waits for the URDF on `robot_description` (std_msgs/String, transient local); builds
    the model from the first valid one and calls ``start(model, joints)`` once. An invalid
    description is logged and the wait goes on; later descriptions are ignored."""

    def __init__(self, node, joints, start):
        self._node, self._joints, self._start = node, joints, start
        self.started = False
        self.last_error = None
        qos = QoSProfile(depth=1, durability=DurabilityPolicy.TRANSIENT_LOCAL,
                         reliability=ReliabilityPolicy.RELIABLE)
        self._subscription = node.create_subscription(String, 'robot_description',
                                                      self._on_description, qos)
        node.get_logger().info(f'robot.source urdf: waiting for the URDF on '
                               f'{self._subscription.topic_name} (transient local)')

    def _on_description(self, msg):
        if self.started:
            log_throttled(
                self._node, 'warning',
                f'{self._subscription.topic_name}: new description ignored (the model is '
                'built once; restart the node to use it)', 10.0)
            return
        try:
            # the robot block as it is now: robot.payload.* may have been set meanwhile
            model, joints = robot_model(self._node, {**robot_block(self._node),
                                                     'urdf': msg.data}, self._joints)
        except ConfigurationError as error:
            self.last_error = str(error)
            self._node.get_logger().error(f'{self._subscription.topic_name}: {error}; '
                                          'waiting for a valid description')
            return
        self.started = True
        self._node.get_logger().info(f'model from {self._subscription.topic_name}: '
                                     f'{model.n} joints {list(joints)}')
        self._start(model, joints)


def payload_model(model, changes):
    """`model` with the payload keys in `changes` (robot.payload.mass [kg], .com [m],
    .inertia [kg m^2], in the last DH frame or the URDF's tip_link frame) replaced; the
    others are kept. Cheap enough for a
    parameter callback: the new model shares the compiled kernels of `model` (the last
    body's inertial parameters are runtime inputs of the generated code)."""
    payload = model.payload
    mass, com, inertia = payload.mass, payload.com, payload.inertia
    rules = {found.name: found for found in parameters.ROBOT}
    if 'mass' in changes:
        mass = parameters.check(rules['robot.payload.mass'], changes['mass'])
    if 'com' in changes:
        com = parameters.check(rules['robot.payload.com'], changes['com'])
    if 'inertia' in changes:
        inertia = parameters.check(rules['robot.payload.inertia'], changes['inertia'])
    try:
        return model.with_payload(mass, com, inertia)
    except ValueError as error:
        raise ConfigurationError(str(error)) from None


def seconds(stamp):
    """builtin_interfaces Time or Duration -> float seconds."""
    return stamp.sec + stamp.nanosec * 1e-9
