"""The optional numba accelerator: whether numba is there, and where compiled code goes.

Not a dependency: `available()` is False without numba and the public functions keep the
pure-Python generated code (`robot_dynamics.dynamics.codegen`). Selected with
``dynamics.set_backend('numba')`` or ``ROBOT_DYNAMICS_BACKEND=numba``; the kernels are the
looped ones of `robot_dynamics.dynamics._numba_loops`, compiled once for every model. Their source
goes to a file in a writable cache directory (``$ROBOT_DYNAMICS_CACHE``, else
``$XDG_CACHE_HOME/robot_dynamics``, else ``~/.cache/robot_dynamics``), named by a hash of
the source, so that numba's on-disk cache (``cache=True``) finds it again in the next
process; nothing is written to the install space. If no cache directory is writable,
kernels are compiled from memory in every process.
"""

import os

try:
    import numba
except ImportError:      # the accelerator is optional
    numba = None

def available():
    return numba is not None


def cache_dir():
    base = os.environ.get('ROBOT_DYNAMICS_CACHE')
    if not base:
        home_cache = os.path.join(os.path.expanduser('~'), '.cache')
        xdg = os.environ.get('XDG_CACHE_HOME') or home_cache
        base = os.path.join(xdg, 'robot_dynamics')
    return base


def _write(text, module_name):
    """Path of the source file in the cache directory, written if missing; None if the
    directory is not writable."""
    directory = cache_dir()
    path = os.path.join(directory, module_name + '.py')
    try:
        if not os.path.exists(path):
            os.makedirs(directory, exist_ok=True)
            temporary = f'{path}.{os.getpid()}.tmp'
            with open(temporary, 'w', encoding='utf-8') as stream:
                stream.write(text)
            os.replace(temporary, path)
        if not os.access(directory, os.W_OK):
            return None
    except OSError:
        return None
    return path
