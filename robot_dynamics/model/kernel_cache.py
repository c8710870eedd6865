"""The compiled-kernel cache of one `RobotModel` instance: one small class that the fast
paths (generated code, numba loops, kinematics constants, the integrator) share.

A model gets its cache on first use (`KernelCache.of(model)`), kept as the model's
``_kernels`` attribute; nothing is compiled or cached when a model is built. Three slots:

- ``runners``: per backend name, the one-state runners `robot_dynamics.dynamics` calls
  (``cache.runners_for('generated')['rnea']``);
- ``values``: anything made once per model instance from it (bound generated kernels, the
  packed model of the numba kernels, kinematic constants): `value(key, make, model)`;
- ``shared``: generated sources and compiled code that depend on everything but the last
  body's inertial parameters, shared by the models `RobotModel.with_payload` derives from
  one another (kept as the model's ``_kernel_code``).

The model's copies keep the old semantics through `payload_copy`, `gravity_copy` and
`pickle_state`: a payload copy shares the code and rebuilds its per-model values on first
use, a gravity copy (gravity is folded into the code) starts empty, and a pickle holds the
description, not the kernels. The cache reads as a mapping of its ``values`` (``key in
cache``, ``cache[key]``, iteration) for inspection.

This module sits in the model layer, below the dynamics that fill it: `RobotModel` uses it
without importing any backend.
"""

ATTRIBUTE = '_kernels'          # the model attribute holding its KernelCache
SHARED = '_kernel_code'         # the model attribute holding the code shared by payload copies


class KernelCache:
    """Per-model kernel state with named slots (see the module docstring)."""

    __slots__ = ('runners', 'values', 'shared')

    def __init__(self, shared=None):
        self.runners = {}                               # backend -> {kernel name: runner}
        self.values = {}                                # key -> made once per model
        self.shared = {} if shared is None else shared  # shared with payload copies

    @classmethod
    def of(cls, model):
        """The model's cache, attached on first use."""
        state = model.__dict__
        cache = state.get(ATTRIBUTE)
        if cache is None:
            cache = state[ATTRIBUTE] = cls(state.setdefault(SHARED, {}))
        return cache

    @staticmethod
    def peek(model):
        """The model's cache, or None when nothing has been cached on it yet."""
        return model.__dict__.get(ATTRIBUTE)

    def runners_for(self, backend):
        """{kernel name: one-state runner} of `backend` for this model."""
        runners = self.runners.get(backend)
        if runners is None:
            runners = self.runners[backend] = {}
        return runners

    def value(self, key, make, model):
        """``make(model)``, computed once per model instance."""
        value = self.values.get(key)
        if value is None:
            value = self.values[key] = make(model)
        return value

    def shared_value(self, key, make):
        """``make()``, computed once for this model and its payload copies."""
        value = self.shared.get(key)
        if value is None:
            value = self.shared[key] = make()
        return value

    # --- read-only mapping of the per-model values, for inspection
    def __contains__(self, key):
        return key in self.values

    def __getitem__(self, key):
        return self.values[key]

    def __iter__(self):
        return iter(self.values)

    def __len__(self):
        return len(self.values)

    def __repr__(self):
        return (f'KernelCache({len(self.values)} values, runners of {sorted(self.runners)}, '
                f'{len(self.shared)} shared)')

    # --- the model's copies and pickling
    @staticmethod
    def payload_copy(source, copy):
        """`copy` (whose state was copied from `source`'s) after a payload change: shares
        `source`'s code (created now, so that both refer to the same dictionary), drops
        the per-model values and runners."""
        copy.__dict__[SHARED] = source.__dict__.setdefault(SHARED, {})
        copy.__dict__.pop(ATTRIBUTE, None)

    @staticmethod
    def gravity_copy(copy):
        """`copy` after a gravity change: the code holds gravity as constants, nothing is
        shared."""
        copy.__dict__.pop(ATTRIBUTE, None)
        copy.__dict__.pop(SHARED, None)

    @staticmethod
    def pickle_state(state):
        """A model's ``__dict__`` copy without its caches."""
        state.pop(ATTRIBUTE, None)
        state.pop(SHARED, None)
        return state
