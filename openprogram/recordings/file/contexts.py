"""The contexts of a recording's calls, checked when the file is opened and built when asked,
sharing structure: memory and time linear in the file.

A version 2 request may store its context as its growth from an earlier call's
(``context_patch``, docs/file-format.md): an agent's turn N is its turn N-1 and the messages
added since. Building every call's context into a structure of its own when the file is opened
would copy the whole conversation at every turn (a 3 MB file of short turns took 2 GB), so:

* **Opening** checks every context: its patch applies, the result parses as a ``Context`` and
  nests within the format's limit. A patch that only pushes messages onto a context that has a
  message list (an agent's next turn, the writer's usual patch) is checked on the pushed
  messages alone, without building the context; any other patch is applied, and only the
  parts it changed are parsed again.
* **A context is built when asked** (:meth:`CallContexts.context`), from the context of its
  base, and the most recent ones are kept: consumers walk the calls in order, so each is built
  from the one before it, in time proportional to its size, sharing every message object with
  it (a new messages list holding the same messages).
* **Each call knows what it shares with its base** (:meth:`CallContexts.growth`): how many
  leading messages are the base's own, so the views show a turn's growth without comparing the
  whole conversation again.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any

from pydantic import TypeAdapter, ValidationError

from ...providers.types import Context, Message, Tool
from .format import MAX_NESTING, not_an_earlier_call
from .patches import PatchError, apply_patch, too_deep_operation

__all__ = ["CallContexts"]

_CONTEXT = Context.__pydantic_validator__
_MESSAGE = TypeAdapter(Message).validator
_TOOL = Tool.__pydantic_validator__
#: The list fields of a context, and how each element is checked.
_LISTS = {"messages": _MESSAGE, "tools": _TOOL}
#: A resolved context sits one level below its request line, which the limit counts from.
_CONTEXT_NESTING = MAX_NESTING - 1


class _Node:
    """One call's context as the file stores it, and what is known of its resolved form."""

    __slots__ = ("whole", "base", "ops", "messages", "has_messages", "shared", "pushes", "prompt")

    def __init__(
        self,
        whole: Any,
        base: int | None,
        ops: Any,
        messages: int,
        has_messages: bool,
        shared: int,
        prompt: Any,
    ) -> None:
        self.whole = whole  # the context stored whole, or None (a patch)
        self.base = base  # the call the patch applies to
        self.ops = ops  # the patch's operations
        self.messages = messages  # how many messages the resolved context holds
        self.has_messages = has_messages  # whether it holds a ``messages`` list at all
        self.shared = shared  # how many leading messages are the base's own objects
        self.pushes = False  # whether the patch only pushes messages (``ops`` are the growth)
        self.prompt = prompt  # the resolved context's system prompt


class CallContexts:
    """Every call's context of one recording: added in file order by the reader (which checks
    each, raising ``ValueError`` with the reason), built when asked."""

    #: Built contexts kept: enough for the lanes a replay walks side by side (a writer
    #: patches from the last call of at most 64 lanes, ``ContextBases.MAX_BASES``).
    KEPT = 64

    def __init__(self) -> None:
        self._nodes: dict[int, _Node] = {}
        self._kept: OrderedDict[int, dict[str, Any]] = OrderedDict()

    def add_whole(self, index: int, context: Any) -> None:
        """Call ``index`` stores ``context`` whole (the reader has checked its line's nesting)."""
        if type(context) is not dict:
            raise ValueError("the request's context must be a JSON object")
        problem = _problem(_CONTEXT, context, ())
        if problem is not None:
            raise ValueError(problem)
        messages = context.get("messages")
        self._nodes[index] = _Node(
            context,
            None,
            None,
            len(messages or ()),
            messages is not None,
            0,
            context.get("system_prompt"),
        )

    def add_patch(self, index: int, base: int, ops: Any) -> None:
        """Call ``index`` stores its context as ``ops`` applied to call ``base``'s."""
        base_node = self._nodes.get(base)
        if base_node is None:
            raise ValueError(not_an_earlier_call(base))
        deep = too_deep_operation(ops, _CONTEXT_NESTING)
        if deep is not None:
            raise ValueError(
                f"the context_patch's operation {deep} nests the context deeper than {MAX_NESTING} "
                "levels of objects and arrays (the format's limit)"
            )
        if (
            base_node.has_messages
            and type(ops) is list
            and all(_pushes_a_message(op) for op in ops)
        ):
            for position, op in enumerate(ops):
                problem = _problem(_MESSAGE, op[2], ("messages", base_node.messages + position))
                if problem is not None:
                    raise ValueError(problem)
            count = base_node.messages
            node = self._nodes[index] = _Node(
                None, base, ops, count + len(ops), True, count, base_node.prompt
            )
            node.pushes = True
            return
        try:
            built = apply_patch(self.context(base), ops)
        except PatchError as error:
            raise ValueError(
                f"the context_patch does not apply to call {base}'s context: {error}"
            ) from None
        if type(built) is not dict:
            raise ValueError("the request's context must be a JSON object")
        problem = _changed_problem(built, ops)
        if problem is not None:
            raise ValueError(problem)
        messages = built.get("messages")
        shared = min([base_node.messages, *_touched_indexes(ops, "messages")])
        if _replaced(ops, "messages") or any(not op[1] for op in ops):
            shared = 0  # the list (or the whole context) replaced
        self._nodes[index] = _Node(
            None,
            base,
            ops,
            len(messages or ()),
            messages is not None,
            shared,
            built.get("system_prompt"),
        )
        self._keep(index, built)

    def __contains__(self, index: int) -> bool:
        return index in self._nodes

    def context(self, index: int) -> dict[str, Any]:
        """Call ``index``'s resolved context (read-only: it shares its parts with others)."""
        node = self._nodes[index]
        if node.whole is not None:
            return node.whole  # type: ignore[no-any-return]  # checked to be a dict when added
        kept = self._kept.get(index)
        if kept is not None:
            self._kept.move_to_end(index)
            return kept
        pending: list[int] = []  # the patches to apply, newest first
        current: int | None = index
        value: Any = None
        while current is not None:
            node = self._nodes[current]
            value = node.whole if node.whole is not None else self._kept.get(current)
            if value is not None:
                break
            pending.append(current)
            current = node.base
        for current in reversed(pending):
            value = apply_patch(value, self._nodes[current].ops)  # checked to apply when added
            self._keep(current, value)
        return value  # type: ignore[no-any-return]  # a context: checked when added

    def growth(self, index: int) -> tuple[int | None, int]:
        """``(base, shared)``: the call whose context call ``index``'s was patched from (None
        when it is stored whole) and how many leading messages it shares with it, the very
        same objects."""
        node = self._nodes[index]
        return node.base, node.shared

    def stored(self, index: int) -> tuple[Any, int | None, Any]:
        """How the file stores call ``index``'s context: ``(context, None, None)`` whole, or
        ``(None, BASE, OPS)`` as a patch of call BASE's."""
        node = self._nodes[index]
        return node.whole, node.base, node.ops

    def message_count(self, index: int) -> int:
        """How many messages call ``index``'s context holds, without building it."""
        return self._nodes[index].messages

    def system_prompt(self, index: int) -> Any:
        """Call ``index``'s system prompt, without building its context."""
        return self._nodes[index].prompt

    def messages_from(self, index: int, start: int) -> list[Any]:
        """Call ``index``'s messages from ``start`` on: for a context stored as messages pushed
        onto its base's, taken from the patches without building the context (a view that
        shows a turn's growth costs the growth, not the conversation)."""
        pieces: list[list[Any]] = []
        current = index
        while True:
            node = self._nodes[current]
            if not node.pushes:
                pieces.append((self.context(current).get("messages") or [])[start:])
                break
            base_count = node.messages - len(node.ops)
            pieces.append([op[2] for op in node.ops[max(0, start - base_count) :]])
            if start >= base_count or node.base is None:  # a patch always has its base
                break
            current = node.base
        if len(pieces) == 1:
            return pieces[0]
        return [message for piece in reversed(pieces) for message in piece]

    def _keep(self, index: int, context: dict[str, Any]) -> None:
        kept = self._kept
        kept[index] = context
        kept.move_to_end(index)
        if len(kept) > self.KEPT:
            kept.popitem(last=False)


def _pushes_a_message(op: Any) -> bool:
    return type(op) is list and len(op) == 3 and op[0] == "push" and op[1] == ["messages"]


def _problem(validator: Any, value: Any, where: tuple[Any, ...]) -> str | None:
    """Why ``value`` does not parse with ``validator``, naming the field from the context's root."""
    try:
        validator.validate_python(value)
    except ValidationError as error:
        first = error.errors(include_input=False, include_url=False)[0]
        location = ".".join(str(step) for step in (*where, *first.get("loc", ()))) or "<root>"
        return f"the context does not parse: {location}: {first.get('msg', 'invalid')}"
    return None


def _changed_problem(built: dict[str, Any], ops: list[Any]) -> str | None:
    """Why the parts of ``built`` that ``ops`` (which applied) changed do not parse, or None:
    the base parsed, so nothing else needs checking again."""
    if any(not op[1] for op in ops):
        return _problem(_CONTEXT, built, ())  # the root was replaced
    for field, validator in _LISTS.items():
        if _replaced(ops, field):
            problem = _problem(_CONTEXT, {field: built[field]}, ())
            if problem is not None:
                return problem
            continue
        if not any(op[1][0] == field for op in ops):
            continue
        items = built[field]  # an operation below it applied: a list
        pushed = sum(1 for op in ops if op[1] == [field] and op[0] == "push")
        for index in sorted(
            {*_touched_indexes(ops, field), *range(len(items) - pushed, len(items))}
        ):
            problem = _problem(validator, items[index], (field, index))
            if problem is not None:
                return problem
    if any(op[1][0] == "system_prompt" for op in ops):
        prompt = built.get("system_prompt")
        if prompt is not None and type(prompt) is not str:
            return "the context does not parse: system_prompt: Input should be a valid string"
    return None


def _replaced(ops: list[Any], field: str) -> bool:
    """Whether an operation sets the list ``field`` itself (not a part of it)."""
    return any(op[0] == "set" and op[1] == [field] for op in ops)


def _touched_indexes(ops: list[Any], field: str) -> list[int]:
    """The indexes of the list ``field`` that operations reach below (``[field, I, ...]``)."""
    return [
        op[1][1] for op in ops if len(op[1]) > 1 and op[1][0] == field and type(op[1][1]) is int
    ]
