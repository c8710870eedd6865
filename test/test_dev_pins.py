"""tools/dev.py installs pinned versions: every package it asks for is pinned in
tools/constraints-<distro>.txt, pip is given that file, and `lock` writes it back from an
environment, so a new release on PyPI cannot change what a fresh clone tests with."""

import importlib.util
import os
import re
import subprocess
import sys

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, 'tools'))   # dev.py imports interfaces beside it


def dev():
    spec = importlib.util.spec_from_file_location('dev', os.path.join(REPO, 'tools', 'dev.py'))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def canonical(name):
    """A distribution name as pip compares them (PEP 503), without extras."""
    return re.sub(r'[-_.]+', '-', name.split('[')[0]).lower()


def pins(path):
    found = {}
    with open(path, encoding='utf-8') as stream:
        for line in stream:
            line = line.split('#')[0].strip()
            if line:
                name, _, version = line.partition('==')
                assert version, f'{path}: {line!r} is not pinned with =='
                found[canonical(name)] = version
    return found


@pytest.mark.parametrize('distro', ['kilted', 'jazzy'])
def test_every_requirement_is_pinned(distro):
    module = dev()
    pinned = pins(module.constraints_file(distro))
    missing = [r for r in module.requirements(distro) if canonical(r) not in pinned]
    assert not missing, f'not in constraints-{distro}.txt: {missing}'
    assert 'pip' in pinned and 'numpy' in pinned


def test_pip_is_given_the_constraints_and_latest_is_not(tmp_path, monkeypatch):
    module = dev()
    calls = []
    monkeypatch.setattr(module, 'REPO', str(tmp_path))
    monkeypatch.setattr(module, 'venv_python', lambda venv: sys.executable)
    monkeypatch.setattr(module.subprocess, 'run', lambda command, **kw: calls.append(command))
    (tmp_path / 'tools').mkdir()
    (tmp_path / 'tools' / 'constraints-kilted.txt').write_text('numpy==1.0\n')
    for venv in ('.venv-kilted', '.venv-kilted-latest'):
        (tmp_path / venv).mkdir()
    module.ensure_venv('kilted')
    installs = [c for c in calls if 'install' in c]
    assert installs and all(c[c.index('-c') + 1] == str(tmp_path / 'tools' /
                                                       'constraints-kilted.txt')
                            for c in installs)
    calls.clear()
    module.ensure_venv('kilted', latest=True)
    installs = [c for c in calls if 'install' in c]
    assert installs and not any('-c' in c for c in installs)
    assert all('--upgrade' in c for c in installs)
    # a changed pin installs again; the same pins do not
    calls.clear()
    module.ensure_venv('kilted')
    assert not calls
    (tmp_path / 'tools' / 'constraints-kilted.txt').write_text('numpy==2.0\n')
    module.ensure_venv('kilted')
    assert any('install' in c for c in calls)


def test_lock_writes_what_the_environment_has(tmp_path, monkeypatch):
    module = dev()
    monkeypatch.setattr(module, 'REPO', str(tmp_path))
    (tmp_path / 'tools').mkdir()
    module.write_constraints(sys.executable, 'jazzy')
    written = pins(tmp_path / 'tools' / 'constraints-jazzy.txt')
    frozen = subprocess.run([sys.executable, '-m', 'pip', 'freeze', '--all'], check=True,
                            capture_output=True, text=True).stdout
    import numpy
    assert written['numpy'] == numpy.__version__
    assert len(written) == sum('==' in line and ' @ ' not in line
                               for line in frozen.splitlines())
