"""ctxgc: a deterministic context compiler for AI agents.

Long agent sessions pile up dead context: values that were overwritten, tool calls repeated
with the same result, branches the agent abandoned, bulky tool output nobody reads again.
ctxgc removes what is provably dead, with no model call, leaves a receipt for everything it
removes (recoverable byte for byte), and keeps the output valid for the provider's API. The
same input always compiles to the same output.

Chat histories (OpenAI Chat Completions, Anthropic Messages, OpenAI Responses input)::

    >>> import ctxgc
    >>> messages, telemetry = ctxgc.compile_messages([
    ...     {"role": "system", "content": "You are an airline support agent."},
    ...     {"role": "user", "content": "Change the cabin on 0U4NPP, please."},
    ...     {"role": "assistant", "content": 'Done.<contextgc-state>{"assert": {"cabin_class": "business"}}</contextgc-state>'},
    ... ])
    >>> print(messages[1]["content"])
    [ACTIVE_AGENT_STATE]
    - cabin_class = "business" (m2, declared)

In an agent loop, a :class:`Chat` keeps the history compiled between requests, so each
compile costs what was appended (``compile_messages`` compiles the whole history)::

    >>> chat = ctxgc.Chat()
    >>> chat.append({"role": "user", "content": "Move me to business, please."})
    >>> messages, telemetry = chat.compiled()
    >>> len(messages), telemetry["tokens_before"] == telemetry["tokens_after"]
    (1, True)

Structured event traces, single shot or as a live session::

    >>> result = ctxgc.compact_events([
    ...     {"id": "e1", "type": "set_var", "timestamp": 1, "key": "x", "value": 10},
    ...     {"id": "e2", "type": "set_var", "timestamp": 2, "key": "x", "value": 20},
    ... ])
    >>> print(result["prompt"], end="")
    [receipt e1: superseded by e2]
    [e2] x = 20
    >>> result["pruned_ids"]
    ['e1']

Learned tool-output projections (``learn``, ``measure``, ``trim``, ``AutoTrim``) and client
middleware (``wrap(openai.OpenAI())``, ``wrap(anthropic.Anthropic())``) complete the package.
Errors derive from :class:`ctxgc.Error` and carry the messages the ``ctxgc`` command prints.
"""

from __future__ import annotations

from ._errors import ConflictError, Error, ExpandError, InputError, StoreError, UsageError
from ._middleware import (
    call_anthropic_with_compaction,
    call_openai_with_compaction,
    wrap,
)
from ._native import (
    AutoTrim,
    Chat,
    Projection,
    TraceGC,
    __version__,
    compact_events,
    compile,
    compile_messages,
    learn,
    measure,
    receipt,
    report,
    trim,
)

__all__ = [
    "AutoTrim",
    "Chat",
    "ConflictError",
    "Error",
    "ExpandError",
    "InputError",
    "Projection",
    "StoreError",
    "TraceGC",
    "UsageError",
    "__version__",
    "call_anthropic_with_compaction",
    "call_openai_with_compaction",
    "compact_events",
    "compile",
    "compile_messages",
    "learn",
    "measure",
    "receipt",
    "report",
    "trim",
    "wrap",
]
