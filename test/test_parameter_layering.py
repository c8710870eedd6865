"""Parameter files as the real tools write and layer them, without launch: files written the
way launch_ros writes a Node's `parameters=[{...}]` (yaml.dump: `!!python/tuple` and all)
are accepted where rcl accepts them; values are read as rcl types them; several files are
layered so that later files win whatever section each value is under (every section kind
rcl matches), `-p` wins over every file, and a renamed node keeps the sections written for
its usual name — checked against rcl itself (an rclpy node reading the files) and through
real node processes."""

import os
import signal
import subprocess
import sys

import pytest
import yaml
from hypothesis import given, HealthCheck, settings, strategies as st

from ros_testing import call_service, PUMA, REPO, RosHarness, SIM  # noqa: I100 - sets the domain id
import rclpy
from rcl_interfaces.srv import GetParameters
from rclpy.node import Node
from rclpy.parameter import parameter_value_to_python

from robot_dynamics.parameters import layering
from robot_dynamics.parameters.params_file import check_params_file, node_sections, ParamsFileError

CONTROLLER = 'computed_torque_controller'


# ------------------------------------------------------------ files as launch_ros writes them


def launch_ros_values(parameters, prefix=''):
    """A Node's `parameters=[{...}]` dict as launch_ros normalises and evaluates it: nested
    dicts flattened with '.', every sequence a tuple (all integers: ints; integers and
    floats: floats; strings each through yaml.dump and back), a string through yaml.dump
    and yaml.safe_load, bools, numbers and bytes as they are."""
    values = {}
    for name, value in parameters.items():
        name = f'{prefix}{name}'
        if isinstance(value, dict):
            values.update(launch_ros_values(value, name + '.'))
        elif isinstance(value, str):
            values[name] = yaml.safe_load(yaml.dump(value))
        elif isinstance(value, (list, tuple)):
            kinds = {type(item) for item in value}
            if kinds == {int}:
                values[name] = tuple(int(item) for item in value)
            elif kinds <= {int, float}:
                values[name] = tuple(float(item) for item in value)
            elif kinds == {bool}:
                values[name] = tuple(value)
            else:
                values[name] = tuple(yaml.safe_load(yaml.dump(item)) for item in value)
        else:
            values[name] = value
    return values


def launch_ros_file(path, parameters, node=None):
    """The temporary file launch_ros writes for `parameters`: under the node's fully
    qualified name when the Node has a name and a namespace (our launch files give both),
    else under /**, dumped with yaml.dump."""
    with open(path, 'w', encoding='utf-8') as stream:
        yaml.dump({node or '/**': {'ros__parameters': launch_ros_values(parameters)}},
                  stream, default_flow_style=False)
    return str(path)


USER_LAUNCH_PARAMETERS = {
    'realtime': {'cpu_affinity': [0, 1], 'priority': 0, 'lock_memory': False},
    'gains': {'kp': [150.0] * 6, 'kd': [20, 20, 20, 20, 20, 20.0]},
    'joints': [f'joint_{i}' for i in range(1, 7)],
    'state_timeout': 0.25,
    'command_topic': 'effort_controller/commands',
    'flags': [True, False],
    'blob': b'\x00\x01',
}


def test_a_launch_ros_file_carries_python_tuples_and_is_accepted(tmp_path):
    path = launch_ros_file(tmp_path / 'launch_params_a', USER_LAUNCH_PARAMETERS,
                           f'/{CONTROLLER}')
    text = open(path, encoding='utf-8').read()
    assert '!!python/tuple' in text and '!!binary' in text        # what broke the nodes
    check_params_file(path)
    assert set(node_sections(path)[f'/{CONTROLLER}']) >= {
        'realtime.cpu_affinity', 'gains.kp', 'gains.kd', 'joints', 'flags'}
    values = layering.layered_parameters([path], f'/{CONTROLLER}')
    assert values['realtime.cpu_affinity'] == [0, 1]
    assert values['gains.kd'] == [20.0] * 6 and values['flags'] == [True, False]


LAUNCH_ROS_VALUES = [
    {'p_bool': True}, {'p_int': 7}, {'p_float': 2.5}, {'p_str': 'hello'},
    {'p_bools': [True, False]}, {'p_ints': (0, 1)}, {'p_floats': [1.5, 2.5]},
    {'p_strs': ('a', 'b')}, {'outer': {'inner': {'leaf': 1.0, 'list': [1, 2]}, 'x': 'y'}},
    {'p_gains': [150.0] * 6}, {'a.b.c': 3}, {'p_mixed': [1, 2.5]},
    {'s_float': '1.0', 's_exp': '4e-05', 's_true': 'true', 's_y': 'y', 's_empty': ''},
    {'f_small': 4e-05, 'f_big': 1e20, 'f_int_valued': 3.0},
]


@pytest.mark.parametrize('parameters', LAUNCH_ROS_VALUES, ids=lambda p: '-'.join(p))
def test_every_value_launch_ros_writes_is_accepted_and_read_as_rcl_reads_it(tmp_path,
                                                                            parameters):
    """Each kind of value a launch file can give (launch_ros refuses empty and mixed
    string lists itself): the nodes' check accepts the file, and the layering reads it as
    rcl does (e.g. the string 'y', written unquoted, is a boolean for rcl)."""
    path = launch_ros_file(tmp_path / 'launch_params_v', parameters)
    check_params_file(path)
    theirs = rcl_parameters(['--params-file', path], 'param_types')
    ours = layering.layered_parameters([path], '/param_types')
    assert ours.keys() == theirs.keys()
    for name in theirs:
        assert same(ours[name], theirs[name]), (name, ours[name], theirs[name])


def test_a_file_rcl_refuses_is_still_refused_with_its_line(tmp_path):
    bad = tmp_path / 'bad.yaml'
    bad.write_text('/**:\n  ros__parameters:\n    kp: [1, 2.5]\n')
    with pytest.raises(ParamsFileError, match='kp'):
        check_params_file(str(bad))
    with pytest.raises(ParamsFileError, match='line 3.*kp.*one type'):
        layering.read_sections(str(bad))
    alias = tmp_path / 'alias.yaml'
    alias.write_text('/**:\n  ros__parameters:\n    a: &x [1.0]\n    b: *x\n')
    with pytest.raises(ParamsFileError, match='alias'):
        layering.read_sections(str(alias))


# ------------------------------------------------------------ rcl as the reference


def rcl_parameters(args, name, namespace=''):
    """{parameter: value} an rclpy node `name` gets from the command-line `args` (what rcl
    reads, in its order), use_sim_time and the services' switch left out."""
    context = rclpy.Context()
    rclpy.init(context=context, args=['test', '--ros-args', *args])
    try:
        node = Node(name, namespace=namespace or None, context=context,
                    automatically_declare_parameters_from_overrides=True)
        try:
            values = {n: p.value for n, p in node._parameters.items()}
        finally:
            node.destroy_node()
    finally:
        rclpy.try_shutdown(context=context)
    values.pop('start_type_description_service', None)
    if values.get('use_sim_time') is False:
        values.pop('use_sim_time')
    return {n: list(v) if hasattr(v, 'tolist') or isinstance(v, (list, tuple)) else v
            for n, v in values.items()}


def same(a, b):
    """Equal, NaN equal to NaN."""
    import math
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    return type(a) is type(b) and a == b


TRICKY = """/**:
  ros__parameters:
    yes_word: y
    no_word: n
    octal: 017
    not_octal: 08
    hex: 0x1F
    underscored: 1_000
    null_word: null
    tilde: ~
    sexagesimal: 1:30
    date: 2001-12-14
    inf_word: inf
    inf: .inf
    minus_inf: -.Inf
    exponent: 1e5
    small: 4e-05
    hex_float: 0x1p3
    quoted: '5'
    tagged: !!str 6
    tagged_float: !!float 7
    tuple: !!python/tuple [1, 2]
    text: "multi\\nline \\u00e9 \\U0001F600"
    bools: [true, On, no]
    huge: 99999999999999999999
    tiny: 1e-400
    equals: =
    not_a_number: nan
    plus: +5
    half: .5
    quoted_float: "1."
    trailing_dot: 1.
    negative_hex: -0x10
    floats: [1.5, .inf]
    empty_text: ''
    nested:
      deep:
        value: 3
"""


def test_values_are_typed_as_rcl_types_them(tmp_path):
    path = tmp_path / 'tricky.yaml'
    path.write_text(TRICKY)
    ours = layering.layered_parameters([str(path)], '/any')
    theirs = rcl_parameters(['--params-file', str(path)], 'any')
    assert ours.keys() == theirs.keys()
    for name in theirs:
        assert same(ours[name], theirs[name]), (name, ours[name], theirs[name])


def test_the_layered_file_gives_rcl_the_same_values(tmp_path):
    """What rcl reads from `write_layered_file`'s output is what `layered_parameters`
    says (strings with newlines, quotes and non-ASCII, NaN and infinities included)."""
    path = tmp_path / 'tricky.yaml'
    path.write_text(TRICKY)
    merged = layering.write_layered_file([str(path)], '/any', output=str(tmp_path / 'm.yaml'))
    theirs = rcl_parameters(['--params-file', merged], 'any')
    ours = layering.layered_parameters([str(path)], '/any')
    assert ours.keys() == theirs.keys()
    for name in theirs:
        assert same(ours[name], theirs[name]), name
    check_params_file(merged)          # the nodes' own check accepts it too


@pytest.mark.parametrize('section, node, namespace, applies', [
    ('/**', 'ctrl', '', True), ('/**', 'ctrl', '/arm/left', True),
    ('/**/ctrl', 'ctrl', '', True), ('/**/ctrl', 'ctrl', '/arm/left', True),
    ('/**/ctrl', 'other', '', False),
    ('ctrl', 'ctrl', '', True), ('ctrl', 'ctrl', '/arm', False), ('/ctrl', 'ctrl', '', True),
    ('/*', 'ctrl', '', True), ('/*', 'ctrl', '/arm', False),
    ('/arm/*', 'ctrl', '/arm', True), ('/arm/*', 'ctrl', '', False),
    ('/*/ctrl', 'ctrl', '/arm', True), ('/*/ctrl', 'ctrl', '/arm/left', False),
    ('/**/*', 'ctrl', '/arm/left', True), ('/arm/**', 'ctrl', '/arm/left', True),
    ('/arm/**', 'ctrl', '/other', False), ('arm/ctrl', 'ctrl', '/arm', True),
])
def test_sections_apply_to_the_nodes_rcl_applies_them_to(tmp_path, section, node, namespace,
                                                         applies):
    path = tmp_path / 'p.yaml'
    path.write_text(f'{section}:\n  ros__parameters:\n    marker: 1\n')
    assert ('marker' in rcl_parameters(['--params-file', str(path)], node, namespace)) \
        == applies                                      # rcl's own answer ...
    fqn = layering.node_fqn(node, namespace)
    assert layering.section_matches(section, fqn) == applies        # ... and ours
    assert ('marker' in layering.layered_parameters([str(path)], fqn)) == applies


def write_sections(path, sections):
    """A parameter file of [(section, {parameter: value})], in that order."""
    lines = []
    for section, values in sections:
        lines += [f'{section}:', '  ros__parameters:']
        lines += [f'    {name}: {value!r}' for name, value in values.items()]
    path.write_text('\n'.join(lines) + '\n')
    return str(path)


def test_rcl_alone_lets_an_earlier_node_section_win_over_a_later_file(tmp_path):
    """The reason for the layering: given preset, sim.yaml-like and override files as they
    are, rcl keeps the node section's value; the layered file gives the later file's."""
    preset = write_sections(tmp_path / 'a.yaml', [('/**', {'kp': 1.0, 'kd': 1.0})])
    node_file = write_sections(tmp_path / 'b.yaml', [(f'/**/{CONTROLLER}', {'kp': 2.0})])
    override = write_sections(tmp_path / 'c.yaml', [('/**', {'kp': 3.0, 'kd': 3.0})])
    files = [preset, node_file, override]
    alone = rcl_parameters([a for f in files for a in ('--params-file', f)], CONTROLLER)
    assert alone['kp'] == 2.0 and alone['kd'] == 3.0            # the node section won
    merged = layering.write_layered_file(files, f'/{CONTROLLER}',
                                         output=str(tmp_path / 'm.yaml'))
    assert rcl_parameters(['--params-file', merged], CONTROLLER) == {'kp': 3.0, 'kd': 3.0}


def test_a_later_float_wins_over_an_earlier_integer(tmp_path):
    """rcl alone keeps an earlier integer over a later float of the same entry (both stay
    set, the integer is read first); the layered file has one value, the later one."""
    one = write_sections(tmp_path / 'a.yaml', [('/**', {'kp': 2})])
    two = write_sections(tmp_path / 'b.yaml', [('/**', {'kp': 2.5})])
    assert rcl_parameters(['--params-file', one, '--params-file', two], 'n') == {'kp': 2}
    merged = layering.write_layered_file([one, two], '/n', output=str(tmp_path / 'm.yaml'))
    assert rcl_parameters(['--params-file', merged], 'n') == {'kp': 2.5}


SECTION_KINDS = ('/**', '/**/{name}', '/{name}', '{name}', '/*', '/**/*', '/**/other',
                 'other')


@settings(max_examples=25, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.lists(st.tuples(st.sampled_from(SECTION_KINDS),
                                   st.dictionaries(st.sampled_from(['a', 'b', 'c']),
                                                   st.integers(-9, 9), min_size=1)),
                         min_size=1, max_size=3), min_size=1, max_size=4))
def test_later_files_win_whatever_their_sections(tmp_path, files):
    """For any stack of files with any section kinds: the value a node gets from the
    layered file (read by rcl) is the one of the last file, and within it the last
    section, that sets the parameter for that node."""
    name = 'ctrl'
    paths, expected = [], {}
    for k, sections in enumerate(files):
        sections = [(kind.format(name=name), values) for kind, values in sections]
        paths.append(write_sections(tmp_path / f'{k}.yaml', sections))
        for section, values in sections:
            if 'other' not in section:                          # every other kind applies
                expected.update(values)
    merged = layering.write_layered_file(paths, f'/{name}', output=str(tmp_path / 'm.yaml'))
    got = rcl_parameters(['--params-file', merged], name) if merged else {}
    assert got == expected
    assert layering.layered_parameters(paths, f'/{name}') == expected


def test_shared_and_own_sections_keep_the_unknown_parameter_warning_possible(tmp_path):
    """The layered file keeps /** values under /** and the node's own under its name (a
    misspelt name of the node's own section can still be told), and a later /** value
    moves a name out of the node's section."""
    one = write_sections(tmp_path / 'a.yaml', [('/**', {'joints': 'x'}),
                                               (f'/**/{CONTROLLER}', {'kp': 1, 'kpp': 2})])
    two = write_sections(tmp_path / 'b.yaml', [('/**', {'kp': 3})])
    shared, own = layering.layered_sections([one, two], f'/{CONTROLLER}',
                                            overrides={'use_sim_time': True})
    assert shared == {'joints': 'x', 'kp': 3}
    assert own == {'kpp': 2, 'use_sim_time': True}
    path = layering.write_layered_file([one, two], f'/{CONTROLLER}',
                                       output=str(tmp_path / 'm.yaml'))
    assert node_sections(path) == {'/**': ['joints', 'kp'],
                                   f'/{CONTROLLER}': ['kpp']}


def test_an_error_about_a_layered_value_names_the_users_file_not_the_layered_one(tmp_path):
    """A launch file gives each node one layered file in the temporary folder; a bad value
    in it is traced back to the user's file it came from (or to the launch arguments),
    and the comments that record it change nothing rcl reads."""
    from robot_dynamics.parameters.params_file import error_source
    robot = write_sections(tmp_path / 'panda # robot.yaml',
                           [('/**', {'kd': [1.0, 2.0], 'joints': ['a', 'b']})])
    mine = write_sections(tmp_path / 'mine.yaml',
                          [(f'/**/{CONTROLLER}', {'kp': [1.0, 2.0, 3.0]})])
    merged = layering.write_layered_file([robot, mine], f'/{CONTROLLER}',
                                         overrides={'use_sim_time': True},
                                         overrides_origin='the launch arguments')
    try:
        assert rcl_parameters(['--params-file', merged], CONTROLLER) == {
            'kd': [1.0, 2.0], 'joints': ['a', 'b'], 'kp': [1.0, 2.0, 3.0],
            'use_sim_time': True}
        assert layering.layered_origin(merged, 'kp') == mine
        assert layering.layered_origin(merged, 'kd') == robot
        assert layering.layered_origin(merged, 'use_sim_time') == 'the launch arguments'
        assert layering.layered_origin(merged, 'nothing') is None
        args = ['--ros-args', '--params-file', merged]
        assert error_source(args, CONTROLLER, 'kp: expected 2 values, got 3') == \
            f' (from {mine})'
        assert error_source(args, CONTROLLER, 'kd[1]: not finite') == f' (from {robot})'
    finally:
        os.remove(merged)
    assert layering.layered_origin(robot, 'kd') is None     # a user's file names itself
    assert error_source(['--ros-args', '--params-file', robot], CONTROLLER,
                        'kd: bad') == f' (from {robot})'


# ------------------------------------------------------------ the nodes' command line


def test_command_line_minus_p_wins_over_node_sections_and_renamed_nodes_keep_theirs(
        tmp_path):
    """`layered_arguments` (what the nodes do before rclpy.init): with the rename
    `-r __node:=my_ctrl`, config/sim.yaml's section for computed_torque_controller still
    applies; `-p command_topic:=...` wins over it; a later /** file wins over it too."""
    override = write_sections(tmp_path / 'o.yaml', [('/**', {'state_timeout': 0.3})])
    args = ['ctrl', '--ros-args', '--params-file', PUMA, '--params-file', SIM,
            '--params-file', override, '-r', '__node:=my_ctrl',
            '-p', 'command_topic:=mine/commands']
    unrenamed = [arg for arg in args[2:] if arg not in ('-r', '__node:=my_ctrl')]
    plain = rcl_parameters(unrenamed, CONTROLLER)      # rcl alone, the usual name:
    assert plain['command_topic'] == 'effort_controller/commands'  # sim.yaml's over -p
    assert plain['state_timeout'] == 0.5               # and over the later /** file
    renamed = rcl_parameters(args[2:], CONTROLLER)     # rcl alone, renamed to my_ctrl
    assert 'control_mode' not in renamed                # sim.yaml's sections lost
    layered, merged = layering.layered_arguments(args, CONTROLLER)
    try:
        assert merged and os.path.exists(merged) and SIM not in layered
        got = rcl_parameters(layered[2:], CONTROLLER)    # renamed by the -r rule
    finally:
        os.remove(merged)
    assert got['control_mode'] == 'on_state'           # sim.yaml's section followed the node
    assert got['command_topic'] == 'mine/commands'     # -p over the node section
    assert got['state_timeout'] == 0.3                 # the later /** file over it
    assert got['robot.position_min'] == plain['robot.position_min']


def test_command_line_without_params_files_is_left_alone():
    args = ['ctrl', '--ros-args', '-p', 'a:=1', '-r', '__node:=x']
    assert layering.layered_arguments(args, CONTROLLER) == (args, None)


# ------------------------------------------------------------ real node processes


class Probe(Node):
    def __init__(self, context, fqn):
        super().__init__('layering_probe', context=context)
        self.get = self.create_client(GetParameters, f'{fqn}/get_parameters')


def start(executable, *ros_args):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [REPO] + [p for p in [os.environ.get('PYTHONPATH')] if p]), PYTHONUNBUFFERED='1')
    return subprocess.Popen(
        [sys.executable, '-m', f'robot_dynamics.nodes.{executable}', '--ros-args',
         *ros_args], cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        text=True, start_new_session=True)


def parameters_of(process, fqn, names):
    """{name: value} of the running node `fqn` (its get_parameters service); the
    process is stopped (SIGINT) afterwards; (values, its output)."""
    harness = RosHarness()
    try:
        probe = harness.add(Probe(harness.context, fqn))
        harness.spin_until(lambda: probe.get.service_is_ready() or process.poll() is not None,
                           f'{fqn}/get_parameters')
        assert process.poll() is None, process.communicate()[0]
        # a read is idempotent: asked again while its answer may have been lost (the
        # server can answer before its response reaches this process)
        response = call_service(harness, probe.get, GetParameters.Request(names=names),
                                'the parameters', resend_after=3.0)
        values = {n: parameter_value_to_python(v) for n, v in zip(names, response.values)}
    finally:
        harness.close()
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGINT)
        output = process.communicate(timeout=60)[0]
    return {n: list(v) if isinstance(v, (list, tuple)) or hasattr(v, 'tolist') else v
            for n, v in values.items()}, output


def test_a_renamed_controller_process_keeps_the_shipped_settings_and_minus_p_wins(tmp_path):
    """`ros2 run robot_dynamics controller --ros-args --params-file puma560.yaml
    --params-file sim.yaml -r __node:=my_ctrl -p gains.kp:=[150.0, ...]`, plus a file
    launch_ros wrote (tuples) with a /** value: the node stays in sim.yaml's on_state mode,
    -p and the later file win over sim.yaml's node section."""
    written = launch_ros_file(tmp_path / 'launch_params_x', {
        'gains': {'kd': [30] * 6}, 'realtime': {'cpu_affinity': [0]}})
    before = merged_files()
    process = start('controller', '--params-file', PUMA, '--params-file', SIM,
                    '--params-file', written, '-r', '__node:=my_ctrl',
                    '-p', f'gains.kp:={[150.0] * 6}')
    values, output = parameters_of(process, '/my_ctrl', [
        'control_mode', 'gains.kp', 'gains.kd', 'realtime.cpu_affinity', 'state_timeout'])
    assert values == {'control_mode': 'on_state', 'gains.kp': [150.0] * 6,
                      'gains.kd': [30.0] * 6, 'realtime.cpu_affinity': [0],
                      'state_timeout': 0.5}, output
    assert 'Traceback' not in output and 'YAML' not in output, output
    assert merged_files() <= before            # the node removed its layered file


def merged_files():
    import tempfile
    return {name for name in os.listdir(tempfile.gettempdir())
            if name.startswith('robot_dynamics_my_ctrl_')}


@pytest.mark.parametrize('executable', ['controller', 'plant'])
def test_a_launch_ros_file_reaches_the_node_checks_instead_of_a_yaml_error(tmp_path,
                                                                          executable):
    """The file launch_ros writes for `realtime_cpu_affinity:=0,1`-like values passes the
    file check; a wrong value in it is then named by the node as any other."""
    node = '/plant_simulator' if executable == 'plant' else f'/{CONTROLLER}'
    written = launch_ros_file(tmp_path / 'launch_params_y', {
        'realtime': {'cpu_affinity': [0, 1]}, 'robot': {'position_min': [-1.0] * 5}}, node)
    process = start(executable, '--params-file', PUMA, '--params-file', written)
    output = process.communicate(timeout=60)[0]
    assert process.returncode == 1, output
    assert 'robot.position_min' in output and 'python/tuple' not in output, output
