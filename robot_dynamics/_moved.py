"""The flat module names of earlier versions, kept importable after the core moved into
packages (doc/conventions.md, *Package layout*).

`robot_dynamics.urdf`, `robot_dynamics.kinematics`, `robot_dynamics.integration`, ... have no
file of their own: importing one imports its new home and binds the old name to that same
module object (``sys.modules``), so attributes set on one (monkeypatching) are seen by both.
`robot_dynamics.trajectory`, split in two, is a module holding the names of both halves.
`python -m robot_dynamics.urdf` runs the new module's `main`. No file sits at an old path, so that git
follows the moves (renames) when branches that edited the old files are merged.
"""

import importlib
import importlib.abc
import importlib.util
import sys

MOVED = {
    'robot_dynamics.urdf': 'robot_dynamics.model.urdf',
    'robot_dynamics.model_checks': 'robot_dynamics.dynamics.checks',
    'robot_dynamics.algorithms': 'robot_dynamics.dynamics.algorithms',
    'robot_dynamics.codegen': 'robot_dynamics.dynamics.codegen',
    'robot_dynamics._numba_loops': 'robot_dynamics.dynamics._numba_loops',
    'robot_dynamics._fast_numba': 'robot_dynamics.dynamics._fast_numba',
    'robot_dynamics.lagrange': 'robot_dynamics.dynamics.lagrange',
    'robot_dynamics.kinematics': 'robot_dynamics.dynamics.kinematics',
    'robot_dynamics.trajectory_goal': 'robot_dynamics.trajectories.goal',
    'robot_dynamics.speed_scaling': 'robot_dynamics.trajectories.speed_scaling',
    'robot_dynamics.feasibility': 'robot_dynamics.trajectories.feasibility',
    'robot_dynamics.profiles': 'robot_dynamics.trajectories.profiles',
    'robot_dynamics.motion_limits': 'robot_dynamics.identification.motion_limits',
    'robot_dynamics.integration': 'robot_dynamics.simulation.integration',
    'robot_dynamics.engines': 'robot_dynamics.simulation.engines',
    'robot_dynamics.engine_frames': 'robot_dynamics.simulation.engine_frames',
    'robot_dynamics.mujoco_engine': 'robot_dynamics.simulation.mujoco_engine',
    'robot_dynamics.arm_identification': 'robot_dynamics.identification.arm',
    'robot_dynamics.joint_state_bag': 'robot_dynamics.identification.recordings',
    # the parameter-file reading, section matching and layering of the nodes, now the
    # parameters package's (the model and urdf read files through it)
    'robot_dynamics.nodes.common.layering': 'robot_dynamics.parameters.layering',
    'robot_dynamics.nodes.common.params_file': 'robot_dynamics.parameters.params_file',
}

# Old modules split in several: (new modules whose public names (__all__) they hold,
# further names the old module had and its users import).
SPLIT = {
    'robot_dynamics.trajectory': (
        ('robot_dynamics.trajectories.sampler', 'robot_dynamics.trajectories.splines'),
        ('MAX_ABS_VALUE', 'FLOAT_EPSILON', 'PAUSED', 'STOP_RAMP_SHARE', 'STOP_RAMP_TIME')),
}


class _Loader(importlib.abc.Loader):

    def create_module(self, spec):
        return None                               # a plain module; replaced below

    def exec_module(self, module):
        name = module.__name__
        if name in MOVED:
            # the import system returns what sys.modules holds after this: the new module
            sys.modules[name] = importlib.import_module(MOVED[name])
            # a moved package's submodules under the old name too (its __init__ imported
            # them), else the path finder would load a second copy of each
            prefix = MOVED[name] + '.'
            for key, submodule in list(sys.modules.items()):
                if key.startswith(prefix):
                    sys.modules.setdefault(name + '.' + key[len(prefix):], submodule)
            return
        sources, extra = SPLIT[name]
        names = []
        for source in map(importlib.import_module, sources):
            names += source.__all__
            for key in list(source.__all__) + [k for k in extra if hasattr(source, k)]:
                setattr(module, key, getattr(source, key))
        module.__all__ = names
        module.__doc__ = f'Moved to {", ".join(sources)}; this module keeps old imports working.'

    def get_code(self, name):
        """For ``python -m <old name>``: the new module's ``main()`` (robot_dynamics.urdf's)."""
        target = MOVED.get(name) or SPLIT[name][0][0]
        return compile(f'import sys\nfrom {target} import main\nsys.exit(main())\n',
                       f'<{name}: moved to {target}>', 'exec')


class _Finder(importlib.abc.MetaPathFinder):

    def find_spec(self, fullname, path=None, target=None):
        if fullname in MOVED or fullname in SPLIT:
            return importlib.util.spec_from_loader(fullname, _LOADER)
        return None


_LOADER = _Loader()


def install():
    """Make the old names importable (once per interpreter; after the path finders, so a
    real module of the same name would win)."""
    if not any(isinstance(finder, _Finder) for finder in sys.meta_path):
        sys.meta_path.append(_Finder())
