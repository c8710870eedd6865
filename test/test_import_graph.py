"""The package's import graph, read from the sources (imports at the top and inside
functions alike): it has no cycle, and the core (everything outside robot_dynamics.nodes)
imports neither the nodes nor rclpy, so imports point one way: nodes -> core."""

import ast
import os

from robot_dynamics._moved import MOVED, SPLIT

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PACKAGE = os.path.join(REPO, 'robot_dynamics')


def modules():
    """{dotted module name: path} of every module of the package."""
    found = {}
    for folder, _, files in os.walk(PACKAGE):
        for name in files:
            if name.endswith('.py'):
                path = os.path.join(folder, name)
                parts = os.path.relpath(path, REPO)[:-3].split(os.sep)
                if parts[-1] == '__init__':
                    parts = parts[:-1]
                found['.'.join(parts)] = path
    return found


def imports(name, path, known):
    """The package's modules that module `name` (at `path`) imports, anywhere in it:
    `from a import b` is a.b when that is a module, else a; relative imports resolved."""
    with open(path, encoding='utf-8') as stream:
        tree = ast.parse(stream.read(), path)
    package = name if path.endswith('__init__.py') else name.rpartition('.')[0]
    targets = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            targets.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ''
            if node.level:
                anchor = package.split('.')
                anchor = anchor[:len(anchor) - node.level + 1]
                base = '.'.join(anchor + ([base] if base else []))
            for alias in node.names:
                full = f'{base}.{alias.name}'
                targets.add(full if full in known or full in MOVED or full in SPLIT
                            else base)
    resolved = set()
    for target in targets:            # an old flat name is its new home (robot_dynamics._moved)
        resolved.update(SPLIT[target][0] if target in SPLIT else [MOVED.get(target, target)])
    return {t for t in resolved if t in known and t != name}, targets


def graph():
    known = modules()
    edges, external = {}, {}
    for name, path in known.items():
        edges[name], external[name] = imports(name, path, known)
    return edges, external


def cycles(edges):
    """The strongly connected components with more than one module (Tarjan)."""
    index, low, stack, on_stack, found = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(edges[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))
    for v in sorted(edges):
        if v not in index:
            visit(v)
    return found


def test_the_import_graph_has_no_cycle():
    edges, _ = graph()
    assert len(edges) > 50                      # the whole package was read
    found = cycles(edges)
    assert not found, 'import cycles (function-local imports included): ' + '; '.join(
        ' <-> '.join(c) for c in found)


def test_the_cycle_finder_finds_a_cycle_through_a_function_local_import(tmp_path):
    """The check above could fail: a module that imports another inside a function, which
    imports it back at the top, is a cycle."""
    a = tmp_path / 'a.py'
    a.write_text('def f():\n    from robot_dynamics import b\n')
    b = tmp_path / 'b.py'
    b.write_text('import robot_dynamics.a\n')
    known = {'robot_dynamics.a': str(a), 'robot_dynamics.b': str(b)}
    edges = {name: imports(name, path, known)[0] for name, path in known.items()}
    assert cycles(edges) == [['robot_dynamics.a', 'robot_dynamics.b']]


def test_the_core_imports_neither_the_nodes_nor_rclpy():
    edges, external = graph()
    core = [name for name in edges if not name.startswith('robot_dynamics.nodes')]
    climbing = {name: sorted(t for t in edges[name] if t.startswith('robot_dynamics.nodes'))
                for name in core}
    assert not any(climbing.values()), {k: v for k, v in climbing.items() if v}
    ros = {name: sorted(t for t in external[name] if t.split('.')[0] in ('rclpy',))
           for name in core}
    assert not any(ros.values()), {k: v for k, v in ros.items() if v}


def test_the_package_imports_its_modules_by_their_new_names():
    """The old flat names (robot_dynamics._moved) are kept for users' code; the package
    itself imports its modules where they live."""
    _, external = graph()
    old = set(MOVED) | set(SPLIT)
    users = {name: sorted(t for t in targets if t in old or any(
        t.startswith(o + '.') for o in old)) for name, targets in external.items()}
    assert not any(users.values()), {k: v for k, v in users.items() if v}


# the packages of the core, lowest first: a module imports only its own package's modules
# and those of packages below it (function-local imports included)
LAYERS = (('parameters',), ('model',), ('dynamics',), ('control', 'trajectories'),
          ('simulation',), ('identification',), ('nodes',))


def layer(name):
    parts = name.split('.')
    if len(parts) < 2:
        return None
    for level, packages in enumerate(LAYERS):
        if parts[1] in packages:
            return level
    return None


def test_no_package_imports_one_above_it():
    edges, _ = graph()
    climbing = {name: sorted(t for t in targets
                             if layer(t) is not None and layer(name) is not None
                             and layer(t) > layer(name))
                for name, targets in edges.items()}
    assert not any(climbing.values()), {k: v for k, v in climbing.items() if v}
