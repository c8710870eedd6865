"""Straight-line dynamics code generated for one robot (the fast path; doc/performance.md).

The algorithms of `robot_dynamics.dynamics.algorithms` are traced once per model on a small
expression graph whose leaves are the joint variables and the model's constants. The
tracer folds every constant sub-expression and the exact zeros and ±1 of the chain's
constant placements (DH placements are Rx(α)·Tx(a)), shares common sub-expressions and
drops what no output needs. What remains is the "customised" Newton–Euler that the papers'
operation counts lead to ([TML] §6: "terms representing insignificant torque
contributions can be easily identified and … deleted"; [LEE] Table 2; [ANG] §7.4).

The result is Python source of one function per algorithm, e.g. for a 2-joint arm::

    def rnea(q, qd, qdd):
        q0, q1 = q
        ...
        return (tau0, tau1)

It runs unchanged on floats (one state, via `math`) and on numpy arrays (a batch: each
variable is a (B,) array, via `numpy`). Source is compiled lazily, once per model and
kernel. `source(model, name)` shows the code, `operation_counts` counts it.

Payloads: the inertial parameters of the LAST body (mass, centre of mass, first moment,
inertias; `BODY`, values from `last_body`) are not folded but trailing parameters of each
kernel, e.g. ``def rnea(q, qd, qdd, b_m, b_c0, ...)``. The compiled code is cached in
the shared slot of the model's `KernelCache`, which `RobotModel.with_payload` shares with
the model it derives; each model binds its own values once as the defaults of its function
objects (the cache's per-model values), so a payload change costs microseconds, not a new
compilation, and a call passes nothing more.

Kernels (all include the model's armature and friction, like the public functions):
    rnea, rnea_wrench   τ(q, q̇, q̈[, w])        inverse dynamics (Newton–Euler)
    bias                τ(q, q̇, 0)             Coriolis, centrifugal, gravity, friction
    gravity             τ(q, 0, 0)             gravity only (no friction at rest)
    aba, aba_wrench     q̈(q, q̇, τ[, w])        forward dynamics (articulated body, O(n))
    rk4                 (q, q̇) after one RK4 step of `aba` with τ held (floats only)
"""

import ast
import math
import re
import types

import numpy as np

from robot_dynamics.dynamics.algorithms import steiner
from robot_dynamics.model.kernel_cache import KernelCache

__all__ = ['source', 'kernel', 'operation_counts', 'KERNELS', 'BODY', 'last_body']

KERNELS = ('rnea', 'rnea_wrench', 'bias', 'gravity', 'aba', 'aba_wrench', 'rk4')
_SNAP = 1e-13          # constants this close to 0 or ±1 in rotations are taken as exact
_INLINE_DEPTH = 24     # deeper single-use expressions get a variable of their own


# ---------------------------------------------------------------------- expression graph


class Sym:
    """A non-constant node of the expression graph; constants are plain floats."""

    __slots__ = ('graph', 'id', 'op', 'args')

    def __init__(self, graph, ident, op, args):
        self.graph, self.id, self.op, self.args = graph, ident, op, args

    def __add__(self, other):
        return self.graph.add(self, other)

    def __radd__(self, other):
        return self.graph.add(other, self)

    def __sub__(self, other):
        return self.graph.sub(self, other)

    def __rsub__(self, other):
        return self.graph.sub(other, self)

    def __mul__(self, other):
        return self.graph.mul(self, other)

    def __rmul__(self, other):
        return self.graph.mul(other, self)

    def __truediv__(self, other):
        return self.graph.div(self, other)

    def __rtruediv__(self, other):
        return self.graph.div(other, self)

    def __neg__(self):
        return self.graph.neg(self)


def _is_const(x):
    return not isinstance(x, Sym)


def _key(x):
    if isinstance(x, Sym):
        return ('s', x.id)
    return ('n', x) if isinstance(x, str) else ('c', float(x))


class Graph:
    """Hash-consed expression graph with constant folding of 0, ±1 and constants."""

    def __init__(self):
        self.nodes = []
        self._index = {}

    def _node(self, op, *args):
        key = (op,) + tuple(_key(a) for a in args)
        found = self._index.get(key)
        if found is None:
            found = Sym(self, len(self.nodes), op, args)
            self.nodes.append(found)
            self._index[key] = found
        return found

    def input(self, name):
        return self._node('in', name)

    def add(self, a, b):
        if _is_const(a) and _is_const(b):
            return float(a) + float(b)
        if _is_const(a):
            a, b = b, a
        if _is_const(b) and b == 0.0:
            return a
        if isinstance(b, Sym) and b.op == 'neg':
            return self.sub(a, b.args[0])
        if a.op == 'neg':
            return self.sub(b, a.args[0])
        return self._node('+', *sorted((a, b), key=_key))

    def sub(self, a, b):
        if _is_const(a) and _is_const(b):
            return float(a) - float(b)
        if _is_const(b) and b == 0.0:
            return a
        if _is_const(a) and a == 0.0:
            return self.neg(b)
        if isinstance(b, Sym) and b.op == 'neg':
            return self.add(a, b.args[0])
        if _is_const(b):
            return self.add(a, -float(b))
        if isinstance(a, Sym) and a.op == 'neg':        # −x − b = −(x + b): the sign moves up
            return self.neg(self.add(a.args[0], b))
        return self._node('-', a, b)

    def neg(self, a):
        if _is_const(a):
            return -float(a)
        if a.op == 'neg':
            return a.args[0]
        if a.op == '-':
            return self.sub(a.args[1], a.args[0])
        return self._node('neg', a)

    def mul(self, a, b):
        if _is_const(a) and _is_const(b):
            return float(a) * float(b)
        if _is_const(a):
            a, b = b, a
        if _is_const(b):
            if b == 0.0:
                return 0.0
            if b == 1.0:
                return a
            if b == -1.0:
                return self.neg(a)
            if a.op == 'neg':
                return self.mul(a.args[0], -float(b))
            return self._node('*', a, float(b))
        if a.op == 'neg':
            return self.neg(self.mul(a.args[0], b))
        if b.op == 'neg':
            return self.neg(self.mul(a, b.args[0]))
        return self._node('*', *sorted((a, b), key=_key))

    def div(self, a, b):
        if _is_const(a) and _is_const(b):
            return float(a) / float(b)
        if _is_const(b):
            return self.mul(a, 1.0 / float(b))
        if _is_const(a) and a == 0.0:
            return 0.0
        if isinstance(a, Sym) and a.op == 'neg':
            return self.neg(self.div(a.args[0], b))
        if b.op == 'neg':
            return self.neg(self.div(a, b.args[0]))
        return self._node('/', a, b)

    def call(self, name, a):
        """sin, cos, sign, tanh or exp of a node (constants are evaluated now)."""
        if _is_const(a):
            value = _SCALAR[name](float(a))
            return _snap(value) if name != 'sign' else float(value)
        return self._node(name, a)


def settle_signs(outputs):
    """The outputs with a leading negation −x rewritten, where x allows it, as x with its
    sign pushed into a constant or a subtraction (−(a − b) = b − a, −(a + b) = (−a) − b,
    −(a c) = a (−c)), only through nodes that nothing else reads (no duplicated work)."""
    needed, uses = _use_counts(outputs, 1)
    settled = []
    for out in outputs:
        flipped = None
        if isinstance(out, Sym) and out.op == 'neg' and uses[out] == 1:
            flipped = _flipped(out.args[0], uses)
        settled.append(out if flipped is None else flipped)
    return settled


def _flipped(x, uses):
    """−x without a unary minus, or None (x and what it rewrites are read only once)."""
    if _is_const(x):
        return -float(x)
    if uses.get(x, 0) != 1 or x.op not in ('-', '+', '*'):
        return None
    g, a, b = x.graph, x.args[0], x.args[1]
    if x.op == '-':
        return g.sub(b, a)
    if x.op == '*':
        for this, other in ((b, a), (a, b)):
            negated = _flipped(this, uses)
            if negated is not None:
                return g.mul(other, negated)
        return None
    for this, other in ((a, b), (b, a)):
        negated = _flipped(this, uses)
        if negated is not None:
            return g.sub(negated, other)
    return None


def _sign(x):
    """np.sign for one float: 0 at 0, NaN stays NaN."""
    return (x > 0.0) - (x < 0.0) if x == x else x


def _snap(value):
    for exact in (0.0, 1.0, -1.0):
        if abs(value - exact) < _SNAP:
            return exact
    return float(value)


# ---------------------------------------------------------------------- emission

_BINARY = {'+': '+', '-': '-', '*': '*', '/': '/'}
_CHUNK_NAMES = 240     # at most this many constants and local names per chunk function
_INLINE_SPAN = 400     # chunked: single-use nodes read this much later get a variable
_FLAT_SIZE = 700       # longer chains: chunked if the flat function has more constants
                       # + names (the cost of EXTENDED_ARG outweighs the hand-over)
_TUPLE_MAX = 20        # items per tuple passed between chunk functions
_FLAT_MAX_LINKS = 12   # chains up to this long get one flat function per kernel


class _Line:
    """One assignment of the schedule: `node` = `text`, where ``$<id>`` stands for the
    variable of another assigned node (named later); `reads` lists those nodes (with
    repeats), `inputs` the graph inputs it reads, `consts` its literal constants."""

    __slots__ = ('node', 'text', 'reads', 'inputs', 'consts')

    def __init__(self, node, text, reads, inputs):
        self.node, self.text, self.reads, self.inputs = node, text, reads, inputs
        self.consts = set(_CONSTANT.findall(text))


_PLACEHOLDER = re.compile(r'\$(\d+)')
_CONSTANT = re.compile(r'\(-[0-9.e+-]+\)|(?<![\w$])[0-9][0-9.e+-]*')


def emit(name, params, sequences, outputs, flat=None):
    """Python source of ``def name(*params)`` computing the graph nodes that `outputs`
    need (single-use nodes inlined) and returning ``(outputs...)``; `sequences` maps the
    parameters that are sequences to their lengths (input ``q3`` is ``q[3]``).

    flat=True: one function that unpacks its sequences, e.g. ``q0, q1, q2, = q``, then
    runs the straight-line code. Variable names are reused once their last reader is
    written, so that the frame stays small.
    flat=False (long chains): the straight-line code is cut into chunk functions
    ``_name_0, _name_1, ...`` of at most `_CHUNK_NAMES` constants and local names each,
    so that no bytecode operand needs an EXTENDED_ARG prefix (measured: +16-25 % time per
    instruction); ``name`` calls them in order and passes each value a later chunk reads
    from its producer to its consumer as one tuple per (producer, consumer) pair.
    flat=None: flat unless that function has more than `_FLAT_SIZE` constants and names."""
    if flat is not False:
        lines, uses = _schedule(outputs)
        text, size = _flat(name, params, sequences, outputs, lines, uses)
        if flat or size <= _FLAT_SIZE:
            return text
    lines, uses = _schedule(outputs, _INLINE_SPAN)
    return _chunked(name, params, sequences, outputs, lines, uses)


def _schedule(outputs, span=None):
    """The assignments computing `outputs`, in graph order, and the number of reads of
    each assigned node (outputs count 2 more, so that their variables are never reused)."""
    needed, uses = _use_counts(outputs, 2)
    user = {a: node for node in needed for a in node.args if isinstance(a, Sym)}
    texts, depth, refs, ins, lines = {}, {}, {}, {}, []
    for node in sorted(needed, key=lambda s: s.id):
        if node.op == 'in':
            texts[node], depth[node], refs[node], ins[node] = node.args[0], 0, [], [node]
            continue
        text, level = _expression(node, texts, depth)
        read = [r for a in node.args if isinstance(a, Sym) for r in refs[a]]
        inputs = [r for a in node.args if isinstance(a, Sym) for r in ins[a]]
        far = span is not None and node in user and user[node].id - node.id > span
        if uses[node] > 1 or level > _INLINE_DEPTH or (far and len(set(read)) > 1):
            lines.append(_Line(node, text, read, inputs))
            texts[node], depth[node], refs[node], ins[node] = f'${node.id}', 0, [node], []
        else:
            texts[node], depth[node], refs[node], ins[node] = text, level, read, inputs
    return lines, uses


def _named(text, names):
    return _PLACEHOLDER.sub(lambda m: names[int(m.group(1))], text)


class _Names:
    """Variable names of one function: t0, t1, ...; a name is free again once the last
    reader of its value is written."""

    def __init__(self):
        self.of, self.free, self.count = {}, [], 0

    def fresh(self):
        self.count += 1
        return f't{self.count - 1}'

    def assign(self, line, uses):
        for var in line.reads:
            uses[var] -= 1
            if uses[var] == 0 and var.id in self.of:
                self.free.append(self.of[var.id])
        target = self.free.pop() if self.free else self.fresh()
        self.of[line.node.id] = target
        return f'    {target} = {_named(line.text, self.of)}'


def _flat(name, params, sequences, outputs, lines, uses):
    names = _Names()
    body = [names.assign(line, uses) for line in lines]
    unpack = [f'    {", ".join(f"{s}{i}" for i in range(n))}, = {s}'
              for s, n in sequences.items()]
    result = ', '.join(_output_text(out, names.of) for out in outputs)
    text = '\n'.join([f'def {name}({", ".join(params)}):'] + unpack + body
                      + [f'    return ({result},)']) + '\n'
    size = len(set().union(*(line.consts for line in lines))) + names.count + len(params)
    return text, size + sum(sequences.values())


class _Chunk:
    """One chunk function of `_chunked`: its lines, names, constants, the values it
    imports from earlier chunks and the graph inputs it reads."""

    def __init__(self, index):
        self.index, self.names, self.lines = index, _Names(), []
        self.consts, self.imports, self.inputs = set(), {}, set()

    def growth(self, line, defined):
        """Constants and names this chunk has after taking `line` (an upper bound)."""
        imports = {v.id for v in line.reads if defined[v.id] != self.index} - set(self.imports)
        inputs = set(line.inputs) - self.inputs
        return max(len(self.consts | line.consts),
                   self.names.count + len(imports) + 1 + len(self.inputs | inputs))

    def take(self, line, uses, defined):
        for var in line.reads:
            if defined[var.id] != self.index and var.id not in self.imports:
                self.imports[var.id] = var
                self.names.of[var.id] = self.names.fresh()
        self.inputs.update(line.inputs)
        self.consts |= line.consts
        self.lines.append(self.names.assign(line, uses))
        defined[line.node.id] = self.index


def _chunked(name, params, sequences, outputs, lines, uses):
    defined = {}
    chunks = [_Chunk(0)]
    for line in lines:
        if chunks[-1].lines and chunks[-1].growth(line, defined) > _CHUNK_NAMES:
            chunks.append(_Chunk(len(chunks)))
        chunks[-1].take(line, uses, defined)
    packs = {}                           # (producer, consumer) -> [value id]; None: the caller
    for chunk in chunks:
        for ident in chunk.imports:
            packs.setdefault((defined[ident], chunk.index), []).append(ident)
    for out in outputs:
        if isinstance(out, Sym) and out.op != 'in':
            packs.setdefault((defined[out.id], None), []).append(out.id)
    scalars = [p for p in params if p not in sequences]
    calls, functions = [], []
    for chunk in chunks:
        head, call = _chunk_signature(name, chunk, packs, sequences, scalars)
        produced = sorted((k for k in packs if k[0] == chunk.index),
                          key=lambda k: (k[1] is None, k[1]))
        results = [_tuple_text([chunk.names.of[v] for v in packs[k]], k[1] is not None)
                   for k in produced]
        targets = ', '.join(_pack_name(k) for k in produced)
        functions.append('\n'.join(head + chunk.lines + [f'    return {", ".join(results)}']))
        calls.append(f'    {targets} = {call}')
    # The chunks slice their sequences, so a longer one would pass silently: its length
    # is checked here, as the flat kernels' unpacking does.
    checks = [f'    if len({s}) != {k}:\n        raise ValueError({f"{s}: expected {k} values"!r})'
              for s, k in sequences.items()]
    top = [f'def {name}({", ".join(params)}):'] + checks + calls
    top += _chunked_result(outputs, packs, defined)
    return '\n\n\n'.join(['\n'.join(top)] + functions) + '\n'


def _tuple_text(items, nested):
    """``(a, b, c)``; nested: tuples of more than `_TUPLE_MAX` items as a tuple of such
    tuples (CPython 3.11 builds longer tuple displays item by item through a list, and
    keeps only tuples of up to 20 items on its free lists)."""
    if nested and len(items) > _TUPLE_MAX:
        groups = [items[i:i + _TUPLE_MAX] for i in range(0, len(items), _TUPLE_MAX)]
        return f'({", ".join(_tuple_text(g, False) for g in groups)})'
    return f'({items[0]},)' if len(items) == 1 else f'({", ".join(items)})'


def _pack_name(key):
    producer, consumer = key
    return f'o{producer}' if consumer is None else f'p{producer}_{consumer}'


def _chunk_signature(name, chunk, packs, sequences, scalars):
    """Head lines (def, unpacking of the packs and the inputs) and the call of a chunk."""
    inputs = {x.args[0] for x in chunk.inputs}
    args = [s for s in sequences if any(_element_of(i, s) for i in inputs)]
    args += [s for s in scalars if s in inputs]
    received = sorted(k for k in packs if k[1] == chunk.index)
    args += [_pack_name(k) for k in received]
    lines = [f'def _{name}_{chunk.index}({", ".join(args)}):']
    for key in received:
        values = _tuple_text([chunk.names.of[v] for v in packs[key]], True)
        lines.append(f'    {values} = {_pack_name(key)}')
    for s in sequences:
        used = sorted(int(i[len(s):]) for i in inputs if _element_of(i, s))
        if used:
            first, last = used[0], used[-1]
            targets = ''.join(f'{s}{i}, ' if i in used else '_, '
                              for i in range(first, last + 1))
            lines.append(f'    {targets}= {s}[{first}:{last + 1}]')
    return lines, f'_{name}_{chunk.index}({", ".join(args)})'


def _element_of(input_name, sequence):
    """Whether graph input `input_name` (e.g. 'qd3') is an element of `sequence`."""
    return input_name.startswith(sequence) and input_name[len(sequence):].isdigit()


def _chunked_result(outputs, packs, defined):
    """The caller's return: ``return (*o3, *o2, ...)`` if the outputs of each chunk are one
    run of the outputs (in their order), else the result tuples are unpacked first."""
    keys = _output_keys(outputs, defined)
    starts = [i for i, k in enumerate(keys) if k is not None and (i == 0 or keys[i - 1] != k)]
    if len(starts) == len({keys[i] for i in starts}):
        items = [f'*{_pack_name(keys[i])}' if keys[i] is not None else _output_text(out, {})
                 for i, out in enumerate(outputs) if keys[i] is None or i in starts]
        return [f'    return ({", ".join(items)},)']
    lines, names = [], {}
    for key in sorted({k for k in keys if k is not None}):
        names.update((v, f'r{v}') for v in packs[key])
        lines.append(f'    {"".join(f"r{v}, " for v in packs[key])}= {_pack_name(key)}')
    return lines + [f'    return ({", ".join(_output_text(o, names) for o in outputs)},)']


def _output_keys(outputs, defined):
    return [(defined[out.id], None) if isinstance(out, Sym) and out.op != 'in' else None
            for out in outputs]


def _output_text(out, names):
    """An output in a return line: its variable, input name or constant."""
    if not isinstance(out, Sym):
        return _text(out, {})
    return out.args[0] if out.op == 'in' else names[out.id]


def _use_counts(outputs, output_reads):
    """The nodes `outputs` need, and how often each is read (an output `output_reads` more)."""
    needed = _reachable(outputs)
    uses = dict.fromkeys(needed, 0)
    for node in needed:
        for arg in node.args:
            if isinstance(arg, Sym):
                uses[arg] += 1
    for out in outputs:
        if isinstance(out, Sym):
            uses[out] += output_reads
    return needed, uses


def _reachable(outputs):
    seen, stack = set(), [o for o in outputs if isinstance(o, Sym)]
    while stack:
        node = stack.pop()
        if node in seen:
            continue
        seen.add(node)
        stack.extend(a for a in node.args if isinstance(a, Sym))
    return seen


def _text(x, names):
    if isinstance(x, Sym):
        return names[x]
    return repr(float(x)) if x >= 0.0 else f'({float(x)!r})'


def _expression(node, names, depth):
    args = [_text(a, names) for a in node.args]
    level = 1 + max((depth.get(a, 0) for a in node.args if isinstance(a, Sym)), default=0)
    if node.op in _BINARY:
        return f'({args[0]} {_BINARY[node.op]} {args[1]})', level
    if node.op == 'neg':
        return f'(-{args[0]})', level
    return f'{node.op}({args[0]})', level


# ---------------------------------------------------------------------- small vector algebra


def vadd(a, b):
    return [a[0] + b[0], a[1] + b[1], a[2] + b[2]]


def vscale(k, v):
    return [k * v[0], k * v[1], k * v[2]]


def cross(a, b):
    return [a[1] * b[2] - a[2] * b[1], a[2] * b[0] - a[0] * b[2], a[0] * b[1] - a[1] * b[0]]


def dot(a, b):
    return a[0] * b[0] + a[1] * b[1] + a[2] * b[2]


def matvec(M, v):
    return [M[i][0] * v[0] + M[i][1] * v[1] + M[i][2] * v[2] for i in range(3)]


def mattvec(M, v):
    return [M[0][j] * v[0] + M[1][j] * v[1] + M[2][j] * v[2] for j in range(3)]


def rot_z(c, s, v):
    """Rz(θ) v."""
    return [c * v[0] - s * v[1], s * v[0] + c * v[1], v[2]]


def rot_zt(c, s, v):
    """Rz(θ)ᵀ v."""
    return [c * v[0] + s * v[1], c * v[1] - s * v[0], v[2]]


def skew(p):
    return [[0.0, -p[2], p[1]], [p[2], 0.0, -p[0]], [-p[1], p[0], 0.0]]


def matmul(A, B):
    return [[A[i][0] * B[0][j] + A[i][1] * B[1][j] + A[i][2] * B[2][j] for j in range(3)]
            for i in range(3)]


def sym(upper):
    """Full 3×3 from a function giving entry (i, j) for i ≤ j (mirrored, shared nodes)."""
    M = [[None] * 3 for _ in range(3)]
    for i in range(3):
        for j in range(i, 3):
            M[i][j] = M[j][i] = upper(i, j)
    return M


def congruence_sym(R, A):
    """R A Rᵀ of a symmetric A (upper triangle computed, mirrored)."""
    T = matmul(R, A)
    return sym(lambda i, j: T[i][0] * R[j][0] + T[i][1] * R[j][1] + T[i][2] * R[j][2])


def congruence(R, H):
    """R H Rᵀ of a general 3×3 H."""
    T = matmul(R, H)
    return [[T[i][0] * R[j][0] + T[i][1] * R[j][1] + T[i][2] * R[j][2] for j in range(3)]
            for i in range(3)]


class PlaneRotation:
    """A rotation in the plane of axes (i, j): Rz(θ) is (0, 1), Rx(α) is (1, 2);
    R[i][i] = R[j][j] = c, R[j][i] = s, R[i][j] = −s. Congruences R A Rᵀ use the double
    angle (c² − s², 2cs), 4–5 products per 2×2 block instead of 12–16."""

    def __init__(self, c, s, i, j):
        self.c, self.s, self.i, self.j, self.k = c, s, i, j, 3 - i - j
        cc, self.ss, self.cs = c * c, s * s, c * s
        self.C2 = cc - self.ss
        self.S2 = 2.0 * self.cs
        self.C2h = 0.5 * self.C2

    def pair(self, x, y):
        return self.c * x - self.s * y, self.s * x + self.c * y

    def sym(self, A):
        i, j, k = self.i, self.j, self.k
        diff = A[i][i] - A[j][j]
        t = diff * self.ss + A[i][j] * self.S2
        B = [[None] * 3 for _ in range(3)]
        B[i][i], B[j][j], B[k][k] = A[i][i] - t, A[j][j] + t, A[k][k]
        B[i][j] = B[j][i] = diff * self.cs + A[i][j] * self.C2
        B[i][k], B[j][k] = self.pair(A[i][k], A[j][k])
        B[k][i], B[k][j] = B[i][k], B[j][k]
        return B

    def general(self, H):
        i, j, k = self.i, self.j, self.k
        diff, both = H[i][i] - H[j][j], H[i][j] + H[j][i]
        t = diff * self.ss + both * self.cs
        sigma = diff * self.cs + both * self.C2h
        half = (H[i][j] - H[j][i]) * 0.5              # the antisymmetric part is invariant
        B = [[None] * 3 for _ in range(3)]
        B[i][i], B[j][j], B[k][k] = H[i][i] - t, H[j][j] + t, H[k][k]
        B[i][j], B[j][i] = sigma + half, sigma - half
        B[i][k], B[j][k] = self.pair(H[i][k], H[j][k])
        B[k][i], B[k][j] = self.pair(H[k][i], H[k][j])
        return B


def plane_rotation_of(R):
    """R as a PlaneRotation if it is an x-axis rotation (DH placements Rx(α)), else None."""
    if R[0] == [1.0, 0.0, 0.0] and R[1][0] == 0.0 and R[2][0] == 0.0:
        return PlaneRotation(R[1][1], R[2][1], 1, 2)
    return None


# ---------------------------------------------------------------------- chain constants


class Link:
    """State-independent constants of body i, floats, rotations snapped to exact 0/±1.

    R0: placement rotation; pl: joint origin in placement axes (R0ᵀ p0, + z d for the
    joint); m, c, Ic: mass, centre of mass, centroidal inertia; h = m c (first moment);
    Io: rotational inertia about the body origin."""

    def __init__(self, chain, i, armature, viscous, coulomb, law=('coulomb',)):
        self.R0 = [[_snap(v) for v in row] for row in chain.R0[i]]
        self.pl = _tidy(chain.R0[i].T @ chain.p0[i])
        self.theta0 = float(chain.theta0[i])
        self.d0 = float(chain.d0[i])
        self.prismatic = bool(chain.prismatic[i])
        m, c, Ic = float(chain.mass[i]), chain.com[i], chain.inertia[i]
        self.m = m
        self.c, self.h = _tidy(c), _tidy(m * c)
        self.Ic = [_tidy(row, scale=np.max(np.abs(Ic))) for row in Ic]
        Io = Ic + steiner(m, c)
        self.Io = [_tidy(row, scale=np.max(np.abs(Io))) for row in Io]
        self.Ic_d, self.Io_d = moment_differences(self.Ic), moment_differences(self.Io)
        self.armature, self.viscous, self.coulomb = armature, viscous, coulomb
        self.law = law          # (name, f_c⁻, f_s, v_s): the joint's friction law

    def joint(self, g, q):
        """cos θ, sin θ and the joint origin (placement axes) for joint variable q."""
        if self.prismatic:
            c, s = g.call('cos', self.theta0), g.call('sin', self.theta0)
            d = q + self.d0
        else:
            theta = q + self.theta0
            c, s, d = g.call('cos', theta), g.call('sin', theta), self.d0
        return c, s, [self.pl[0], self.pl[1], self.pl[2] + d]

    def friction(self, g, qd):
        """Viscous + Coulomb friction b q̇ + f_c sign(q̇) ([SAS] eq. 2.39), or the joint's
        other law (dynamics.friction_torques): asymmetric as ½(f_c + f_c⁻) s + ½(f_c − f_c⁻)
        s² with s = sign(q̇); tanh f_c tanh(q̇/v_s); stribeck adds f_s exp(−(q̇/v_s)²) s."""
        name = self.law[0]
        if name == 'coulomb':
            return self.viscous * qd + self.coulomb * g.call('sign', qd)
        negative, stribeck, velocity = self.law[1:]
        if name == 'tanh':
            return self.viscous * qd + self.coulomb * g.call('tanh', qd * (1.0 / velocity))
        s = g.call('sign', qd)
        if name == 'asymmetric':
            return (self.viscous * qd + (0.5 * (self.coulomb + negative)) * s
                    + (0.5 * (self.coulomb - negative)) * (s * s))
        x = qd * (1.0 / velocity)
        return (self.viscous * qd + self.coulomb * s
                + stribeck * (g.call('exp', -(x * x)) * s))


def _tidy(values, scale=None):
    """Floats, with round-off residues of the constant rotations (|x| < 1e-13 of the
    largest entry, e.g. 0.019·cos(π/2) = 1.2e-18) set to exact zeros."""
    values = np.asarray(values, dtype=float)
    scale = np.max(np.abs(values)) if scale is None else scale
    return [0.0 if abs(v) < _SNAP * scale else float(v) for v in values]


def links_of(model, g=None):
    """The chain's links; with a graph `g`, the last body's inertial parameters are the
    graph inputs named in BODY (runtime arguments, so that a payload needs no new code)."""
    chain = model.chain
    links = [Link(chain, i, float(model.armature[i]), float(model.viscous_friction[i]),
                  float(model.coulomb_friction[i]),
                  (model.friction_model[i], float(model.coulomb_friction_negative[i]),
                   float(model.stribeck_friction[i]), float(model.stribeck_velocity[i])))
             for i in range(model.n)]
    if g is not None:
        last = links[-1]
        last.m = g.input('b_m')
        last.c = [g.input(f'b_c{i}') for i in range(3)]
        last.h = [g.input(f'b_h{i}') for i in range(3)]
        last.Ic = sym(lambda i, j: g.input(f'b_Ic{i}{j}'))
        last.Io = sym(lambda i, j: g.input(f'b_Io{i}{j}'))
        last.Ic_d = [g.input(f'b_Icd{i}') for i in range(3)]
        last.Io_d = [g.input(f'b_Iod{i}') for i in range(3)]
    return links


def regroup(links):
    """Base inertial parameters, exact for the joint torques ([KHA] Khalil & Kleinfinger's
    regrouping, [TML] §6): a revolute joint cannot move a rod on its own axis (mass m,
    first moment h_z, inertia diag(A, A, 0) about the origin: invariant under Rz and
    orthogonal to the joint axis), a prismatic joint cannot turn a pure rotational inertia;
    that part of body j is moved to body j−1 (to the fixed base, i.e. dropped, for j = 0),
    which leaves the Lagrangian and so every τ unchanged, not the internal wrenches. From the
    tip down, in place on the float links; the last body (runtime parameters) is kept.
    Regrouped revolute bodies have m = 0 and h_z = 0 and one diagonal inertia less."""
    for j in range(len(links) - 2, -1, -1):
        L = links[j]
        m, h, Io = L.m, np.array(L.h), np.array(L.Io)
        if L.prismatic:
            moved = (0.0, np.zeros(3), Io)
            L.Io = [[0.0] * 3 for _ in range(3)]
        else:
            A = _rod_inertia(Io)
            moved = (m, np.array([0.0, 0.0, h[2]]), np.diag([A, A, 0.0]))
            L.m, L.h = 0.0, [L.h[0], L.h[1], 0.0]
            L.Io = _tidy_matrix(Io - moved[2])
        if j > 0:
            _add_body(links[j - 1], L, *moved)
        _body_forms(L)
    return links


def _rod_inertia(Io):
    """The A of the rod moved off a revolute body: the value that leaves most zeros among
    the remaining diagonal inertias and their differences (first candidate on ties)."""
    scale = np.max(np.abs(Io)) * _SNAP

    def zeros(A):
        xx, yy, zz = Io[0, 0] - A, Io[1, 1] - A, Io[2, 2]
        return sum(abs(v) <= scale for v in (xx, yy, zz - yy, xx - zz))
    candidates = (Io[0, 0], Io[1, 1], Io[1, 1] - Io[2, 2], Io[0, 0] - Io[2, 2])
    return max(candidates, key=zeros)


def _add_body(P, L, m, h, Io):
    """Adds to body P the body (m, h, Io; axes and origin of L's frame at q = 0) rigidly."""
    R = np.array(L.R0) @ _rz(L.theta0)
    t = np.array(L.R0) @ np.array([L.pl[0], L.pl[1], L.pl[2] + L.d0])
    hr = R @ h
    Io_p = (R @ Io @ R.T + m * (float(t @ t) * np.eye(3) - np.outer(t, t))
            + 2.0 * float(t @ hr) * np.eye(3) - np.outer(t, hr) - np.outer(hr, t))
    P.m = P.m + m
    P.h = _tidy(np.array(P.h) + hr + m * t)
    P.Io = _tidy_matrix(np.array(P.Io) + Io_p)


def _rz(theta):
    c, s = math.cos(theta), math.sin(theta)
    return np.array([[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]])


def _tidy_matrix(M):
    scale = np.max(np.abs(M))
    return [_tidy(row, scale=scale) for row in M]


def _body_forms(L):
    """Centre of mass, centroidal inertia and the diagonal differences of a float body
    from its mass, first moment and origin inertia (c = Ic = None if massless)."""
    L.Io_d = moment_differences(L.Io)
    if L.m == 0.0:
        L.c = L.Ic = L.Ic_d = None
        return
    c = np.array(L.h) / L.m
    Ic = np.array(L.Io) - steiner(L.m, c)
    L.c, L.Ic = _tidy(c), _tidy_matrix(Ic)
    L.Ic_d = moment_differences(L.Ic)


_UPPER = ((0, 0), (0, 1), (0, 2), (1, 1), (1, 2), (2, 2))
BODY = (('b_m',) + tuple(f'b_c{i}' for i in range(3)) + tuple(f'b_h{i}' for i in range(3))
        + tuple(f'b_Ic{i}{j}' for i, j in _UPPER) + tuple(f'b_Io{i}{j}' for i, j in _UPPER)
        + tuple(f'b_Icd{i}' for i in range(3)) + tuple(f'b_Iod{i}' for i in range(3)))


def last_body(model):
    """{name in BODY: float} of the model's last body (payload merged, body frame n):
    mass m, centre of mass c, first moment h = m c, centroidal inertia Ic and the inertia
    about the body origin Io = Ic + m (c·c 1 − c cᵀ) (parallel axes), and the differences
    of their diagonals that `euler_moment` uses (Icd, Iod)."""
    chain = model.chain
    m, c, Ic = float(chain.mass[-1]), np.asarray(chain.com[-1]), np.asarray(chain.inertia[-1])
    Io = Ic + steiner(m, c)
    values = [m] + c.tolist() + (m * c).tolist()
    values += [float(Ic[i, j]) for i, j in _UPPER] + [float(Io[i, j]) for i, j in _UPPER]
    values += moment_differences(Ic.tolist()) + moment_differences(Io.tolist())
    return dict(zip(BODY, values))


def tip_wrench(model, w):
    """Tip wrench [f; n] (last DH link frame, moment about its origin) as force and moment
    about body n's origin, body n axes (same as `algorithms.tip_wrench_in_body`)."""
    R = [[_snap(v) for v in row] for row in model.chain.R_tip]
    f = matvec(R, w[:3])
    return f, vadd(matvec(R, w[3:]), cross([float(v) for v in model.chain.p_tip], f))


# ---------------------------------------------------------------------- Newton–Euler


def trace_rnea(g, model, q, qd, qdd, wrench=None, gravity=None, joint_terms=True,
               com_form=None):
    """Recursive Newton–Euler ([CSDN] §2.1–2.3, Craig's form [CRA]), traced on the graph.

    Forward pass per body: ω, ω̇ (joint rate added in body axes) and the acceleration v̇
    of the body origin, from the parent's through the matrix U = ω̇× + ω×ω× of the parent
    (v̇_o = v̇_parent + U p; [TML] Table 4's 'A_i' term, Khalil's customised form), turned
    by R0ᵀ then Rz(θ)ᵀ. Body wrench either at the centre of mass ([CSDN] eq. 2-4, 2-5:
    F = m(v̇ + U c), N = I_c ω̇ + ω×(I_c ω), n gets c×F in the backward pass) or, with the
    first moment h = m c, about the origin (F = m v̇ + U h, N = I_o ω̇ + ω×(I_o ω) + h×v̇);
    `com_form[i]` chooses (the generator picks the cheaper per link). Backward pass
    f = F + f_child, n = N + n_child (+ c×F); τ = n_z or f_z (eq. 2-6). Zeros in q̇, q̈
    (bias, gravity kernels) are passed as the constant 0.0 and fold away. The bodies are
    those of `regroup` (same torques, most bodies massless), the moments `euler_moment`."""
    links = regroup(links_of(model, g))
    n = len(links)
    com_form = [True] * n if com_form is None else com_form
    com_form = [form and L.c is not None for form, L in zip(com_form, links)]
    gravity = model.gravity if gravity is None else gravity
    w, wd, vd = [0.0] * 3, [0.0] * 3, [-float(x) for x in gravity]
    U = [[0.0] * 3 for _ in range(3)]
    frames, wrenches = [], []
    for i, L in enumerate(links):
        c, s, p = L.joint(g, q[i])
        vd_o = vadd(vd, matvec(U, matvec(L.R0, p)))
        w_p, wd_p, vd_p = (mattvec(L.R0, x) for x in (w, wd, vd_o))
        w, wd, vd = rot_zt(c, s, w_p), rot_zt(c, s, wd_p), rot_zt(c, s, vd_p)
        if L.prismatic:
            vd = [vd[0] + 2.0 * w[1] * qd[i], vd[1] - 2.0 * w[0] * qd[i], vd[2] + qdd[i]]
        else:
            wd = [wd[0] + w[1] * qd[i], wd[1] - w[0] * qd[i], wd[2] + qdd[i]]
            w = [w[0], w[1], w[2] + qd[i]]
        U = omega_matrix(w, wd)
        if com_form[i]:
            F = vscale(L.m, vadd(vd, matvec(U, L.c)))
            N = euler_moment(L.Ic, L.Ic_d, w, wd, U)
        else:
            F = vadd(vscale(L.m, vd), matvec(U, L.h))
            N = vadd(euler_moment(L.Io, L.Io_d, w, wd, U), cross(L.h, vd))
        frames.append((c, s, p))
        wrenches.append((F, N))
    f, nm = tip_wrench(model, wrench) if wrench is not None else ([0.0] * 3, [0.0] * 3)
    tau = [None] * n
    for i in range(n - 1, -1, -1):
        F, N = wrenches[i]
        L = links[i]
        f, nm = vadd(F, f), vadd(N, nm)
        if com_form[i]:
            nm = vadd(nm, cross(L.c, F))
        tau[i] = f[2] if L.prismatic else nm[2]
        if joint_terms:
            tau[i] = tau[i] + L.armature * qdd[i] + L.friction(g, qd[i])
        c, s, p = frames[i]
        f1 = rot_z(c, s, f)
        n1 = vadd(rot_z(c, s, nm), cross(p, f1))
        f, nm = matvec(L.R0, f1), matvec(L.R0, n1)
    return settle_signs(tau)


def euler_moment(J, d, w, wd, U):
    """J ω̇ + ω × (J ω) of a symmetric J from the entries of U = ω̇× + ω×ω× (`omega_matrix`,
    whose products ωᵢωⱼ it shares): with (i, j, k) cyclic,
    Nᵢ = Jᵢᵢ ω̇ᵢ + Jᵢₖ Uⱼᵢ − Jᵢⱼ Uₖᵢ + dᵢ ωⱼωₖ + Jⱼₖ (ωⱼ² − ωₖ²), dᵢ = Jₖₖ − Jⱼⱼ
    (`d`, given so that constant or runtime differences are formed once): 15 products for a
    general J instead of 21 for J ω̇ plus the gyroscopic term, 6 for a diagonal one."""
    out = []
    for i in range(3):
        j, k = (i + 1) % 3, (i + 2) % 3
        out.append(J[i][i] * wd[i] + J[i][k] * U[j][i] - J[i][j] * U[k][i]
                   + d[i] * (w[j] * w[k]) + J[j][k] * (w[j] * w[j] - w[k] * w[k]))
    return out


def moment_differences(J):
    """dᵢ = Jₖₖ − Jⱼⱼ for (i, j, k) cyclic (see `euler_moment`)."""
    return [J[2][2] - J[1][1], J[0][0] - J[2][2], J[1][1] - J[0][0]]


def omega_matrix(w, wd):
    """U = ω̇× + ω×ω×, so that U r = ω̇×r + ω×(ω×r) for any r (6 products shared)."""
    w00, w11, w22 = w[0] * w[0], w[1] * w[1], w[2] * w[2]
    w01, w02, w12 = w[0] * w[1], w[0] * w[2], w[1] * w[2]
    return [[-(w11 + w22), w01 - wd[2], w02 + wd[1]],
            [w01 + wd[2], -(w00 + w22), w12 - wd[0]],
            [w02 - wd[1], w12 + wd[0], -(w00 + w11)]]


def rnea_choices(model, **kwargs):
    """Per link, whether the centre-of-mass form of the body wrench is cheaper than the
    origin form (fewest multiplications, then additions), by coordinate search over the
    bodies that keep a mass after `regroup`; models with more than 8 links keep the
    centre-of-mass form wherever there is one (the search is O(n²))."""
    n = model.n
    best = [True] * n
    if n > 8:
        return best
    cost = _traced_cost(model, best, **kwargs)
    for i in _bodies_with_mass(model):
        trial = best[:i] + [not best[i]] + best[i + 1:]
        trial_cost = _traced_cost(model, trial, **kwargs)
        if trial_cost < cost:
            best, cost = trial, trial_cost
    return best


def _bodies_with_mass(model):
    """The bodies that keep a mass after `regroup` (so have a centre-of-mass form): the
    last body and prismatic ones."""
    return [i for i, L in enumerate(regroup(links_of(model))) if L.c is not None]


def _traced_cost(model, com_form, velocity=True, acceleration=True, joint_terms=True):
    g = Graph()
    n = model.n
    q = _inputs(g, 'q', n)
    qd = _inputs(g, 'qd', n) if velocity else [0.0] * n
    qdd = _inputs(g, 'qdd', n) if acceleration else [0.0] * n
    out = trace_rnea(g, model, q, qd, qdd, joint_terms=joint_terms, com_form=com_form)
    needed = _reachable(out)
    return (sum(1 for x in needed if x.op == '*'),
            sum(1 for x in needed if x.op in '+-' or x.op == 'neg'))


# ---------------------------------------------------------------------- articulated body


class Inertia:
    """Symmetric 6×6 spatial (articulated) inertia [[A, H], [Hᵀ, M]] in [ω; v] order."""

    def __init__(self, A, H, M):
        self.A, self.H, self.M = A, H, M

    def column(self, k):
        """Column k (2: angular z, 5: linear z) as (angular, linear) 3-vectors."""
        if k == 2:
            return [self.A[j][2] for j in range(3)], list(self.H[2])
        return [self.H[j][2] for j in range(3)], [self.M[j][2] for j in range(3)]

    def times(self, ang, lin):
        """I [ang; lin] -> (moment, force)."""
        return (vadd(matvec(self.A, ang), matvec(self.H, lin)),
                vadd(mattvec(self.H, ang), matvec(self.M, lin)))

    def minus_outer(self, ua, ul, ka, kl):
        """I − [ua; ul][ka; kl]ᵀ, where [ka; kl] ∥ [ua; ul] (so the result is symmetric)."""
        A = sym(lambda i, j: self.A[i][j] - ua[i] * ka[j])
        H = [[self.H[i][j] - ua[i] * kl[j] for j in range(3)] for i in range(3)]
        M = sym(lambda i, j: self.M[i][j] - ul[i] * kl[j])
        return Inertia(A, H, M)

    def without_joint_axis(self, k):
        """The same inertia with row and column k (2: angular z, 5: linear z) set to
        exact zeros."""
        A = [row[:] for row in self.A]
        H = [row[:] for row in self.H]
        M = [row[:] for row in self.M]
        for j in range(3):
            if k == 2:
                A[j][2] = A[2][j] = H[2][j] = 0.0
            else:
                M[j][2] = M[2][j] = H[j][2] = 0.0
        return Inertia(A, H, M)

    def rotated(self, R):
        if isinstance(R, PlaneRotation):
            return Inertia(R.sym(self.A), R.general(self.H), R.sym(self.M))
        return Inertia(congruence_sym(R, self.A), congruence(R, self.H),
                       congruence_sym(R, self.M))

    def shifted(self, p):
        """Xᵀ I X for X = [[1, 0], [−p×, 1]]: the same body seen about a point at −p
        (p = this origin in the new frame): H' = H + S M, A' = A + S Hᵀ − H' S, S = p×."""
        S = skew(p)
        SM = matmul(S, self.M)
        H = [[self.H[i][j] + SM[i][j] for j in range(3)] for i in range(3)]
        A = sym(lambda i, j: self.A[i][j]
                + sum((S[i][k] * self.H[j][k] for k in range(3)), 0.0)
                - sum((H[i][k] * S[k][j] for k in range(3)), 0.0))
        return Inertia(A, H, self.M)

    def plus(self, other):
        return Inertia(sym(lambda i, j: self.A[i][j] + other.A[i][j]),
                       [[self.H[i][j] + other.H[i][j] for j in range(3)] for i in range(3)],
                       sym(lambda i, j: self.M[i][j] + other.M[i][j]))


def body_inertia(L):
    """Spatial inertia about the body origin (Featherstone, RBDA eq. 2.63)."""
    return Inertia([row[:] for row in L.Io], skew(L.h),
                   [[L.m if i == j else 0.0 for j in range(3)] for i in range(3)])


def motion_to_child(L, frame, ang, lin):
    """X v: a motion vector of the parent (parent axes, parent origin) in the child."""
    c, s, p = frame
    ang_p, lin_p = mattvec(L.R0, ang), mattvec(L.R0, lin)
    lin_p = vadd(lin_p, cross(ang_p, p))
    return rot_zt(c, s, ang_p), rot_zt(c, s, lin_p)


def force_to_parent(L, frame, n, f):
    """Xᵀ f: a force [n; f] of the child (child axes, moment about child origin) in the
    parent."""
    c, s, p = frame
    f1 = rot_z(c, s, f)
    n1 = vadd(rot_z(c, s, n), cross(p, f1))
    return matvec(L.R0, n1), matvec(L.R0, f1)


def inertia_to_parent(L, frame, inertia):
    """Xᵀ I X: rotate by Rz(θ), shift to the parent origin, rotate by the placement R0."""
    c, s, p = frame
    R0 = plane_rotation_of(L.R0) or L.R0
    return inertia.rotated(PlaneRotation(c, s, 0, 1)).shifted(p).rotated(R0)


def trace_aba(g, model, q, qd, tau, wrench=None):
    """Articulated-body algorithm (Featherstone, RBDA Table 7.1), traced on the graph;
    the same passes as `algorithms.aba` with friction and armature of the model."""
    links = regroup(links_of(model, g))
    n = len(links)
    frames, cbias, IA, pA = [], [], [], []
    ang, lin = [0.0] * 3, [0.0] * 3
    for i, L in enumerate(links):
        frame = L.joint(g, q[i])
        ang, lin = motion_to_child(L, frame, ang, lin)
        qz = [0.0, 0.0, qd[i]]
        if L.prismatic:
            lin = vadd(lin, qz)
            cbias.append(([0.0] * 3, cross(ang, qz)))
        else:
            ang = vadd(ang, qz)
            cbias.append((cross(ang, qz), cross(lin, qz)))
        body = body_inertia(L)
        mom, frc = body.times(ang, lin)
        pA.append((vadd(cross(ang, mom), cross(lin, frc)), cross(ang, frc)))
        frames.append(frame)
        IA.append(body)
    if wrench is not None:
        f, nm = tip_wrench(model, wrench)
        pA[n - 1] = (vadd(pA[n - 1][0], nm), vadd(pA[n - 1][1], f))
    U, invD, u = [None] * n, [None] * n, [None] * n
    for i in range(n - 1, -1, -1):
        L = links[i]
        k = 5 if L.prismatic else 2
        U[i] = IA[i].column(k)
        D = (IA[i].M[2][2] if L.prismatic else IA[i].A[2][2]) + L.armature
        invD[i] = 1.0 / D
        p_k = pA[i][1][2] if L.prismatic else pA[i][0][2]
        u[i] = tau[i] - L.friction(g, qd[i]) - p_k
        if i == 0:
            continue
        ua, ul = U[i]
        ka, kl = vscale(invD[i], ua), vscale(invD[i], ul)
        Ia = IA[i].minus_outer(ua, ul, ka, kl)
        if L.armature == 0.0:
            Ia = Ia.without_joint_axis(k)        # Ia S = U (1 − U_k / D) = 0 exactly
        mom, frc = Ia.times(*cbias[i])
        uD = u[i] * invD[i]
        pa_n = vadd(vadd(pA[i][0], mom), vscale(uD, ua))
        pa_f = vadd(vadd(pA[i][1], frc), vscale(uD, ul))
        IA[i - 1] = IA[i - 1].plus(inertia_to_parent(L, frames[i], Ia))
        n_p, f_p = force_to_parent(L, frames[i], pa_n, pa_f)
        pA[i - 1] = (vadd(pA[i - 1][0], n_p), vadd(pA[i - 1][1], f_p))
    qdd = [None] * n
    ang, lin = [0.0] * 3, [-float(x) for x in model.gravity]
    for i, L in enumerate(links):
        ang, lin = motion_to_child(L, frames[i], ang, lin)
        ang, lin = vadd(ang, cbias[i][0]), vadd(lin, cbias[i][1])
        ua, ul = U[i]
        qdd[i] = (u[i] - dot(ua, ang) - dot(ul, lin)) * invD[i]
        if L.prismatic:
            lin = [lin[0], lin[1], lin[2] + qdd[i]]
        else:
            ang = [ang[0], ang[1], ang[2] + qdd[i]]
    return settle_signs(qdd)


# ---------------------------------------------------------------------- kernels


def _inputs(g, arg, n):
    return [g.input(f'{arg}{i}') for i in range(n)]


def source(model, name, flat=None):
    """Python source of the generated kernel `name` (one of KERNELS) for this model: one
    flat function (flat=True; the default for chains of up to `_FLAT_MAX_LINKS` links) or
    a function calling chunk functions (see `emit`)."""
    n = model.n
    g = Graph()
    if name == 'rk4':
        return _rk4_source(n, body_parameters(cached_source(model, 'aba')))
    if name.startswith('rnea') or name in ('bias', 'gravity'):
        q = _inputs(g, 'q', n)
        qd = _inputs(g, 'qd', n) if name != 'gravity' else [0.0] * n
        qdd = _inputs(g, 'qdd', n) if name.startswith('rnea') else [0.0] * n
        params = {'rnea': ['q', 'qd', 'qdd'], 'rnea_wrench': ['q', 'qd', 'qdd', 'w'],
                  'bias': ['q', 'qd'], 'gravity': ['q']}[name]
        w = _inputs(g, 'w', 6) if name == 'rnea_wrench' else None
        flags = dict(velocity=name != 'gravity', acceleration=name.startswith('rnea'),
                     joint_terms=name != 'gravity')
        out = trace_rnea(g, model, q, qd, qdd, w, joint_terms=flags['joint_terms'],
                         com_form=rnea_choices(model, **flags))
    elif name in ('aba', 'aba_wrench'):
        q, qd, tau = _inputs(g, 'q', n), _inputs(g, 'qd', n), _inputs(g, 'tau', n)
        params = ['q', 'qd', 'tau'] + (['w'] if name == 'aba_wrench' else [])
        w = _inputs(g, 'w', 6) if name == 'aba_wrench' else None
        out = trace_aba(g, model, q, qd, tau, w)
    else:
        raise ValueError(f'codegen: unknown kernel {name!r}, expected one of {KERNELS}')
    sequences = {p: 6 if p == 'w' else n for p in params}
    if flat is None and n <= _FLAT_MAX_LINKS:
        flat = True
    return emit(name, params + _body_inputs(out), sequences, out, flat)


def _body_inputs(outputs):
    """The names in BODY that the outputs read, in BODY order (the trailing parameters)."""
    used = {x.args[0] for x in _reachable(outputs) if x.op == 'in'}
    return [b for b in BODY if b in used]


def body_parameters(text):
    """The last-body parameter names of a kernel's source (its trailing parameters)."""
    head = text[text.index('(') + 1:text.index(')')]
    return [p.strip() for p in head.split(',') if p.strip() in BODY]


def _rk4_source(n, body):
    """One classical RK4 step of q̈ = aba(q, q̇, τ), τ held, on floats ([TML] §7);
    `body`: the last-body parameters of `aba`, passed on to it."""
    def vec(fmt):
        return ', '.join(fmt.format(i=i) for i in range(n))
    extra = ''.join(f', {b}' for b in body)
    lines = [
        f'def rk4(q, qd, tau, dt{extra}):',
        f'    {vec("q{i}")}, = q',
        f'    {vec("v{i}")}, = qd',
        '    h = 0.5 * dt',
        f'    {vec("a{i}")}, = aba(q, qd, tau{extra})',
        f'    {vec("b{i}")}, = aba(({vec("q{i} + h * v{i}")},), '
        f'({vec("v{i} + h * a{i}")},), tau{extra})',
        f'    {vec("c{i}")}, = aba(({vec("q{i} + h * (v{i} + h * a{i})")},), '
        f'({vec("v{i} + h * b{i}")},), tau{extra})',
        f'    {vec("e{i}")}, = aba(({vec("q{i} + dt * (v{i} + h * b{i})")},), '
        f'({vec("v{i} + dt * c{i}")},), tau{extra})',
        '    k = dt / 6.0',
        f'    q_next = ({vec("q{i} + k * (6.0 * v{i} + dt * (a{i} + b{i} + c{i}))")},)',
        f'    qd_next = ({vec("v{i} + k * (a{i} + 2.0 * (b{i} + c{i}) + e{i})")},)',
        '    return q_next, qd_next',
    ]
    return '\n'.join(lines) + '\n'


_SCALAR = {'sin': math.sin, 'cos': math.cos, 'sign': _sign, 'tanh': math.tanh,
           'exp': math.exp}
_ARRAY = {'sin': np.sin, 'cos': np.cos, 'sign': np.sign, 'tanh': np.tanh, 'exp': np.exp}


def kernel(model, name, mode='scalar'):
    """The compiled kernel `name` for `model`: mode 'scalar' takes sequences of floats,
    'array' takes sequences of (B,) arrays (e.g. ``q.T``); both return a tuple.
    Compiled on first use; the code is shared by the models `with_payload` derives from
    one another (`KernelCache.shared`), and each model binds its last body's parameters as
    the defaults of its own function object (`KernelCache.values`), so that a payload
    change costs a few microseconds, not a new compilation."""
    values = KernelCache.of(model).values
    key = (name, mode)
    fn = values.get(key)
    if fn is None:
        fn = values[key] = bind(model, _unbound(model, name, mode))
    return fn


def shared_cache(model):
    """Generated sources and compiled code that depend on everything but the last body's
    inertial parameters (shared with the models `with_payload` derives)."""
    return KernelCache.of(model).shared


def cached_source(model, name):
    """`source(model, name)`, generated once per shared cache."""
    shared = shared_cache(model)
    text = shared.get(('source', name))
    if text is None:
        text = shared[('source', name)] = source(model, name)
    return text


def per_model(model, key, make):
    """``make(model)``, computed once per model instance and kept in its `KernelCache`
    (dropped by `with_payload` copies and by pickling)."""
    return KernelCache.of(model).value(key, make, model)


def last_body_values(model):
    """`last_body(model)`, computed once per model instance."""
    return per_model(model, 'last_body', last_body)


def bind(model, fn):
    """A function object running `fn`'s code with this model's last-body parameters as
    the defaults of its trailing parameters (no call-time cost, no new compilation)."""
    if fn is _singular:
        return fn
    code = fn.__code__
    names = code.co_varnames[:code.co_argcount]
    values = last_body_values(model)
    defaults = tuple(values[b] for b in names if b in values)
    return types.FunctionType(code, fn.__globals__, fn.__name__, defaults or None)


def _unbound(model, name, mode):
    shared = shared_cache(model)
    fn = shared.get((name, mode))
    if fn is None:
        fn = shared[(name, mode)] = _compile(model, name, mode)
    return fn


def _compile(model, name, mode):
    namespace = dict(_SCALAR if mode == 'scalar' else _ARRAY)
    try:
        if name == 'rk4':
            namespace['aba'] = _unbound(model, 'aba', mode)
        text = cached_source(model, name)
    except ZeroDivisionError:
        return _singular
    if mode == 'array':
        text = ast.fix_missing_locations(_InPlace().visit(ast.parse(text)))
    code = compile(text, f'<robot_dynamics.dynamics.codegen {name} {model!r}>', 'exec')
    exec(code, namespace)  # noqa: S102 - our own generated source, nothing external
    return namespace[name]


class _InPlace(ast.NodeTransformer):
    """Array mode: ``t = (a * b) + c`` becomes ``t = a * b; t += c``, so that numpy
    updates the fresh temporary instead of allocating another (B,) array (≈ 3 % of a
    batch). Only a fresh left operand (an operation or call, never a name: that may be
    an input or a shared value) is updated, and only if `t` is not read on the right;
    the operands of + and * are swapped to put the fresh one first. On floats the
    rewritten code computes the same values in the same order."""

    def visit_Assign(self, node):
        if len(node.targets) == 1 and isinstance(node.targets[0], ast.Name) \
                and isinstance(node.value, ast.BinOp):
            return _in_place(node.targets[0].id, node.value)
        return node


def _in_place(target, value):
    if isinstance(value, ast.BinOp):
        left, right = value.left, value.right
        if not _fresh(left) and _fresh(right) and isinstance(value.op, (ast.Add, ast.Mult)):
            left, right = right, left
        if _fresh(left) and all(getattr(x, 'id', None) != target for x in ast.walk(right)):
            return _in_place(target, left) + [
                ast.AugAssign(ast.Name(target, ast.Store()), value.op, right)]
    return [ast.Assign([ast.Name(target, ast.Store())], value)]


def _fresh(node):
    """Whether evaluating `node` makes a new object (a negative constant does not)."""
    if isinstance(node, ast.UnaryOp):
        return _fresh(node.operand)
    return isinstance(node, (ast.BinOp, ast.Call))


def _singular(*args):
    """Stands in for a kernel whose model divides by a constant zero (e.g. an ABA pivot
    D = 0 of a massless, inertia-free, armature-free last link); callers fall back."""
    raise ZeroDivisionError('codegen: a constant divisor of this model is zero')


# ---------------------------------------------------------------------- operation counts


def operation_counts(text):
    """Arithmetic in generated source: {'mul', 'add', 'div', 'neg', 'call'}; `add` counts
    additions and subtractions (as the papers' tables do); `neg` counts negations of values
    (not negative literals such as ``(-0.15)``); `call` counts sin/cos/sign."""
    counts = dict.fromkeys(('mul', 'add', 'div', 'neg', 'call'), 0)
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.BinOp):
            if isinstance(node.op, ast.Mult):
                counts['mul'] += 1
            elif isinstance(node.op, (ast.Add, ast.Sub)):
                counts['add'] += 1
            elif isinstance(node.op, ast.Div):
                counts['div'] += 1
        elif isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub) \
                and not isinstance(node.operand, ast.Constant):   # (-0.15) is a literal
            counts['neg'] += 1
        elif isinstance(node, ast.Call) and getattr(node.func, 'id', None) in _SCALAR:
            counts['call'] += 1                  # (not the calls of chunk functions)
    return counts
