"""``partial_patch`` and ``context_patch``: the operations that keep a recording linear in the
length of an answer and of a conversation.

Every streamed event carries the whole assistant message so far, so literal dumps grow with the
square of the number of deltas. The recorder writes, instead of the full ``partial``, the list
of operations that turns the previous event's ``partial`` into this one (see ``docs/file-format.md``):

* ``["append", PATH, SUFFIX]`` appends a string to the string at PATH;
* ``["set", PATH, VALUE]`` sets (or adds) the value at PATH;
* ``["push", PATH, VALUE]`` appends VALUE to the list at PATH.

:func:`compute_patch` is exact by construction: it compares leaves by type *and* value (so
``1`` never stands in for ``True`` or ``1.0``), emits ``append`` only for a string that starts
with the previous one, and gives up (``None``, meaning "write the partial in full") whenever a
key disappears or a list shrinks, which the three operations cannot express.
:func:`apply_patch` is the strict inverse used by the reader; it never mutates its input
(containers along each path are copied), so earlier snapshots stay intact.
"""

from __future__ import annotations

import operator
from typing import Any

import orjson

PatchOp = list[Any]
Patch = list[PatchOp]


class PatchError(ValueError):
    """A patch that does not apply to the value it was given."""


# ------------------------------------------------------------------------------ writing


def compute_patch(previous: Any, current: Any) -> Patch | None:
    """Operations turning ``previous`` into ``current``, or None if they cannot express it.

    Both values are JSON-shaped (dicts with str keys, lists, str, int, float, bool, None).
    """
    ops: Patch = []
    if not _diff(previous, current, [], ops, False):
        return None
    return ops


def growth_patch(previous: Any, current: Any, path: list[Any]) -> Patch | None:
    """:func:`compute_patch` of two values built one from the other by copy on write, for a
    value at ``path``: containers off the changed path are the very same objects (skipped by
    identity), and a string that became longer was extended (written as ``append`` without
    comparing its old part). Work is bounded by the width of the copied containers and what
    was added, not by the size of the value.

    The caller vouches for the growth (``partial_json.StreamingJsonObject`` in its incremental
    mode only ever extends a string it already holds); any other change is compared as
    :func:`compute_patch` compares it, and the operations are the ones it would give.
    """
    ops: Patch = []
    if not _diff(previous, current, list(path), ops, True):
        return None
    return ops


def patch_at(previous: Any, current: Any, path: list[Any]) -> Patch | None:
    """:func:`compute_patch` of a value at ``path``, compared whole (nothing vouched for)."""
    ops: Patch = []
    if not _diff(previous, current, list(path), ops, False):
        return None
    return ops


def growth_only_patch(previous: Any, current: Any) -> Patch | None:
    """:func:`compute_patch` when ``current`` only adds to ``previous`` (strings appended to,
    lists pushed to, keys added), else None.

    A conversation context is patched only when it grew: a context that shrank or changed in
    the middle (a compacted history, an edited system prompt) is written whole, so a line that
    carries a patch always means "the earlier context, and then this".
    """
    ops = compute_patch(previous, current)
    if ops is None:
        return None
    for op in ops:
        if op[0] == "set" and _holds(previous, op[1]):
            return None  # a value replaced, not added
    return ops


def _holds(value: Any, path: list[Any]) -> bool:
    """Whether ``path`` names a value inside ``value``."""
    for step in path:
        if type(value) is dict and step in value:
            value = value[step]
        elif type(value) is list and type(step) is int and 0 <= step < len(value):
            value = value[step]
        else:
            return False
    return True


def _same_leaf(a: Any, b: Any) -> bool:
    return a is b or (type(a) is type(b) and a == b)


def _diff(previous: Any, current: Any, path: list[Any], ops: Patch, grown: bool) -> bool:
    """Append the operations for one value to ``ops``; False when it cannot be expressed.
    ``grown``: a longer string is known to extend the previous one (see :func:`growth_patch`)."""
    if previous is current:
        return True
    previous_type = type(previous)
    if previous_type is not type(current):
        ops.append(["set", list(path), current])
        return True
    if previous_type is dict:
        if _encoded_equal(previous, current):
            return True
        return _diff_dict(previous, current, path, ops, grown)
    if previous_type is list:
        if _encoded_equal(previous, current):
            return True
        return _diff_list(previous, current, path, ops, grown)
    if grown and previous_type is str and path and len(current) > len(previous):
        ops.append(["append", list(path), current[len(previous) :]])
        return True
    if previous == current:
        return True
    if previous_type is str and path and current.startswith(previous):
        ops.append(["append", list(path), current[len(previous) :]])
    else:
        ops.append(["set", list(path), current])
    return True


def _diff_dict(
    previous: dict[str, Any], current: dict[str, Any], path: list[Any], ops: Patch, grown: bool
) -> bool:
    if len(previous) > len(current) or any(key not in current for key in previous):
        return False  # a removed key: no operation deletes
    for key, value in current.items():
        if key in previous:
            path.append(key)
            expressible = _diff(previous[key], value, path, ops, grown)
            path.pop()
            if not expressible:
                return False
        else:
            ops.append(["set", [*path, key], value])
    return True


def _diff_list(
    previous: list[Any], current: list[Any], path: list[Any], ops: Patch, grown: bool
) -> bool:
    if len(current) < len(previous):
        return False  # a shrunk list: no operation removes
    for index in range(_identical_prefix(previous, current), len(previous)):
        path.append(index)
        expressible = _diff(previous[index], current[index], path, ops, grown)
        path.pop()
        if not expressible:
            return False
    for value in current[len(previous) :]:
        ops.append(["push", list(path), value])
    return True


def _identical_prefix(previous: list[Any], current: list[Any]) -> int:
    """How many leading elements of the two lists are the very same objects, found at C speed:
    an agent's next context shares every message but the new ones with the last, and walking
    them in Python at every turn would cost time quadratic in the turns."""
    same = list(map(operator.is_, previous, current))
    try:
        return same.index(False)
    except ValueError:
        return len(same)


# ------------------------------------------------------------------------------ reading


def apply_patch(value: Any, patch: Any) -> Any:
    """``value`` with ``patch`` applied; raises :class:`PatchError` if it does not apply."""
    if type(patch) is not list:
        raise PatchError("the patch is not a list of operations")
    for position, op in enumerate(patch):
        patched = _append_to_block(value, op)
        if patched is not None:
            value = patched
            continue
        try:
            value = _apply_op(value, op)
        except PatchError as error:
            raise PatchError(f"operation {position}: {error}") from None
    return value


def _append_to_block(root: Any, op: Any) -> Any:
    """The dominant operation, text growing in a content block
    (``["append", ["content", I, "text"], SUFFIX]``), applied without the general walk; None
    when ``op`` has another shape or does not apply (the general path then says why)."""
    if type(op) is not list or len(op) != 3 or op[0] != "append" or type(root) is not dict:
        return None
    path, suffix = op[1], op[2]
    if type(path) is not list or len(path) != 3 or type(suffix) is not str:
        return None
    key, index, field = path
    if type(key) is not str or type(index) is not int or type(field) is not str:
        return None
    blocks = root.get(key)
    if type(blocks) is not list or not 0 <= index < len(blocks):
        return None
    block = blocks[index]
    if type(block) is not dict:
        return None
    text = block.get(field)
    if type(text) is not str:
        return None
    block = block.copy()
    block[field] = text + suffix
    blocks = blocks.copy()
    blocks[index] = block
    root = root.copy()
    root[key] = blocks
    return root


def _apply_op(root: Any, op: Any) -> Any:
    if type(op) is not list or len(op) != 3:
        raise PatchError("an operation is not a list [OP, PATH, VALUE]")
    name, path, argument = op
    if name not in ("append", "set", "push"):
        raise PatchError(f"unknown operation {name!r}")
    if type(path) is not list:
        raise PatchError("PATH is not a list")
    for step in path:
        if type(step) is not str and type(step) is not int:
            raise PatchError(f"PATH step {step!r} is neither a key nor an index")
    if not path:
        if name == "set":
            return argument
        if name == "push" and type(root) is list:
            return [*root, argument]
        raise PatchError(
            f"{name} at the root needs a list target"
            if name == "push"
            else "append needs a non-empty PATH"
        )
    return _replace_in(root, path, name, argument)


def _replace_in(root: Any, path: list[Any], name: str, argument: Any) -> Any:
    """A copy of ``root`` with the operation applied at ``path``: the containers along the path
    are copied, everything else is shared. A loop, not a recursion, so that a PATH of any
    length fails with a :class:`PatchError` rather than exhausting the stack."""
    along: list[tuple[Any, Any]] = []  # (container, step) from the root down
    node = root
    last = len(path) - 1
    leaf: Any = None
    for depth, step in enumerate(path):
        if type(node) is dict:
            if type(step) is not str:
                raise PatchError(f"index {step!r} used on an object")
            along.append((node, step))
            if depth == last and name == "set":
                leaf = argument
                break
            if step not in node:
                raise PatchError(f"no key {step!r}")
        elif type(node) is list:
            if type(step) is not int or not 0 <= step < len(node):
                raise PatchError(f"no index {step!r} in a list of {len(node)}")
            along.append((node, step))
            if depth == last and name == "set":
                leaf = argument
                break
        else:
            raise PatchError(f"step {step!r} into a {type(node).__name__}")
        node = node[step]
        if depth == last:
            if name == "append":
                if type(node) is not str or type(argument) is not str:
                    raise PatchError("append needs a string target and a string suffix")
                leaf = node + argument
            else:  # push
                if type(node) is not list:
                    raise PatchError("push needs a list target")
                leaf = [*node, argument]
    for container, step in reversed(along):
        copy: Any = dict(container) if type(container) is dict else list(container)
        copy[step] = leaf
        leaf = copy
    return leaf


# ------------------------------------------------------------------------------ nesting


def nesting(value: Any, limit: int) -> int:
    """How many levels of objects and arrays ``value`` nests (a scalar: 0, ``[]``: 1), exact
    up to ``limit``: the walk stops at the first level past it (the caller only needs to know
    that the value is too deep). A loop, not a recursion: a hostile value cannot exhaust the
    stack."""
    if type(value) is not dict and type(value) is not list:
        return 0
    deepest = 1
    pending: list[tuple[Any, int]] = [(value, 1)]
    while pending:
        container, level = pending.pop()
        below = level + 1
        for child in container.values() if type(container) is dict else container:
            kind = type(child)
            if kind is dict or kind is list:
                if below > deepest:
                    deepest = below
                    if deepest > limit:
                        return deepest
                if child:
                    pending.append((child, below))
    return deepest


def too_deep_operation(patch: Any, limit: int) -> int | None:
    """The position of the first operation of ``patch`` that would make the value it applies
    to nest deeper than ``limit`` levels (see :func:`nesting`), or None.

    An operation puts its value at a known depth (PATH's length, one more for ``push``), so
    the result of a patch nests no deeper than the value it was applied to and what each
    operation adds: a value within the limit stays within it unless an operation takes it
    past, and checking the operations is enough. Malformed operations are left to
    :func:`apply_patch`, which rejects them."""
    if type(patch) is not list:
        return None
    for position, op in enumerate(patch):
        if type(op) is not list or len(op) != 3 or type(op[1]) is not list:
            continue
        name, path, argument = op
        above = len(path) + (1 if name == "push" else 0)
        if above > limit or (name != "append" and above + nesting(argument, limit - above) > limit):
            return position
    return None


def _encoded_equal(a: Any, b: Any) -> bool:
    """True only when two containers are certainly equal, found at C speed: ``==`` first (false
    at the first difference), then their JSON bytes, which tell ``true``, ``1`` and ``1.0``
    apart. False means "compare them member by member" (a difference, or keys in another
    order): an agent's next context shares all but its new messages with the last one, and
    walking the shared part in Python at every turn would cost time quadratic in the turns."""
    if a != b:
        return False
    try:
        return orjson.dumps(a) == orjson.dumps(b)
    except (orjson.JSONEncodeError, TypeError):
        return False


def strictly_equal(a: Any, b: Any) -> bool:
    """JSON equality that tells ``True`` from ``1`` and ``1`` from ``1.0``; members that are
    the same object are equal without a look (two contexts of one conversation share every
    message but the new ones)."""
    if a is b:
        return True
    kind = type(a)
    if kind is not type(b):
        return False
    if kind is dict:
        return len(a) == len(b) and all(
            key in b and strictly_equal(value, b[key]) for key, value in a.items()
        )
    if kind is list:
        return len(a) == len(b) and all(strictly_equal(x, y) for x, y in zip(a, b, strict=True))
    equal: bool = a == b  # JSON leaves of one type: == gives a bool
    return equal
