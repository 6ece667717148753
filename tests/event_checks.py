"""Assertions of the event stream contract, shared by every provider's tests."""

from __future__ import annotations


def assert_well_formed(events: list) -> None:
    """Exactly one terminal event, last; blocks open, grow and close in order; every delta's
    partial shows the text so far; snapshots are distinct objects."""
    assert events, "no events"
    terminals = [i for i, e in enumerate(events) if e.type in ("done", "error")]
    assert terminals == [len(events) - 1], f"terminal events at {terminals} of {len(events)}"
    open_blocks: dict[int, str] = {}
    texts: dict[int, str] = {}
    seen_partials: set[int] = set()
    for event in events[:-1]:
        partial = event.partial
        assert id(partial) not in seen_partials, "a partial snapshot object was reused"
        seen_partials.add(id(partial))
        kind = event.type
        if kind == "start":
            assert event is events[0]
            continue
        index = event.content_index
        family, _, phase = kind.rpartition("_")
        if phase == "start":
            assert index not in open_blocks and index not in texts, f"block {index} started twice"
            # in content order; only server tool blocks (which have no events) come between
            after = max(texts) + 1 if texts else 0
            assert index >= after, "blocks must start in content order"
            between = partial.content[after:index]
            assert all(b.type == "serverTool" for b in between), (
                "blocks must start in content order"
            )
            open_blocks[index] = family
            texts[index] = ""
        elif phase == "delta":
            assert open_blocks.get(index) == family, f"{kind} for a block that is not open"
            texts[index] += event.delta
            block = partial.content[index]
            if family == "text":
                assert block.text == texts[index]
            elif family == "thinking":
                assert block.thinking == texts[index]
        else:
            assert open_blocks.pop(index, None) == family, f"{kind} for a block that is not open"
            if family in ("text", "thinking"):
                assert event.content == texts[index]
    final = events[-1]
    message = final.message if final.type == "done" else final.error
    if final.type == "done":
        assert not open_blocks, f"blocks left open: {open_blocks}"
        assert message.stop_reason == final.reason
    else:
        assert message.stop_reason == final.reason
        assert message.error_message


def final_message(events: list):
    last = events[-1]
    return last.message if last.type == "done" else last.error
