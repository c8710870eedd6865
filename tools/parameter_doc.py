#!/usr/bin/env python3
"""Write doc/parameters.md from the parameter tables (robot_dynamics/parameters/), so that
it cannot go stale:

    PYTHONPATH=. python3 tools/parameter_doc.py          # rewrite it
    PYTHONPATH=. python3 tools/parameter_doc.py --check  # exit 1 if it differs

No node is started: the tables are what the nodes declare (test/test_parameter_doc.py builds
the nodes and fails when a node declares a parameter the table lacks, or differently, and
when the committed page differs from what this writes). Per-joint parameters
(`constraints.<joint>.*`) are written once with `<joint>`.
"""

import argparse
import math
import os
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PAGE = os.path.join(REPO, 'doc', 'parameters.md')
JOINT = '<joint>'
# the nodes sharing the robot block, diagnostics and real-time parameters
SHARED = ('computed_torque_controller', 'plant_simulator')

INTRODUCTION = """\
# Parameters

Every parameter of the package's nodes, as each node declares it: name, type, default,
whether it can be changed while the node runs (`ros2 param set`; "no" means read-only: read
at start-up, or at `configure` for the managed controller) and its description with the
allowed range. `ros2 param describe <node> <name>` shows the same text.

This page is generated from the parameter tables (`robot_dynamics/parameters/`, from which
the nodes declare their parameters) by `tools/parameter_doc.py` (do not edit it by hand; a
test fails when it differs from the tables, or a node from its table). The defaults of
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


def _type(entry):
    return entry.type or '—'


def _number(value):
    if isinstance(value, float):
        return repr(value) if abs(value) < 1e6 or not math.isfinite(value) else f'{value:g}'
    return repr(value)


def _default(entry):
    from robot_dynamics.parameters import FROM_MODEL
    default = entry.default
    if default is FROM_MODEL:
        return 'from the model'
    if default is None:
        return '—'
    if isinstance(default, bool):
        return 'true' if default else 'false'
    if isinstance(default, str):
        return f'`{default}`' if default else 'empty'
    if isinstance(default, (list, tuple)):
        if not default:
            return 'empty'
        return '[' + ', '.join(f'{v:.4g}' if isinstance(v, float) else repr(v)
                               for v in default) + ']'
    return _number(default) + (' per joint' if entry.per_joint else '')


def _cell(text):
    return text.replace('|', '\\|').replace('\n', ' ')


def _range(entry):
    """The range rcl checks (scalar doubles), as the nodes declare it."""
    if entry.type != 'double' or (entry.minimum is None and entry.maximum is None):
        return ''
    low = '-inf' if entry.minimum is None else f'{entry.minimum:g}'
    high = 'inf' if entry.maximum is None else f'{entry.maximum:g}'
    return f' (range [{low}, {high}])'


def _row(entry):
    live = 'yes' if entry.live else 'no'
    return (f'| `{entry.name}` | {_type(entry)} | {_cell(_default(entry))} | {live} '
            f'| {_cell(entry.description + _range(entry))} |')


HEADER = ['| parameter | type | default | live | description |', '|---|---|---|---|---|']


def page(found):
    rows = {node: {entry.name: _row(entry) for entry in entries}
            for node, entries in found.items()}
    shared = sorted(name for name, row in rows[SHARED[0]].items()
                    if rows[SHARED[1]].get(name) == row)
    lines = [INTRODUCTION]
    for node_name in found:
        from robot_dynamics.parameters import WHERE
        where = WHERE[node_name]
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


def declarations():
    """{node name: its table entries} (robot_dynamics.parameters.TABLES)."""
    from robot_dynamics.parameters import TABLES
    return dict(TABLES)


def outputs():
    """{path: text} of the generated page."""
    return {PAGE: page(declarations())}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--check', action='store_true',
                        help='exit 1 if the committed page differs from the tables')
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
        stale or [os.path.relpath(PAGE, REPO)]))
    return 0


if __name__ == '__main__':
    sys.path.insert(0, REPO)
    sys.exit(main())
