"""ROS 2 parameter files checked before rcl parses them.

rcl's parser stops the process with a traceback and a terse message ("Sequence should be of
same type. Value type 'integer' do not belong at line_num 5") for the common slips: a file
that does not exist, a YAML syntax error, parameters without the ``/**: ros__parameters:``
wrapper, a list that mixes integers and floats. `check_params_file` finds those first and
says, in one line, which file, which key and index, and how to fix it.

The rules are rcl's (rcl_yaml_param_parser): the top level maps node names (or ``/**``,
possibly nested under namespaces) to a mapping with ``ros__parameters``; below it, nested
mappings make dotted parameter names; a value is a scalar or a flat list whose items all
have one type (bool, integer, float or string); ``null`` and ``~`` are read as strings.
"""

import os
import re

import yaml

__all__ = ['ParameterFileLoader', 'ParamsFileError', 'check_params_file',
           'check_params_files', 'params_files', 'command_line_parameters', 'node_sections',
           'section_applies', 'node_name_of',
           'section_matches', 'layered_origin']

WRAPPER = 'ros__parameters'


class ParameterFileLoader(yaml.SafeLoader):
    """PyYAML's safe loader with YAML 1.2 floats: ``4e-05`` and ``1E3`` are numbers, as
    rcl's parameter-file parser reads them (PyYAML alone would return the string '4e-05')."""


ParameterFileLoader.add_implicit_resolver(
    'tag:yaml.org,2002:float',
    re.compile(r'''^(?:[-+]?(?:[0-9][0-9_]*)\.[0-9_]*(?:[eE][-+]?[0-9]+)?
                |[-+]?(?:[0-9][0-9_]*)(?:[eE][-+]?[0-9]+)
                |\.[0-9_]+(?:[eE][-+][0-9]+)?
                |[-+]?\.(?:inf|Inf|INF)
                |\.(?:nan|NaN|NAN))$''', re.X),
    list('-+0123456789.'))


def _untagged(loader, tag_suffix, node):
    """A node with a tag rcl ignores (rcl reads every tag but ``!!str`` as if it were not
    there): e.g. launch_ros writes the tuples of ``parameters=[{...}]`` as ``!!python/tuple``
    sequences. Read as the same node without its tag (a list, a mapping, or the scalar as
    its text resolves; a string if nothing else reads it)."""
    if isinstance(node, yaml.SequenceNode):
        return loader.construct_sequence(node, deep=True)
    if isinstance(node, yaml.MappingNode):
        return loader.construct_mapping(node, deep=True)
    tag = loader.resolve(yaml.ScalarNode, node.value, (True, False))
    constructor = loader.yaml_constructors.get(tag)
    if constructor is None:
        return node.value
    return constructor(loader, yaml.ScalarNode(tag, node.value, node.start_mark,
                                               node.end_mark, node.style))


ParameterFileLoader.add_multi_constructor('', _untagged)


class ParamsFileError(ValueError):
    """A parameter file rcl would refuse; the message names file, key and index."""


def ros_args_positions(args):
    """(index, argument, inside) for each command-line argument: the one reading of
    ``--ros-args ... [--]`` blocks (up to the next ``--``, or the end; the markers are
    inside their block, a ``--`` outside any block is not)."""
    inside = False
    for i, arg in enumerate(args):
        if arg == '--ros-args':
            inside = True
            yield i, arg, True
        elif arg == '--' and inside:
            inside = False
            yield i, arg, True
        else:
            yield i, arg, inside


def params_files(args):
    """The ``--params-file`` paths among command-line `args` (inside ``--ros-args``)."""
    return _ros_items(args, ('--params-file',))


def check_params_files(args):
    """`check_params_file` for every ``--params-file`` in `args`."""
    for path in params_files(args):
        check_params_file(path)


def check_params_file(path):
    """Raise ParamsFileError (one line: file, key, index, the fix) if rcl would refuse the
    parameter file at `path`."""
    if not os.path.exists(path):
        raise ParamsFileError(f'params file {path}: no such file (relative paths are taken '
                              f'from the working directory {os.getcwd()})')
    if os.path.isdir(path):
        raise ParamsFileError(f'params file {path}: is a directory, not a YAML file')
    try:
        with open(path, encoding='utf-8') as stream:
            document = yaml.load(stream, Loader=ParameterFileLoader)
    except OSError as error:
        raise ParamsFileError(f'params file {path}: cannot be read ({error.strerror})') \
            from None
    except yaml.YAMLError as error:
        raise ParamsFileError(f'params file {path}: {_yaml_problem(error)}') from None
    if document is None:
        raise ParamsFileError(f'params file {path}: empty (expected "/**: ros__parameters: '
                              '..." or "<node name>: ros__parameters: ...")')
    if not isinstance(document, dict):
        raise ParamsFileError(f'params file {path}: the top level is a '
                              f'{_kind(document)}, not a mapping of node names (expected '
                              '"/**: ros__parameters: ...")')
    _check_nodes(path, document, [])


def _yaml_problem(error):
    mark = getattr(error, 'problem_mark', None)
    where = f'line {mark.line + 1}, column {mark.column + 1}: ' if mark is not None else ''
    problem = getattr(error, 'problem', None) or str(error).splitlines()[0]
    return f'{where}YAML syntax error: {problem}'


def _check_nodes(path, mapping, names):
    """Node (or namespace) sections, down to each ``ros__parameters``."""
    for key, value in mapping.items():
        where = '/'.join(names + [str(key)])
        if key == WRAPPER:
            if not names:
                raise ParamsFileError(f'params file {path}: ros__parameters at the top '
                                      'level; put it under a node name: "/**:" for every '
                                      'node, or "<node name>:"')
            if value is None:
                continue
            if not isinstance(value, dict):
                raise ParamsFileError(f'params file {path}: {where}: expected a mapping of '
                                      f'parameters, got {value!r}')
            _check_parameters(path, value, '')
        elif isinstance(value, dict):
            if not _has_wrapper(value):
                raise ParamsFileError(
                    f'params file {path}: {where}: no "ros__parameters:" below this key; '
                    'parameters go under "/**: ros__parameters:" (every node) or '
                    '"<node name>: ros__parameters:"')
            _check_nodes(path, value, names + [str(key)])
        else:
            raise ParamsFileError(
                f'params file {path}: {where}: {_shown(value)} is not under a '
                '"ros__parameters:" key; parameters go under "/**: ros__parameters:" (every '
                'node) or "<node name>: ros__parameters:"')


def _has_wrapper(mapping):
    return WRAPPER in mapping or any(isinstance(v, dict) and _has_wrapper(v)
                                     for v in mapping.values())


def _check_parameters(path, mapping, prefix):
    for key, value in mapping.items():
        name = f'{prefix}{key}'
        if isinstance(value, dict):
            _check_parameters(path, value, name + '.')
        elif isinstance(value, list):
            _check_list(path, name, value)


def _check_list(path, name, values):
    kinds = [_kind(v) for v in values]
    for i, (value, kind) in enumerate(zip(values, kinds)):
        if kind in ('list', 'mapping'):
            raise ParamsFileError(f'params file {path}: {name}[{i}]: a {kind} inside a list; '
                                  'a parameter is a flat list of numbers, booleans or strings')
    problem = mixed_list_problem(values)
    if problem is not None:
        raise ParamsFileError(f'params file {path}: {name}[{problem[0]}]: {problem[1]}')


def mixed_list_problem(values):
    """(index, what is wrong with that item, in words) of a list rcl refuses because its
    items are of more than one type (`mixed_item`), or None."""
    mixed = mixed_item(values)
    if mixed is None:
        return None
    i, kind, of = mixed
    if of == 'float':
        return i, (f'{values[i]} is an integer in a list of floats (rcl wants one type per '
                   f'list); write {values[i]}.0')
    return i, (f'{_shown(values[i])} is {"an" if kind[0] in "aeiou" else "a"} {kind} in a '
               f'list of {of}s (rcl wants one type per list)')


def mixed_item(values):
    """(index, its kind, the list's kind) of the item that makes the list `values` one
    rcl refuses (items of more than one type: an integer among floats, or the first item
    whose type differs from the first's), or None."""
    kinds = [_kind(v) for v in values]
    if len(set(kinds)) <= 1:
        return None
    if set(kinds) == {'integer', 'float'}:
        return kinds.index('integer'), 'integer', 'float'
    i = next(i for i, kind in enumerate(kinds) if kind != kinds[0])
    return i, kinds[i], kinds[0]


KINDS = ((type(None), 'null'), (bool, 'boolean'), (int, 'integer'), (float, 'float'),
         (str, 'string'), (list, 'list'), (dict, 'mapping'))    # bool before int


def _kind(value):
    return next((name for kind, name in KINDS if isinstance(value, kind)),
                type(value).__name__)


def _shown(value):
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + '...'


def _ros_items(args, options):
    """The values after each of `options` inside ``--ros-args`` of `args`."""
    args = list(args or ())
    return [args[i + 1] for i, arg, inside in ros_args_positions(args)
            if inside and arg in options and i + 1 < len(args)]


def node_name_of(default, args):
    """(namespace, name) the node `default` gets from the ``-r`` / ``--remap`` rules
    ``__node:=`` (or ``__name:=``) and ``__ns:=`` in `args` (possibly prefixed
    ``<default>:``), as rcl applies them; namespace '' without a rule."""
    name, namespace = default, ''
    for rule in _ros_items(args, ('-r', '--remap')):
        target, _, value = rule.partition(':=')
        node, _, key = target.rpartition(':')
        if node and node != default:
            continue
        if key in ('__node', '__name') and value:
            name = value
        elif key == '__ns' and value:
            namespace = '/' + value.strip('/')
    return namespace.rstrip('/'), name


def command_line_items(args):
    """[(node name or None, parameter, value, text)] of the ``-p`` / ``--param`` items
    inside ``--ros-args`` of `args` (``-p node:name:=value`` names the node), the value
    read as YAML as rcl reads parameter values (YAML 1.2 floats), or the text when it is
    not YAML."""
    items = []
    for item in _ros_items(args, ('-p', '--param')):
        target, assigned, text = item.partition(':=')
        if not assigned:
            continue
        node, _, name = target.rpartition(':')
        try:
            value = yaml.load(text, Loader=ParameterFileLoader)
        except yaml.YAMLError:
            value = text
        items.append((node or None, name, value, text))
    return items


def command_line_parameters(args, node_name):
    """The parameter names given by ``-p`` / ``--param`` in `args` for node `node_name`
    (unprefixed, or ``-p <node_name>:name:=value``)."""
    names = []
    for item in _ros_items(args, ('-p', '--param')):
        target = item.split(':=', 1)[0]
        node, _, name = target.rpartition(':')
        if node in ('', node_name):
            names.append(name)
    return names


def node_sections(path):
    """{section key: [parameter names]} of a parameter file (namespaces joined with '/',
    nested parameters dotted); {} if it cannot be read."""
    try:
        with open(path, encoding='utf-8') as stream:
            document = yaml.load(stream, Loader=ParameterFileLoader)
    except (OSError, yaml.YAMLError):
        return {}
    sections = {}

    def walk(mapping, names):
        for key, value in mapping.items():
            if key == WRAPPER and names:
                sections['/'.join(names)] = sorted(_flat(value or {}, ''))
            elif isinstance(value, dict):
                walk(value, names + [str(key).strip('/')])
    if isinstance(document, dict):
        walk(document, [])
    return {('/' + key if not key.startswith('/') else key): names
            for key, names in sections.items()}


def _flat(mapping, prefix):
    names = []
    for key, value in mapping.items():
        if isinstance(value, dict):
            names += _flat(value, f'{prefix}{key}.')
        else:
            names.append(f'{prefix}{key}')
    return names


# ------------------------------------------ sections, and the origins in layered files
# (here, below `layering`, which imports them: the layering builds on this module)


def section_matches(section, fqn):
    """Whether the parameter-file section `section` applies to the node `fqn`, as rclpy
    matches them: a leading '/' added; a ``/*`` path segment is one name of word
    characters, ``/**`` any number of them (none included); the rest literal."""
    section = section if section.startswith('/') else '/' + section
    parts = section.split('/*')
    pattern = re.escape(parts[0])
    for part in parts[1:]:
        pattern += '(/[A-Za-z0-9_]+)'
        if part.startswith('*'):
            pattern, part = pattern + '*', part[1:]
        pattern += re.escape(part)
    return re.fullmatch(pattern, fqn) is not None


def _quoted(text):
    """A YAML double-quoted scalar of `text` in ASCII (rcl and PyYAML read it back
    exactly, newlines and all)."""
    out = []
    for char in str(text):
        code = ord(char)
        if char in '"\\':
            out.append('\\' + char)
        elif char == '\n':
            out.append('\\n')
        elif char == '\t':
            out.append('\\t')
        elif 0x20 <= code < 0x7f:
            out.append(char)
        elif code <= 0xff:
            out.append(f'\\x{code:02x}')
        elif code <= 0xffff:
            out.append(f'\\u{code:04x}')
        else:
            out.append(f'\\U{code:08x}')
    return '"' + ''.join(out) + '"'


ORIGIN = '  # from '   # before the file a layered value came from


def layered_origin(path, name):
    """Where parameter `name` of a file written by `layering.write_layered_file` came
    from: the original file (or the overrides' label) its ``# from`` comment names; None
    if the file has no such comment for `name` (any other file) or cannot be read."""
    key = f'    {_quoted(name)}: '
    try:
        with open(path, encoding='utf-8') as stream:
            lines = [line.rstrip('\n') for line in stream if line.startswith(key)]
    except (OSError, UnicodeDecodeError):
        return None
    for line in reversed(lines):             # the node's own section follows /**
        if ORIGIN in line:
            return line.rpartition(ORIGIN)[2] or None
    return None


def section_applies(key, fully_qualified_name):
    """Whether a parameter file section `key` ('/**', '/**/name', '/ns/name', ...) applies
    to the node `fully_qualified_name`, as rclpy matches them ('**' any namespaces, '*' one
    name): `section_matches`."""
    return section_matches(key, fully_qualified_name)


def parameter_source(args, node_name, name, fully_qualified_name=None):
    """Where parameter `name` of node `node_name` came from on the command line `args`:
    '-p' for a ``-p`` item, else the last ``--params-file`` with a section applying to the
    node that sets it (the later file wins; for a file a launch file layered, the file
    the value came from, as its comment names it: `layered_origin`), else None
    (a default)."""
    if name in command_line_parameters(args, node_name):
        return '-p'
    fqn = fully_qualified_name or '/' + node_name.lstrip('/')
    found = None
    for path in params_files(args):
        if any(name in names for key, names in node_sections(path).items()
               if section_applies(key, fqn)):
            found = path
    return (layered_origin(found, name) or found) if found else None


def error_source(args, node_name, message, fully_qualified_name=None):
    """' (from FILE)' or ' (given by -p)' for a bad-parameter `message` that starts with
    the parameter's name ('robot.position_min: expected 7 values, got 6', 'gains.kp[2]:
    ...'); '' when neither a file nor a -p gave it."""
    name = str(message).split(':', 1)[0].split('[', 1)[0].split(' ', 1)[0].strip()
    source = parameter_source(args, node_name, name, fully_qualified_name) if name else None
    if source is None:
        return ''
    return ' (given by -p)' if source == '-p' else f' (from {source})'
