"""The exceptions ctxgc raises. Their messages are the ones the ``ctxgc`` command prints.

Every one derives from :class:`Error`, so ``except ctxgc.Error`` catches all of them.
"""

from __future__ import annotations

__all__ = ["Error", "InputError", "UsageError", "ConflictError", "StoreError", "ExpandError"]


class Error(Exception):
    """Base class of every ctxgc error."""


class InputError(Error, ValueError):
    """The input is invalid: malformed JSON, a missing or mistyped field, a value JSON
    cannot hold. The message names the item, the field and the problem (the ``ctxgc``
    command exits with code 1 on these)::

        >>> import ctxgc
        >>> try:
        ...     ctxgc.compact_events([{"id": "e1", "type": "file_read", "timestamp": 1}])
        ... except ctxgc.InputError as e:
        ...     print(e)
        1 invalid item(s):
          item 0 (id "e1"): field "path": missing required field
    """


class UsageError(Error, ValueError):
    """A request that cannot be met: an unknown preset, format or tokenizer, an id that
    names no item (the ``ctxgc`` command exits with code 2 on these)."""


class ConflictError(Error):
    """Another writer appended to a stored session first; nothing was written (the
    ``ctxgc`` command exits with code 3 on these)."""


class StoreError(Error):
    """The database could not be opened, read or written."""


class ExpandError(Error, LookupError):
    """``expand`` could not answer: an unknown reference or field, or bad arguments. The
    message is written for the agent to act on."""
