"""doc/parameters.md and the package's catalogue of parameter names are what the nodes
declare: tools/parameter_doc.py writes them from the declarations, and this test fails
when a committed file differs (a parameter added, renamed, removed, or its type, default
or description changed without running the tool)."""

import os
import sys

import pytest

from ros_testing import REPO  # noqa: I100 - sets ROS_DOMAIN_ID

sys.path.insert(0, os.path.join(REPO, 'tools'))
import parameter_doc  # noqa: E402

pytestmark = pytest.mark.filterwarnings('ignore::UserWarning')
FIX = 'stale: run `PYTHONPATH=. python3 tools/parameter_doc.py` and commit the result'


@pytest.fixture(scope='module')
def generated():
    return parameter_doc.outputs()


@pytest.mark.parametrize('path', [parameter_doc.PAGE, parameter_doc.CATALOGUE])
def test_the_committed_file_is_what_the_nodes_declare(generated, path):
    with open(path, encoding='utf-8') as stream:
        committed = stream.read()
    if committed != generated[path]:
        old, new = set(committed.splitlines()), set(generated[path].splitlines())
        changed = sorted(new - old)[:5] + ['--- committed, not declared:'] + sorted(old - new)[:5]
        pytest.fail(f'{os.path.relpath(path, REPO)} {FIX}; differences:\n' + '\n'.join(changed))


def test_the_page_lists_each_nodes_parameters_with_default_and_description(generated):
    page = generated[parameter_doc.PAGE]
    # a row from each part of the controller's start-up, the plant and the demo move
    for row in ('| `gains.kp` | double[] | 100.0 per joint | yes | position gains',
                '| `constraints.<joint>.goal` | double | 0.0 | yes |',
                '| `speed_scaling.rate_limit` | double | 2.0 | no |',
                '| `integration_method` | string | `rk4` | no |',
                '| `move_duration` | double |',
                '| `robot.payload.mass` | double | 0.0 | yes |'):
        assert row in page, row
    assert '| `use_sim_time` |' not in page          # rclpy's own


def test_a_renamed_parameter_would_be_caught(generated, monkeypatch):
    """The check compares against the declarations, not against itself: a node declaring
    another name changes what the tool writes."""
    from robot_dynamics.nodes import plant
    original = plant.declare

    def renamed(node, name, *args, **kwargs):
        return original(node, 'integration_stepsize' if name == 'integration_step' else name,
                        *args, **kwargs)
    monkeypatch.setattr(plant, 'declare', renamed)
    page = parameter_doc.page(parameter_doc.declarations())
    assert '`integration_stepsize`' in page and page != generated[parameter_doc.PAGE]
