"""Every joint_trajectory_controller parameter of Humble, Jazzy, Kilted and rolling (their
names kept in test/data/jtc_parameters.yaml, read from ros2_controllers'
joint_trajectory_controller_parameters.yaml) has a row in doc/trajectories.md's table "JTC
parameters and interfaces", and every row says whether it is the same, different or not
applicable here."""

import os
import re

import pytest
import yaml

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DATA = os.path.join(REPO, 'test', 'data', 'jtc_parameters.yaml')
DOC = os.path.join(REPO, 'doc', 'trajectories.md')
DISTROS = ('humble', 'jazzy', 'kilted', 'master')
VERDICTS = ('same', 'different', 'not applicable')


def upstream():
    with open(DATA, encoding='utf-8') as stream:
        return yaml.safe_load(stream)


def table_rows():
    """(names, verdict, why) of each row of the parameter table: the first cell's
    backticked names, a name starting with '.' continuing the previous name's prefix
    (`gains.<joint>.p`, `.i` -> gains.<joint>.i)."""
    with open(DOC, encoding='utf-8') as stream:
        text = stream.read()
    section = text.split('### JTC parameters and interfaces', 1)[1].split('\n## ', 1)[0]
    rows = []
    for line in section.splitlines():
        if not line.startswith('| ') or line.startswith('| JTC parameter') or \
                line.startswith('|---'):
            continue
        cells = [cell.strip() for cell in re.split(r'(?<!\\)\|', line)[1:-1]]
        names, prefix = [], ''
        for name in re.findall(r'`([^`]+)`', cells[0]):
            if name.startswith('.') and prefix:
                name = prefix + name[1:]
            else:
                prefix = name.rsplit('.', 1)[0] + '.' if '.' in name else ''
            names.append(name)
        rows.append((names, cells[1], cells[2] if len(cells) > 2 else ''))
    return rows


def test_the_data_is_the_four_branches_parameters():
    data = upstream()
    assert set(data) == set(DISTROS)
    for distro in DISTROS:
        assert re.fullmatch(r'[0-9a-f]{40}', data[distro]['commit'])
        names = data[distro]['parameters']
        assert len(names) == len(set(names)) > 20
    # facts of the definitions the rows rely on
    assert 'state_publish_rate' in data['humble']['parameters']
    assert 'state_publish_rate' not in data['jazzy']['parameters']
    assert 'allow_trajectory_replacement' in data['master']['parameters']
    assert 'gains.<joint>.angle_wraparound' in data['humble']['parameters']


def test_the_table_is_parsed():
    rows = table_rows()
    assert len(rows) > 30
    names = {name for row_names, _, _ in rows for name in row_names}
    assert {'gains.<joint>.p', 'gains.<joint>.i', 'gains.<joint>.d'} <= names


@pytest.mark.parametrize('distro', DISTROS)
def test_every_upstream_parameter_has_a_row(distro):
    named = {name for names, _, _ in table_rows() for name in names}
    missing = [name for name in upstream()[distro]['parameters'] if name not in named]
    assert not missing, (f'JTC ({distro}) parameters without a row in doc/trajectories.md '
                         f'"JTC parameters and interfaces": {missing}')


def test_every_upstream_row_says_same_different_or_not_applicable_and_why():
    upstream_names = {name for d in DISTROS for name in upstream()[d]['parameters']}
    for names, verdict, why in table_rows():
        if not upstream_names & set(names):
            continue                    # an interface, or a parameter of this package only
        match = re.match(r'(`\w+`: )?(same|different|not applicable)', verdict.lower())
        assert match, f'{names}: "{verdict}" is not same / different / not applicable'
        if match.group(2) != 'same':
            assert why, f'{names}: "{verdict}" without a reason'
