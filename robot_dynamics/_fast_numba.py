"""Optional accelerator: the generated kernels of `codegen`, compiled by numba.

Not a dependency: `available()` is False without numba and the public functions keep the
pure-Python generated code. Selected with ``dynamics.set_backend('numba')`` or
``ROBOT_DYNAMICS_BACKEND=numba``. The source of each kernel goes to a file in a writable
cache directory (``$ROBOT_DYNAMICS_CACHE``, else ``$XDG_CACHE_HOME/robot_dynamics``, else
``~/.cache/robot_dynamics``), named by a hash of the source, so that numba's on-disk cache
(``cache=True``) finds it again in the next process; nothing is written to the install
space. If no cache directory is writable, kernels are compiled from memory in every
process.

The compiled kernels take float64 arrays: '<name>_one' writes one state's result (n,)
into a caller's `out` array and returns whether it is finite (if not, the caller asks the
reference path); 'rk4_one' writes q, q̇ after the step into `out` (2, n). They are compiled
eagerly for C-contiguous, writable float64 arrays only (explicit signatures, nothing more is
ever compiled): any other argument raises TypeError, a wrong length ValueError, and the
caller takes the general path. '<name>_batch' loops over the rows of (B, n) arrays into an
output (B, n) array. Each takes the last body's inertial parameters as a float64 array
(`body_array`, in the order of `codegen.BODY`) after the states, so that the compiled code
is shared by the models `with_payload` derives from one another (and its on-disk source is
the same file).
"""

import hashlib
import importlib.util
import os
import sys
import types

import numpy as np

from robot_dynamics import codegen

try:
    import numba
except ImportError:      # the accelerator is optional
    numba = None

_HEADER = 'import numpy as np\nfrom math import sin, cos\nfrom numpy import sign\n\n'


def available():
    return numba is not None


def cache_dir():
    base = os.environ.get('ROBOT_DYNAMICS_CACHE')
    if not base:
        home_cache = os.path.join(os.path.expanduser('~'), '.cache')
        xdg = os.environ.get('XDG_CACHE_HOME') or home_cache
        base = os.path.join(xdg, 'robot_dynamics')
    return base


def kernel(model, name):
    """The numba-compiled kernel `name`: '<codegen kernel>_one' or '<kernel>_batch'; call
    it with `body_array(model)` as the argument after the states."""
    cache = codegen.shared_cache(model)
    key = (name, 'numba')
    fn = cache.get(key)
    if fn is None:
        fn = cache[key] = _compile(model, name)
    return fn


def body_array(model):
    """The model's last-body parameters as a float64 array in `codegen.BODY` order."""
    cache = model.__dict__.setdefault('_kernels', {})
    array = cache.get('body_array')
    if array is None:
        values = codegen.last_body_values(model)
        array = cache['body_array'] = np.array([values[b] for b in codegen.BODY])
    return array


def _body_args(model, base):
    """', body[i], ...' passing the parameters that kernel `base` takes."""
    used = codegen.body_parameters(codegen.cached_source(model, base))
    return ''.join(f', body[{codegen.BODY.index(b)}]' for b in used)


def _module_source(model, name):
    base, _, suffix = name.rpartition('_')
    parts = [codegen.cached_source(model, base)]
    if base == 'rk4':
        parts.insert(0, codegen.cached_source(model, 'aba'))
    parts.append(_batch_source(model, base) if suffix == 'batch' else _one_source(model, base))
    return _HEADER + '\n\n'.join(parts)


def _one_source(model, base):
    """One state -> `out` (a float64 array); returns False if any entry is not finite."""
    n = model.n
    if base == 'rk4':
        lines = ['def rk4_one(q, qd, tau, dt, body, out):',
                 f'    a, b = rk4(q, qd, tau, dt{_body_args(model, base)})']
        lines += [f'    out[0, {j}] = a[{j}]\n    out[1, {j}] = b[{j}]' for j in range(n)]
        total = ' + '.join([f'a[{j}] + b[{j}]' for j in range(n)])
    else:
        params = _PARAMS[base]
        lines = [f'def {base}_one({params}, body, out):',
                 f'    r = {base}({params}{_body_args(model, base)})']
        lines += [f'    out[{j}] = r[{j}]' for j in range(n)]
        total = ' + '.join(f'r[{j}]' for j in range(n))
    lines += [f'    total = {total}', '    return total - total == 0.0']
    return '\n'.join(lines) + '\n'


def _one_signature(base):
    """The only argument types a '<base>_one' kernel is compiled for."""
    vector = 'float64[::1]'
    states = ', '.join([vector] * len(_PARAMS[base].split(',')))
    if base == 'rk4':
        return f'boolean({vector}, {vector}, {vector}, float64, {vector}, float64[:, ::1])'
    return f'boolean({states}, {vector}, {vector})'


_PARAMS = {'rnea': 'q, qd, qdd', 'rnea_wrench': 'q, qd, qdd, w', 'bias': 'q, qd',
           'gravity': 'q', 'aba': 'q, qd, tau', 'aba_wrench': 'q, qd, tau, w',
           'rk4': 'q, qd, tau, dt'}


def _batch_source(model, base):
    """A loop over the rows of (B, n) inputs calling the one-state kernel `base`."""
    params = _PARAMS[base]
    names = [p.strip() for p in params.split(',')]
    rows = ', '.join(f'{p}[b]' for p in names)
    lines = [f'def {base}_batch({params}, body, out):',
             f'    for b in range({names[0]}.shape[0]):',
             f'        r = {base}({rows}{_body_args(model, base)})']
    lines += [f'        out[b, {j}] = r[{j}]' for j in range(model.n)]
    return '\n'.join(lines) + '\n'


def _compile(model, name):
    text = _module_source(model, name)
    digest = hashlib.sha1(text.encode()).hexdigest()[:20]
    module_name = f'_robot_dynamics_kernel_{digest}'
    path = _write(text, module_name)
    cached = path is not None
    if cached:
        spec = importlib.util.spec_from_file_location(module_name, path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[module_name] = module
        spec.loader.exec_module(module)
    else:                        # no writable cache: compile from memory, every process
        module = types.ModuleType(module_name)
        exec(compile(text, module_name, 'exec'), module.__dict__)  # noqa: S102 - generated
    functions = [f for f in ('aba', 'rk4', *_PARAMS) if hasattr(module, f)]
    for f in dict.fromkeys(functions):
        setattr(module, f, numba.njit(cache=cached)(getattr(module, f)))
    base, _, suffix = name.rpartition('_')
    signature = (_one_signature(base),) if suffix == 'one' else ()
    return numba.njit(*signature, cache=cached)(getattr(module, name))


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
