#!/usr/bin/env python3
"""Write doc/parameters.md and robot_dynamics/nodes/common/parameter_catalogue.py from the
nodes' own parameter declarations, so that neither can go stale:

    PYTHONPATH=. python3 tools/parameter_doc.py          # rewrite both
    PYTHONPATH=. python3 tools/parameter_doc.py --check  # exit 1 if either differs

Each node of the package (the controller, the plant, the `sim` demo's move) is built once
with a preset (config/panda.yaml; the demo move config/puma560.yaml and
sim_puma560.yaml) in a private rclpy context, and every `declare_parameter` call it makes is recorded: the name, the default it declares (not the preset's value), and its
descriptor (description, read-only, range). Per-joint parameters (`constraints.<joint>.*`)
are written once with `<joint>`. test/test_parameter_doc.py fails when the committed files
differ from what this writes.
"""

import argparse
import math
import os
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CONFIG = os.path.join(REPO, 'config')
PAGE = os.path.join(REPO, 'doc', 'parameters.md')
CATALOGUE = os.path.join(REPO, 'robot_dynamics', 'nodes', 'common', 'parameter_catalogue.py')
JOINT = '<joint>'

# (node name, where it runs, module, class, preset it is built with). The Panda's 7 joints
# tell per-joint arrays from 3- and 6-vectors (robot.payload.com, .inertia).
NODES = (
    ('computed_torque_controller', 'the executables `controller` and `controller_managed` '
     '(the managed one declares the same parameters, at construction) and in `sim`',
     'robot_dynamics.nodes.controller', 'ComputedTorqueController', 'panda.yaml'),
    ('plant_simulator', 'the executable `plant` and in `sim`',
     'robot_dynamics.nodes.plant', 'PlantSimulator', 'panda.yaml'),
    ('demo_move', '`sim`: it sends the demo move', 'robot_dynamics.nodes.sim', 'DemoMove',
     ('puma560.yaml', 'sim_puma560.yaml')),
)
SHARED = ('computed_torque_controller', 'plant_simulator')
# declared by rclpy itself for every node: left out
RCLPY_PARAMETERS = ('use_sim_time', 'start_type_description_service')

INTRODUCTION = """\
# Parameters

Every parameter of the package's nodes, as each node declares it: name, type, default,
whether it can be changed while the node runs (`ros2 param set`; "no" means read-only: read
at start-up, or at `configure` for the managed controller) and its description with the
allowed range. `ros2 param describe <node> <name>` shows the same text.

This page is generated from the nodes' declarations by `tools/parameter_doc.py` (do not edit
it by hand; a test fails when it differs from what the nodes declare). The defaults of
per-joint arrays are shown per joint (`100.0 per joint`: one value for each of the `joints`);
`<joint>` stands for each joint's name; "—" is no default (the parameter file gives it, or
the description says what an unset value means) and, as a type, a type taken from the value
given. rclpy's own `use_sim_time` is left out.

Where the values come from (parameter files, `/**` and node sections, `-p`) and what the
model parameters `robot.*` mean: [Using it in a ROS 2
workspace](../README.md#using-it-in-a-ros-2-workspace), [Presets](../README.md#presets) and
[conventions](conventions.md). A key that no node of
the package declares is named in a warning with the closest known name; `ros2 param set`
of an unknown name is refused with the same hint.
"""


def _record(node_class):
    """A subclass of `node_class` that records each declare_parameter call."""
    class Recording(node_class):
        def declare_parameter(self, name, value=None, descriptor=None, ignore_override=False):
            declared = getattr(self, '_declared', None)
            if declared is None:
                declared = self._declared = []
            declared.append((name, value, descriptor))
            return super().declare_parameter(name, value, descriptor, ignore_override)
    Recording.__name__ = node_class.__name__
    return Recording


def declarations():
    """{node name: [(name, default, descriptor, value type)]} in declaration order, the
    joint names of the preset replaced by `<joint>` (each per-joint parameter once)."""
    import importlib
    import warnings

    import rclpy

    os.environ.setdefault('ROS_AUTOMATIC_DISCOVERY_RANGE', 'LOCALHOST')
    os.environ.setdefault('ROS_DOMAIN_ID', str(150 + os.getpid() % 50))
    result = {}
    for node_name, _, module, class_name, preset in NODES:
        context = rclpy.Context()
        # (no --log-level: it would set the level of every logger of the process)
        files = (preset,) if isinstance(preset, str) else preset
        rclpy.init(context=context, args=['parameter_doc', '--ros-args'] + [
            item for name in files for item in ('--params-file', os.path.join(CONFIG, name))])
        try:
            node_class = getattr(importlib.import_module(module), class_name)
            with warnings.catch_warnings():
                warnings.simplefilter('ignore')
                node = _record(node_class)(context=context)
            try:
                joints = [j for j in (node.get_parameter('joints').value or ())]
                rows, seen = [], set()
                for name, default, descriptor in node._declared:
                    if name in RCLPY_PARAMETERS:
                        continue
                    for joint in joints:
                        name = name.replace(f'.{joint}.', f'.{JOINT}.')
                        if descriptor is not None:
                            descriptor.description = descriptor.description.replace(
                                f'joint {joint} ', 'the joint ').replace(joint, JOINT)
                    if name in seen:
                        continue
                    seen.add(name)
                    value = node.get_parameter(name).value if node.has_parameter(name) \
                        else None
                    rows.append((name, default, descriptor, value, len(joints)))
                result[node_name] = rows
            finally:
                node.destroy_node()
        finally:
            rclpy.try_shutdown(context=context)
    return result


def _type(default, value):
    sample = default if default is not None else value
    if isinstance(sample, bool):
        return 'bool'
    if isinstance(sample, int):
        return 'integer'
    if isinstance(sample, float):
        return 'double'
    if isinstance(sample, str):
        return 'string'
    if isinstance(sample, (list, tuple)):
        inner = _type(sample[0], None) if len(sample) else ''
        return f'{inner or "array"}[]'
    return '—'


def _number(value):
    if isinstance(value, float):
        return repr(value) if abs(value) < 1e6 or not math.isfinite(value) else f'{value:g}'
    return repr(value)


def _default(default, n):
    if default is None:
        return '—'
    if isinstance(default, bool):
        return 'true' if default else 'false'
    if isinstance(default, str):
        return f'`{default}`' if default else 'empty'
    if isinstance(default, (list, tuple)):
        if not default:
            return 'empty'
        if len(default) == n and len(set(default)) == 1:
            return f'{_number(default[0])} per joint'
        return '[' + ', '.join(f'{v:.4g}' if isinstance(v, float) else repr(v)
                               for v in default) + ']'
    return _number(default)


def _cell(text):
    return text.replace('|', '\\|').replace('\n', ' ')


def _range(descriptor):
    ranges = list(getattr(descriptor, 'floating_point_range', None) or ())
    if not ranges:
        return ''
    r = ranges[0]
    low = '' if r.from_value <= -1e12 else f'{r.from_value:g}'
    high = '' if r.to_value >= 1e12 else f'{r.to_value:g}'
    return f' (range [{low or "-inf"}, {high or "inf"}])'


def _row(name, default, descriptor, value, n):
    live = 'no' if descriptor is not None and descriptor.read_only else 'yes'
    text = descriptor.description if descriptor is not None else ''
    return (f'| `{name}` | {_type(default, value)} | {_cell(_default(default, n))} | {live} '
            f'| {_cell(text + _range(descriptor))} |')


HEADER = ['| parameter | type | default | live | description |', '|---|---|---|---|---|']


def page(found):
    rows = {node: {row[0]: _row(*row) for row in found[node]} for node, *_ in NODES}
    shared = sorted(name for name, row in rows[SHARED[0]].items()
                    if rows[SHARED[1]].get(name) == row)
    lines = [INTRODUCTION]
    for node_name, where, *_ in NODES:
        lines.append(f'## {node_name}\n')
        lines.append(f'In {where}' + ('; also the parameters [shared with the plant]'
                                      '(#shared-by-the-controller-and-the-plant)'
                                      if node_name == SHARED[0] else
                                      '; also the parameters [shared with the controller]'
                                      '(#shared-by-the-controller-and-the-plant)'
                                      if node_name == SHARED[1] else '') + '.\n')
        lines += HEADER
        lines += [row for name, row in sorted(rows[node_name].items())
                  if node_name not in SHARED or name not in shared]
        lines.append('')
        if node_name == SHARED[1]:
            lines.append('## Shared by the controller and the plant\n')
            lines.append('Both nodes declare these, with the same meaning (a `/**` section '
                         'of a parameter file sets them for both).\n')
            lines += HEADER
            lines += [rows[SHARED[0]][name] for name in shared]
            lines.append('')
    return '\n'.join(lines).rstrip('\n') + '\n'


def catalogue(found):
    lines = ['"""The parameter names each node of the package declares (`<joint>`: any joint',
             "name), for the warning about a parameter file's key that no node declares.",
             'Generated by tools/parameter_doc.py from the nodes\' declarations: do not edit',
             '(test/test_parameter_doc.py fails when it differs)."""', '', 'NAMES = {']
    for node_name, *_ in NODES:
        lines.append(f'    {node_name!r}: (')
        for name in sorted(row[0] for row in found[node_name]):
            lines.append(f'        {name!r},')
        lines.append('    ),')
    lines.append('}')
    return '\n'.join(lines) + '\n'


def outputs():
    """{path: text} of the two generated files."""
    found = declarations()
    return {PAGE: page(found), CATALOGUE: catalogue(found)}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--check', action='store_true',
                        help='exit 1 if a committed file differs from what the nodes declare')
    args = parser.parse_args(argv)
    stale = []
    for path, text in outputs().items():
        current = open(path, encoding='utf-8').read() if os.path.exists(path) else None
        if current == text:
            continue
        stale.append(os.path.relpath(path, REPO))
        if not args.check:
            with open(path, 'w', encoding='utf-8') as stream:
                stream.write(text)
    if args.check and stale:
        print(f'stale: {", ".join(stale)} (run: PYTHONPATH=. python3 tools/parameter_doc.py)',
              file=sys.stderr)
        return 1
    print(('rewrote ' if stale else 'up to date: ') + ', '.join(
        stale or [os.path.relpath(p, REPO) for p in (PAGE, CATALOGUE)]))
    return 0


if __name__ == '__main__':
    sys.path.insert(0, REPO)
    sys.exit(main())
