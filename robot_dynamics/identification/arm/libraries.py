"""The estimator's optional libraries (scipy, cvxpy): imported where used, with one line
naming what to install when missing."""

import importlib


def _require(module):
    """Import scipy / cvxpy with one line naming what to install."""
    try:
        return importlib.import_module(module)
    except ImportError:
        package = module.split('.')[0]
        raise ImportError(f'arm identification needs {package}: pip install {package}') from None


def require_estimator_libraries():
    """ImportError with one line naming every missing library of the estimator (scipy,
    cvxpy) and the pip command that installs them; nothing when both import."""
    missing = []
    for module in ('scipy.signal', 'cvxpy'):
        try:
            importlib.import_module(module)
        except ImportError as error:
            cause = (getattr(error, 'name', None) or '').split('.')[0]
            if cause not in missing:            # cvxpy failing for want of scipy: scipy
                missing.append(module.split('.')[0])
    if missing:
        raise ImportError(f'arm identification needs {" and ".join(missing)}: '
                          f'pip install {" ".join(missing)}')
