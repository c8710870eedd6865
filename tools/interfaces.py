"""Build the control_msgs interfaces this package uses into a PyPI-only venv (standard library only).

PyPI has rclpy and the common message packages as ros-<distro>-* wheels, but no control_msgs.
The wheels do carry ament_cmake and the rosidl generators, so cmake and a C/C++ compiler can
build an interface package into the venv, the way a ROS user's `apt install
ros-<distro>-control-msgs` provides it. The definitions in tools/interfaces/control_msgs are the
upstream ones field for field (control_msgs 6.8.0, the Kilted release), so the wire type hashes
(RIHS01) match the real package's and MoveIt's client talks to this server; Jazzy's release
(5.8) lacks the two `index` fields of the action's feedback, and is built that way for Jazzy.

Used by tools/dev.py after the venv's requirements: built once per venv and cached (a marker
file records the definitions' digest); without cmake or a compiler it says so in one line and
the rest works (the controller then runs without the action and ~/controller_state).
"""

import glob
import hashlib
import os
import re
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE = os.path.join(HERE, 'interfaces', 'control_msgs')
MARKER = 'robot_dynamics-control_msgs.txt'
# Build-time wheels: they do not declare their CMake-time dependencies, so they are named here.
BUILD_WHEELS = (
    'ament-cmake', 'ament-cmake-core', 'ament-cmake-export-definitions',
    'ament-cmake-export-dependencies', 'ament-cmake-export-include-directories',
    'ament-cmake-export-interfaces', 'ament-cmake-export-libraries',
    'ament-cmake-export-link-flags', 'ament-cmake-export-targets',
    'ament-cmake-include-directories', 'ament-cmake-libraries', 'ament-cmake-python',
    'ament-cmake-ros', 'ament-cmake-target-dependencies', 'ament-cmake-test', 'ament-cmake-pytest',
    'ament-cmake-version', 'ament-cmake-gen-version-h', 'ament-lint', 'ament-package', 'rmw-implementation-cmake',
    'fastcdr', 'rcutils', 'rcpputils', 'pybind11-vendor',
    'rosidl-default-generators', 'rosidl-default-runtime', 'rosidl-core-generators',
    'rosidl-core-runtime', 'rosidl-adapter', 'rosidl-cli', 'rosidl-cmake', 'rosidl-parser',
    'rosidl-pycommon', 'rosidl-generator-c', 'rosidl-generator-cpp', 'rosidl-generator-py',
    'rosidl-generator-type-description', 'rosidl-runtime-c', 'rosidl-runtime-cpp',
    'rosidl-typesupport-c', 'rosidl-typesupport-cpp', 'rosidl-typesupport-fastrtps-c',
    'rosidl-typesupport-fastrtps-cpp', 'rosidl-typesupport-interface',
    'rosidl-typesupport-introspection-c', 'rosidl-typesupport-introspection-cpp',
    'rosidl-dynamic-typesupport', 'rosidl-dynamic-typesupport-fastrtps',
    'builtin-interfaces', 'std-msgs', 'trajectory-msgs', 'action-msgs',
    'unique-identifier-msgs', 'service-msgs', 'type-description-interfaces')
# What differs by distribution: Jazzy has Fast DDS 2 (fastrtps), and its ament_cmake_ros
# finds the gtest/gmock helpers at configure time; Kilted has Fast DDS 3 (fastdds) and
# ament_cmake_ros_core.
DISTRO_WHEELS = {
    'jazzy': ('fastrtps', 'fastrtps-cmake-module', 'ament-cmake-gmock', 'ament-cmake-gtest',
              'gmock-vendor', 'gtest-vendor', 'domain-coordinator', 'python-cmake-module'),
    'kilted': ('fastdds', 'ament-cmake-ros-core'),
}
BUILD_PYTHON = ('catkin-pkg',)    # package.xml parsing for ament_cmake (PyPI)
# Feedback fields that Jazzy's control_msgs (5.8) does not have.
NOT_IN_JAZZY = ('int32 index', 'int32 multi_dof_index')


def definitions(distro):
    """{relative path: text} of the package as built for `distro`."""
    files = {}
    for path in sorted(glob.glob(os.path.join(SOURCE, '**', '*'), recursive=True)):
        if os.path.isfile(path) and not path.endswith('_IGNORE'):
            with open(path, encoding='utf-8') as stream:
                text = stream.read()
            if distro == 'jazzy' and path.endswith('.action'):
                text = ''.join(line for line in text.splitlines(True)
                               if line.strip() not in NOT_IN_JAZZY)
            files[os.path.relpath(path, SOURCE)] = text
    return files


def digest(files):
    sha = hashlib.sha256()
    for name, text in sorted(files.items()):
        sha.update(name.encode() + b'\0' + text.encode() + b'\0')
    return sha.hexdigest()


def missing_tools():
    """The build tools not on PATH (cmake, a C and a C++ compiler)."""
    wanted = (('cmake',), ('cc', 'gcc', 'clang'), ('c++', 'g++', 'clang++'))
    return [names[0] for names in wanted if not any(shutil.which(n) for n in names)]


def _query(python, code):
    return subprocess.run([python, '-c', code], capture_output=True, text=True, check=True,
                          env=_env(python)).stdout.strip()


def _env(python):
    env = dict(os.environ)
    env['PATH'] = os.pathsep.join([os.path.dirname(python), env.get('PATH', '')])
    env.pop('PYTHONPATH', None)
    return env


def _patch_build_paths(prefix, python):
    """The wheels' CMake exports name the wheel builder's Python and numpy include
    directories (/opt/python/cp3XX-cp3XX/...); point them at this venv's."""
    include = _query(python, 'import sysconfig; print(sysconfig.get_paths()["include"])')
    numpy_include = _query(python, 'import numpy; print(numpy.get_include())')
    numpy_pattern = re.compile(r'/opt/python/cp\d+-cp\d+/lib/python[\d.]+/site-packages/'
                               r'numpy/(?:_core|core)/include')
    python_pattern = re.compile(r'/opt/python/cp\d+-cp\d+/include/python[\d.]+')
    for path in glob.glob(os.path.join(prefix, 'share', '*', 'cmake', '*.cmake')):
        with open(path, encoding='utf-8') as stream:
            text = stream.read()
        if '/opt/python/' not in text:
            continue
        text = python_pattern.sub(include, numpy_pattern.sub(numpy_include, text))
        with open(path, 'w', encoding='utf-8') as stream:
            stream.write(text)


def _run(command, log, env, cwd=None):
    log.write('$ ' + ' '.join(command) + '\n')
    log.flush()
    return subprocess.run(command, stdout=log, stderr=subprocess.STDOUT, env=env,
                          cwd=cwd).returncode == 0


def importable(python):
    return subprocess.run(
        [python, '-c', 'from control_msgs.action import FollowJointTrajectory; '
         'from control_msgs.srv import QueryTrajectoryState; '
         'from control_msgs.msg import JointTrajectoryControllerState'],
        capture_output=True, env=_env(python)).returncode == 0


def ensure_control_msgs(python, distro):
    """Build control_msgs into the venv of `python` unless the same definitions are there.
    Returns True when control_msgs can be imported afterwards; never raises for a failed
    build (it prints one line and where the log is)."""
    prefix, base = _query(python, 'import sys; print(sys.prefix); print(sys.base_prefix)'
                          ).splitlines()
    files = definitions(distro)
    wanted = f'{distro} {digest(files)}\n'
    marker = os.path.join(prefix, MARKER)
    ours = os.path.exists(marker)
    if importable(python) and (not ours or open(marker, encoding='utf-8').read() == wanted):
        return True             # built before, or the real control_msgs of a ROS install
    if prefix == base:
        print(f'dev.py: control_msgs not built: {python} is not a virtual environment',
              flush=True)
        return False
    missing = missing_tools()
    if missing:
        print(f'dev.py: control_msgs not built ({", ".join(missing)} not found; e.g. '
              '`sudo apt install cmake g++`): the controller runs without its '
              'FollowJointTrajectory action and ~/controller_state, and their tests skip',
              flush=True)
        return False
    work = os.path.join(prefix, 'build', 'control_msgs')
    shutil.rmtree(work, ignore_errors=True)
    source = os.path.join(work, 'src')
    for name, text in files.items():
        os.makedirs(os.path.dirname(os.path.join(source, name)), exist_ok=True)
        with open(os.path.join(source, name), 'w', encoding='utf-8') as stream:
            stream.write(text)
    log_path = os.path.join(work, 'build.log')
    print(f'dev.py: building control_msgs into {prefix} (once; log: {log_path})', flush=True)
    env = _env(python)
    with open(log_path, 'w', encoding='utf-8') as log:
        ok = _run([python, '-m', 'pip', 'install', '--disable-pip-version-check',
                   *[f'ros-{distro}-{name}' for name in
                     BUILD_WHEELS + DISTRO_WHEELS.get(distro, ())],
                   *BUILD_PYTHON], log, env)
        # ros-*-rosidl-parser pulls in lark-parser 0.12, which shadows lark 1.x's module
        ok = ok and _run([python, '-m', 'pip', 'install', '--disable-pip-version-check',
                          '--force-reinstall', '--no-deps', 'lark>=1.1'], log, env)
        if ok:
            _patch_build_paths(prefix, python)
        build = os.path.join(work, 'build')
        ok = ok and _run(['cmake', '-S', source, '-B', build, f'-DCMAKE_INSTALL_PREFIX={prefix}',
                          f'-DCMAKE_PREFIX_PATH={prefix}', f'-DPython3_EXECUTABLE={python}',
                          '-DBUILD_TESTING=OFF', '-DCMAKE_BUILD_TYPE=Release'], log, env)
        ok = ok and _run(['cmake', '--build', build, '--parallel', str(os.cpu_count() or 2)],
                         log, env)
        ok = ok and _run(['cmake', '--install', build], log, env)
    if not ok or not importable(python):
        print(f'dev.py: control_msgs build failed (see {log_path}): the controller runs without '
              'its FollowJointTrajectory action and ~/controller_state', flush=True)
        return False
    with open(marker, 'w', encoding='utf-8') as stream:
        stream.write(wanted)
    shutil.rmtree(os.path.join(work, 'build'), ignore_errors=True)
    return True


if __name__ == '__main__':
    sys.exit(0 if ensure_control_msgs(sys.argv[1], sys.argv[2]) else 1)
