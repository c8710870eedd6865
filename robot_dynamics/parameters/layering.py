"""Parameter files layered so that later files win, whatever section each value is under.

rcl keeps one entry per section name (``/**``, ``/**/ctrl``, ``/ctrl``, ...) across all the
``--params-file`` and ``-p`` of a command line, in the order each name first appears; a
later file's value goes into the entry of its section name, and a node applies the
entries that match its name in that order. So a ``/**`` value of a later file loses to an
earlier file's ``/**/ctrl`` section, and a renamed node (``-r __node:=ctrl2``) applies no
section written for its usual name.

Here the files are read as rcl reads them (`read_sections`: rcl's scalar types, its
node-name wildcards), the sections that apply to one node are taken file after file, each
file's in its own order (`parameter_layers`), and the result is written to one file
(`write_layered_file`) that the node is given instead: later files win, and sections for
the node's usual name (`aliases`) still apply after a rename. Used by the launch files
(one file per node, launch arguments last), by the nodes' own start-up
(`layered_arguments`) and by any tool that reads a node's parameters out of its files
(`layered_parameters`)."""

import math
import os
import re
import sys
import tempfile

import yaml

# the lower module: its file checks and command-line reading, the section matching and the
# `# from` comment this module writes and `layered_origin` reads
from robot_dynamics.parameters.params_file import (_quoted, layered_origin, node_name_of,
                                                   ORIGIN, ParamsFileError,
                                                   ros_args_positions, section_matches)

__all__ = ['rcl_scalar', 'read_sections', 'section_matches', 'node_fqn', 'parameter_layers',
           'layered_parameters', 'layered_sections', 'write_layered_file',
           'write_nodes_file', 'layered_arguments', 'layered_origin', 'EVERY_NODE']

EVERY_NODE = '/**'
WRAPPER = 'ros__parameters'
STR_TAG = 'tag:yaml.org,2002:str'
_TRUE = {'Y', 'y', 'yes', 'Yes', 'YES', 'true', 'True', 'TRUE', 'on', 'On', 'ON'}
_FALSE = {'N', 'n', 'no', 'No', 'NO', 'false', 'False', 'FALSE', 'off', 'Off', 'OFF'}
_SPECIAL_FLOATS = {'.nan', '.NaN', '.NAN', '.inf', '.Inf', '.INF', '+.inf', '+.Inf', '+.INF',
                   '-.inf', '-.Inf', '-.INF'}
_SPACE = '[ \t\n\v\f\r]*'     # what strtoll/strtod skip before the number
_INTEGER = re.compile(_SPACE + r'[+-]?(?:0[xX][0-9a-fA-F]+|0[0-7]*|[1-9][0-9]*)')
_DECIMAL = re.compile(_SPACE + r'[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?')
_HEX_FLOAT = re.compile(_SPACE + r'[+-]?0[xX](?:[0-9a-fA-F]+\.?[0-9a-fA-F]*|\.[0-9a-fA-F]+)'
                        r'(?:[pP][+-]?[0-9]+)?')
_WORD_FLOAT = re.compile(_SPACE + r'[+-]?(?:inf|infinity|nan(?:\([0-9A-Za-z_]*\))?)', re.I)
_INT64 = (-2 ** 63, 2 ** 63 - 1)


def rcl_scalar(text, quoted=False, tag=None):
    """A parameter value's text as rcl_yaml_param_parser types it: ``!!str`` or quoted:
    the string; else a boolean (y, yes, true, on, ... in rcl's spellings), an integer as
    C's strtoll(text, base 0) reads all of it (0x1F, 017), a double as strtod reads all of
    it (1e-05, .inf, 08, 0x1p3), otherwise the string. Every other tag is ignored."""
    if tag == STR_TAG or quoted:
        return text
    if text in _TRUE:
        return True
    if text in _FALSE:
        return False
    if _INTEGER.fullmatch(text):
        value = _strtoll(text.strip())
        if _INT64[0] <= value <= _INT64[1]:
            return value
    if text in _SPECIAL_FLOATS:
        value = math.nan if 'n' in text.lower().replace('inf', '') else math.inf
        return -value if text.startswith('-') else value
    value = _strtod(text)
    return text if value is None else value


def _strtoll(digits):
    """C's strtoll(base 0) of a whole integer text: 0x hex, a leading 0 octal."""
    sign = -1 if digits.startswith('-') else 1
    body = digits.lstrip('+-')
    if body[:2] in ('0x', '0X'):
        return sign * int(body[2:], 16)
    if len(body) > 1 and body.startswith('0'):
        return sign * int(body, 8)
    return sign * int(body)


def _strtod(text):
    """C's strtod of all of `text` without a range error (glibc), or None."""
    word = text.strip()
    if _DECIMAL.fullmatch(text):
        value = float(word)
        mantissa = re.split('[eE]', word)[0]
        nonzero = any(c in '123456789' for c in mantissa)
    elif _WORD_FLOAT.fullmatch(text):
        return float(re.sub(r'\(.*\)', '', word.lower()).replace('infinity', 'inf'))
    elif _HEX_FLOAT.fullmatch(text):
        body = word.lstrip('+-')
        value = float.fromhex(body) * (-1.0 if word.startswith('-') else 1.0)
        mantissa = re.split('[pP]', body[2:])[0]
        nonzero = any(c not in '0.' for c in mantissa)
    else:
        return None
    if math.isinf(value):
        return None                                      # overflow: ERANGE
    if (value == 0.0 and nonzero) or 0.0 < abs(value) < sys.float_info.min:
        return None                                      # underflow: ERANGE
    return value


# ------------------------------------------------------------------------- reading


class _Pairs(list):
    """A YAML mapping: [(key _Scalar, node)] in the file's order."""


class _Scalar:
    __slots__ = ('text', 'quoted', 'tag', 'line')

    def __init__(self, event):
        self.text, self.tag = event.value, event.tag
        self.quoted = event.style in ("'", '"')
        self.line = event.start_mark.line + 1


def _tree(events, path):
    """The next node of a YAML event stream: _Scalar, list (a sequence) or _Pairs."""
    event = next(events)
    if isinstance(event, yaml.ScalarEvent):
        return _Scalar(event)
    if isinstance(event, yaml.AliasEvent):
        raise ParamsFileError(f'params file {path}: line {event.start_mark.line + 1}: an '
                              f'alias (*{event.anchor}); rcl does not read aliases: write the '
                              'value again')
    if isinstance(event, yaml.SequenceStartEvent):
        items = []
        while not isinstance(_peek(events), yaml.SequenceEndEvent):
            items.append(_tree(events, path))
        next(events)
        return items
    if isinstance(event, yaml.MappingStartEvent):
        pairs = _Pairs()
        while not isinstance(_peek(events), yaml.MappingEndEvent):
            key = _tree(events, path)
            if not isinstance(key, _Scalar):
                raise ParamsFileError(f'params file {path}: a mapping key that is not a '
                                      'name')
            pairs.append((key, _tree(events, path)))
        next(events)
        return pairs
    raise ParamsFileError(f'params file {path}: unexpected {type(event).__name__}')


class _Events:
    """An event iterator with one event of look-ahead."""

    def __init__(self, events):
        self._events, self._next = iter(events), None

    def __iter__(self):
        return self

    def __next__(self):
        if self._next is not None:
            event, self._next = self._next, None
            return event
        return next(self._events)

    def peek(self):
        if self._next is None:
            self._next = next(self._events)
        return self._next


def _peek(events):
    return events.peek()


def read_sections(path):
    """[(section, {parameter: value})] of a parameter file in the file's order, as rcl
    reads it: the section is the node name with its namespaces joined by '/' as written
    (``/**``, ``/**/ctrl``, ``ctrl``, ``/arm/ctrl``), nested parameter names dotted, values
    typed as `rcl_scalar` does (a list is a list of them). A section that appears twice
    is listed twice. Raises ParamsFileError (one line) for what rcl would refuse here."""
    try:
        with open(path, encoding='utf-8') as stream:
            events = _Events(yaml.parse(stream, Loader=yaml.SafeLoader))
            while isinstance(events.peek(), (yaml.StreamStartEvent,
                                             yaml.DocumentStartEvent)):
                next(events)
            if isinstance(events.peek(), (yaml.StreamEndEvent, yaml.DocumentEndEvent)):
                return []
            document = _tree(events, path)
    except OSError as error:
        raise ParamsFileError(f'params file {path}: cannot be read ({error.strerror})') \
            from None
    except yaml.YAMLError as error:
        raise ParamsFileError(f'params file {path}: YAML syntax error: '
                              f'{str(error).splitlines()[0]}') from None
    if not isinstance(document, _Pairs):
        raise ParamsFileError(f'params file {path}: the top level is not a mapping of node '
                              'names')
    sections = []
    _node_level(path, document, '', sections)
    return sections


def _join(namespace, name):
    """rcl's node-namespace join: '/' between, not doubled after a trailing '/'."""
    if not namespace:
        return name
    return namespace + name if namespace.endswith('/') else f'{namespace}/{name}'


def _node_level(path, pairs, namespace, sections):
    for key, value in pairs:
        if key.text.startswith(WRAPPER):
            if not namespace:
                raise ParamsFileError(f'params file {path}: line {key.line}: ros__parameters '
                                      'without a node name above it')
            parameters = {}
            if isinstance(value, _Pairs):
                _parameter_level(path, value, '', parameters)
            elif not (isinstance(value, _Scalar) and value.text == ''):
                raise ParamsFileError(f'params file {path}: line {key.line}: {namespace}: '
                                      'ros__parameters is not a mapping')
            sections.append((namespace, parameters))
        elif isinstance(value, _Pairs):
            _node_level(path, value, _join(namespace, key.text), sections)
        else:
            raise ParamsFileError(f'params file {path}: line {key.line}: '
                                  f'{_join(namespace, key.text)}: not under '
                                  '"<node name>: ros__parameters:"')


def _parameter_level(path, pairs, prefix, parameters):
    for key, value in pairs:
        name = prefix + key.text
        if isinstance(value, _Scalar):
            if value.text == '' and not value.quoted:
                raise ParamsFileError(f'params file {path}: line {key.line}: {name}: no value')
            parameters[name] = rcl_scalar(value.text, value.quoted, value.tag)
        elif isinstance(value, _Pairs):
            _parameter_level(path, value, name + '.', parameters)
        elif all(isinstance(item, _Scalar) for item in value):
            items = [rcl_scalar(item.text, item.quoted, item.tag) for item in value]
            kinds = {_rcl_type(item) for item in items}
            if len(kinds) > 1:
                raise ParamsFileError(f'params file {path}: line {key.line}: {name}: a list '
                                      'of mixed types (rcl wants one type per list)')
            parameters[name] = items
        else:
            raise ParamsFileError(f'params file {path}: line {key.line}: {name}: a list '
                                  'inside a list or mapping; a parameter is a flat list')


def _rcl_type(value):
    return bool if isinstance(value, bool) else type(value)


# ------------------------------------------------------------------------- matching


def node_fqn(name, namespace=''):
    """The fully qualified name of node `name` in `namespace` ('/ns/name'; a `name`
    starting with '/' is taken as fully qualified)."""
    if str(name).startswith('/'):
        return str(name)
    namespace = '/' + str(namespace or '').strip('/')
    return f'{namespace.rstrip("/")}/{name}'


# ------------------------------------------------------------------------- layering


def parameter_layers(paths, node=None, aliases=()):
    """[(path, section, {parameter: value})] of the sections of the parameter files
    `paths` that apply to the node `node` (a fully qualified name such as
    '/computed_torque_controller', or a bare name in the root namespace) or to one of
    `aliases` (e.g. the node's name before a rename), in the order they are to be applied:
    file after file, each file's sections in the file's order (as rcl orders one file).
    With `node` None only the ``/**`` sections apply. Raises ParamsFileError (one line)
    for a file rcl would refuse."""
    names = [node_fqn(n) for n in ([node] if node else []) + list(aliases or ())]
    layers = []
    for path in paths:
        for section, parameters in read_sections(path):
            full = section if section.startswith('/') else '/' + section
            if full == EVERY_NODE or any(section_matches(section, name) for name in names):
                layers.append((path, full, parameters))
    return layers


def layered_parameters(paths, node=None, aliases=()):
    """{parameter: value} of node `node` from the parameter files `paths` with later files
    winning, whatever section each value is under (`parameter_layers`): what the node gets
    when given `write_layered_file`'s file. Values typed as rcl types them (dotted names).

    E.g. the controller's gains from a preset, config/sim.yaml (``/**/computed_torque_
    controller:``) and a user's ``/**:`` file, the user's winning::

        layered_parameters([preset, sim_yaml, mine], '/computed_torque_controller')
    """
    values = {}
    for _path, _section, parameters in parameter_layers(paths, node, aliases):
        values.update(parameters)
    return values


YAML_NULLS = ('null', 'Null', 'NULL', '~')     # rcl reads a YAML null as this string


def robot_block_of_file(path, node_name=None):
    """The `robot` block of the parameter file `path`, flat ({'payload.mass': 1.0, ...}),
    as rcl reads it: the ``/**`` sections and those applying to node `node_name` (a name
    or fully qualified name), in the file's order, later values winning; a null (how
    ``ros2 param dump`` writes an unset parameter) is left out. ValueError names the file
    when it has no robot block."""
    block, found = {}, False
    for _path, _section, parameters in parameter_layers([path], node_name):
        for name, value in parameters.items():
            if name.startswith('robot.'):
                found = True
                if not (isinstance(value, str) and value in YAML_NULLS):
                    block[name[len('robot.'):]] = value
    if not found:
        raise ValueError(f'{path}: no robot block under "/**: ros__parameters: robot"'
                         + (f' or "{node_name}: ros__parameters: robot"' if node_name else ''))
    return block


def joints_of_file(path, node_name=None):
    """The `joints` list of the parameter file `path` (``/**`` and `node_name`'s sections,
    later winning), or None."""
    return layered_parameters([path], node_name).get('joints')


def layered_sections(paths, node, aliases=(), overrides=None):
    """({parameter: value} for every node, {parameter: value} for `node` alone): the
    layered parameters split by the kind of section their winning value came from
    (``/**``, or one naming the node or an alias), then `overrides` (for the node alone)
    on top. Written as the ``/**`` and the node's section of one file, they give the node
    `layered_parameters` (the two share no name), and the node still tells a parameter of
    its own section it does not have (the unknown-parameter warning)."""
    shared, own = {}, {}
    for _path, section, parameters in parameter_layers(paths, node, aliases):
        for name, value in parameters.items():
            (shared if section == EVERY_NODE else own)[name] = value
            (own if section == EVERY_NODE else shared).pop(name, None)
    for name, value in (overrides or {}).items():
        shared.pop(name, None)
        own[name] = list(value) if isinstance(value, tuple) else value
    return shared, own


def _scalar_text(value):
    if hasattr(value, 'item') and not isinstance(value, (list, tuple)):
        value = value.item()                  # a numpy scalar: its Python value
    if isinstance(value, bool):
        return 'true' if value else 'false'
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if math.isnan(value):
            return '.nan'
        if math.isinf(value):
            return '.inf' if value > 0 else '-.inf'
        text = repr(value)
        mantissa, e, exponent = text.partition('e')
        return f'{mantissa}.0e{exponent}' if e and '.' not in mantissa else text  # 4.0e-05
    if isinstance(value, str):
        return _quoted(value)
    raise ParamsFileError(f'a parameter value of type {type(value).__name__} ({value!r:.40})')


def _value_text(value):
    if hasattr(value, 'tolist') and not isinstance(value, (list, tuple)):
        value = value.tolist()                # a numpy array (or scalar)
    if isinstance(value, (list, tuple)):
        if any(isinstance(item, float) for item in value):   # one type per list, as rcl
            value = [float(item) for item in value]          # wants: floats, if any
        return '[' + ', '.join(_scalar_text(item) for item in value) + ']'
    return _scalar_text(value)


value_text = _value_text      # a parameter value as rcl reads it back, with its type


def robot_file_text(robot, comments=(), section='/**', header='', rows=None):
    """The text of ``SECTION: ros__parameters: robot: ...`` with the robot keys (`robot`:
    nested, or flat with dotted names) written nested, after the comment lines `header`
    (whole lines, '#' included) and `comments`; a list key of `rows` ({key: items per
    row}, e.g. com: 3, inertia: 6) one link per line. The layout a person reads (a robot
    file); values as `parameter_file_text` writes them."""
    nested = {}

    def place(mapping, prefix=''):
        for key, value in mapping.items():
            if isinstance(value, dict):
                place(value, f'{prefix}{key}.')
                continue
            head = nested
            parts = f'{prefix}{key}'.split('.')
            for part in parts[:-1]:
                head = head.setdefault(part, {})
            head[parts[-1]] = value
    place(robot)
    rows = rows or {}
    lines = ([header.rstrip('\n')] if header else []) + [f'# {c}' for c in comments]
    lines += [f'{section}:', f'  {WRAPPER}:', '    robot:']

    def emit(mapping, indent):
        for key, value in mapping.items():
            if isinstance(value, dict):
                lines.append(f'{" " * indent}{key}:')
                emit(value, indent + 2)
                continue
            text = _value_text(value)
            size = rows.get(key)
            if size and text.startswith('[') and len(value) > size:
                items = text[1:-1].split(', ')
                chunks = [', '.join(items[i:i + size]) for i in range(0, len(items), size)]
                margin = ' ' * (indent + len(key) + 3)
                text = '[' + f',\n{margin}'.join(chunks) + ']'
            lines.append(f'{" " * indent}{key}: {text}')
    emit(nested, 6)
    return '\n'.join(lines) + '\n'


def _section_text(name, parameters, origins=None):
    """The lines of section `name`, each value followed by the comment ``# from <origin>``
    when `origins` names where it came from (`layered_origin` reads it back)."""
    lines = [f'{name}:', f'  {WRAPPER}:']
    for key, value in parameters.items():
        origin = (origins or {}).get(key)
        note = ORIGIN + ' '.join(str(origin).split()) if origin else ''
        lines.append(f'    {_quoted(key)}: {_value_text(value)}{note}')
    return lines


def parameter_file_text(sections, header=''):
    """The text of a parameter file with `sections` ({section: {parameter: value}}, dotted
    names, values rcl reads back with their types), after the comment lines of `header`:
    the package's one writer (the layered files, the demo move's derived file)."""
    lines = [f'# {line}' for line in header.splitlines()]
    for name, parameters in sections.items():
        lines += _section_text(name, parameters)
    return '\n'.join(lines) + '\n'


def _origins(paths, node, aliases=(), overrides=None, overrides_origin=None):
    """{parameter: the file its layered value came from} (`overrides_origin` for the
    `overrides`)."""
    origins = {}
    for path, _section, parameters in parameter_layers(paths, node, aliases):
        origins.update(dict.fromkeys(parameters, path))
    origins.update(dict.fromkeys(overrides or {}, overrides_origin))
    return origins


def write_layered_file(paths, node, aliases=(), overrides=None, output=None,
                       every_node=False, header='', overrides_origin=None):
    """Write the parameters node `node` gets from the files `paths` layered (later files
    win, sections for `aliases` apply too, `overrides` last) to `output` (a new file in
    the temporary folder if None) and return its path: a ``/**`` section and one for the
    node (`layered_sections`), or all under ``/**`` with `every_node`. Each value is
    followed by a comment naming the file it came from (`overrides_origin` for the
    overrides), so that an error about it names the user's file (`layered_origin`). None
    if no parameter applies. Raises ParamsFileError (one line) for a file rcl would
    refuse."""
    shared, own = layered_sections(paths, node, aliases, overrides)
    origins = _origins(paths, node, aliases, overrides, overrides_origin)
    if every_node:
        shared, own = {**shared, **own}, {}
    if not (shared or own):
        return None
    lines = [f'# {line}' for line in header.splitlines()]
    if shared:
        lines += _section_text(EVERY_NODE, shared, origins)
    if own:
        lines += _section_text(node_fqn(node), own, origins)
    text = '\n'.join(lines) + '\n'
    if output is None:
        label = re.sub(r'[^A-Za-z0-9_]+', '_', node_fqn(node)).strip('_')
        handle, output = tempfile.mkstemp(prefix=f'robot_dynamics_{label}_', suffix='.yaml')
        with os.fdopen(handle, 'w', encoding='utf-8') as stream:
            stream.write(text)
    else:
        with open(output, 'w', encoding='utf-8') as stream:
            stream.write(text)
    return output


def write_nodes_file(paths, nodes, header=''):
    """Write, for each (fully qualified name, aliases) of `nodes`, the parameters that node
    gets from the files `paths` layered (`layered_parameters`: later files win whatever
    section each value is under) as a section of its own name, to a new file in the
    temporary folder, and return its path (None if no parameter applies). For several
    nodes in one process (`sim`): each section names one node, so no node gets another's
    values, and each value still names the file it came from (`layered_origin`). Raises
    ParamsFileError (one line) for a file rcl would refuse."""
    lines = [f'# {line}' for line in header.splitlines()]
    for node, aliases in nodes:
        parameters = layered_parameters(paths, node, aliases)
        if parameters:
            lines += _section_text(node_fqn(node), parameters,
                                   _origins(paths, node, aliases))
    if not any(not line.startswith('#') for line in lines):
        return None
    handle, output = tempfile.mkstemp(prefix='robot_dynamics_nodes_', suffix='.yaml')
    with os.fdopen(handle, 'w', encoding='utf-8') as stream:
        stream.write('\n'.join(lines) + '\n')
    return output


# ------------------------------------------------------------------------- command lines


def layered_arguments(args, default_name):
    """(arguments, merged file or None): the command line `args` of a node whose name is
    `default_name` before remap rules, with its ``--params-file`` items replaced by one
    file of their layered parameters (later files win; sections for the default name
    apply after a ``__node:=`` rename), written under ``/**`` and given first, so that
    each ``-p`` (which rcl puts in the ``/**`` entry, or its node's) wins over every
    file. `args` unchanged (and None) without a parameter file. The caller removes the
    file once rcl has read it (at rclpy.init). Raises ParamsFileError (one line)."""
    args = list(args)
    files, keep, skip = [], [], False
    for i, arg, inside in ros_args_positions(args):
        if skip:
            skip = False
            continue
        if inside and arg == '--params-file' and i + 1 < len(args):
            files.append(args[i + 1])
            skip = True
            continue
        keep.append(arg)
    if not files:
        return args, None
    namespace, name = node_name_of(default_name, args)
    fqn = node_fqn(name, namespace)
    default = node_fqn(default_name, namespace)
    merged = write_layered_file(
        files, fqn, aliases=[default] if default != fqn else [], every_node=True,
        header=f'parameters of {fqn} from {"; ".join(files)} (later files win)')
    if keep and keep[-1] == '--ros-args':
        keep.pop()            # nothing left in a trailing block
    if merged is None:
        return keep, None
    head, rest = keep[:1], keep[1:]
    return head + ['--ros-args', '--params-file', merged, '--'] + rest, merged
