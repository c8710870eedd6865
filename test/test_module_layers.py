"""The core's imports go one way: robot_dynamics.urdf builds on robot_dynamics.model, never
the reverse (not even lazily, inside a function); RobotModel chooses the model source
(`robot.source`) in one place, from the sources registered with it."""

import ast
import os
import subprocess
import sys

from robot_dynamics import model
from robot_dynamics.model import urdf

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def imported_modules(module):
    """Every module `module`'s source imports, at the top or inside functions."""
    with open(module.__file__, encoding='utf-8') as stream:
        tree = ast.parse(stream.read())
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
            names.update(f'{node.module}.{alias.name}' for alias in node.names)
    return names


def test_model_does_not_import_urdf_and_urdf_imports_model():
    assert not any('urdf' in name for name in imported_modules(model))
    assert 'robot_dynamics.model' in imported_modules(urdf)


def test_the_urdf_source_is_registered_with_the_model():
    assert model.MODEL_SOURCES == {'urdf': urdf.model_from_params}


def test_importing_only_the_model_reads_a_urdf_parameter_file(tmp_path):
    """A fresh interpreter that imports robot_dynamics.model alone builds a model from a
    parameter file with robot.source urdf through RobotModel.from_yaml."""
    params = tmp_path / 'ur5.yaml'
    params.write_text('/**:\n  ros__parameters:\n    robot:\n      source: urdf\n'
                      f"      urdf_file: {os.path.join(REPO, 'test', 'data', 'ur5.urdf')}\n"
                      '      tip_link: tool0\n')
    code = ('import sys; from robot_dynamics.model import RobotModel; '
            'm = RobotModel.from_yaml(sys.argv[1]); print(m.source, m.n)')
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [REPO] + [p for p in [os.environ.get('PYTHONPATH')] if p]))
    result = subprocess.run([sys.executable, '-W', 'ignore', '-c', code, str(params)],
                            env=env, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ['urdf', '6']


def test_params_file_is_below_layering_with_no_import_back():
    """parameters/: the layering builds on the parameter-file module (its errors, its
    command-line reading, the section matching), which imports nothing of the layering,
    not even inside a function; the names moved down are still the layering's; the old
    paths under nodes/common are the same modules."""
    from robot_dynamics.parameters import layering, params_file
    assert not any('layering' in name for name in imported_modules(params_file))
    assert 'robot_dynamics.parameters.params_file' in imported_modules(layering)
    for name in ('section_matches', 'layered_origin'):
        assert getattr(layering, name) is getattr(params_file, name)
    from robot_dynamics.parameters import layering as old_layering
    from robot_dynamics.parameters import params_file as old_params_file
    assert old_layering is layering and old_params_file is params_file


def test_the_parameter_files_are_read_by_the_parameters_package_alone():
    """One parameter-file reader: the model and the URDF helper read files through
    robot_dynamics.parameters, and neither parses YAML itself."""
    for module in (model, urdf):
        names = imported_modules(module)
        assert 'yaml' not in names, module.__name__
    assert 'robot_dynamics.parameters.layering' in imported_modules(model)
    assert 'robot_dynamics.parameters.layering' in imported_modules(urdf)
