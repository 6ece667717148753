"""The common prefix of two strings, written once for every module that needs it."""

from __future__ import annotations

__all__ = ["common_prefix_length"]


def common_prefix_length(a: str, b: str) -> int:
    """The length of the longest common prefix, by halving, so that each step is one C-level
    comparison of a slice: long texts stay cheap."""
    low, high = 0, min(len(a), len(b))
    while low < high:
        middle = (low + high + 1) // 2
        if a[low:middle] == b[low:middle]:
            low = middle
        else:
            high = middle - 1
    return low
