"""Type stubs of the native module; import these names from ``ctxgc``."""

import os
from typing import Any, Literal, Mapping, Sequence

__version__: str

Preset = Literal["lossless", "default", "aggressive", "cache-stable", "eager"]
ChatFormat = Literal["openai-chat", "anthropic", "responses"]
InputFormat = Literal["events", "openai-chat", "anthropic", "responses", "tracetrim"]
TokenizerName = Literal["o200k_base", "cl100k_base"]
JSON = Any
Message = Mapping[str, Any]
Event = Mapping[str, Any]
Trace = str | os.PathLike[str] | Sequence[Message] | Mapping[str, Any]

def compile_messages(
    messages: Sequence[Message] | Mapping[str, Any] | str,
    preset: Preset = "default",
    schema: Mapping[str, Any] | str | os.PathLike[str] | None = None,
    *,
    system: str | Sequence[Mapping[str, Any]] | None = None,
    format: ChatFormat | None = None,
    to: ChatFormat | None = None,
    tokenizer: TokenizerName = "o200k_base",
    schema_policy: Literal["flag", "reject", "off"] = "flag",
    keep_tools: Sequence[str] | None = None,
    expand_tool: str | None = None,
    max_rows: int | None = None,
    keep_rows: int | None = None,
    max_lines: int | None = None,
    safety_words: Sequence[str] | None = None,
    max_keys: int = 64,
    max_value_chars: int = 256,
) -> tuple[Any, dict[str, Any]]:
    """Compiles a chat history; returns ``(messages, telemetry)``.

    ``messages`` is an OpenAI Chat Completions or Anthropic Messages list (with the
    Anthropic system prompt as ``system=``), a Responses input list, or a whole request
    dict (then a dict of the same shape comes back). The telemetry is the report of
    ``ctxgc compile --json`` (``tokens_before``, ``tokens_after``, ``decisions``,
    ``receipts``, ``chat``: register, declarations, validation, ...) plus contextgc's
    names (``raw_token_count``, ``compiled_token_count``, ``tokens_saved``,
    ``compression_ratio_pct``, ``retired_turn_indices``, ...) and, for Anthropic, the
    ``system`` prompt to send.

    >>> msgs, t = compile_messages([{"role": "user", "content": "hi"}])
    >>> t["tokens_before"] == t["tokens_after"]
    True
    """

def compile(
    input: Any,
    preset: Preset = "default",
    schema: Mapping[str, Any] | str | os.PathLike[str] | None = None,
    *,
    format: InputFormat | None = None,
    to: ChatFormat | None = None,
    tokenizer: TokenizerName = "o200k_base",
    schema_policy: Literal["flag", "reject", "off"] = "flag",
    keep_tools: Sequence[str] | None = None,
    expand_tool: str | None = None,
    max_rows: int | None = None,
    keep_rows: int | None = None,
    max_lines: int | None = None,
    safety_words: Sequence[str] | None = None,
    max_keys: int = 64,
    max_value_chars: int = 256,
    protect_importance: float = 8.0,
    protect_tags: Sequence[str] | None = None,
    allow_unknown: bool = False,
) -> dict[str, Any]:
    """Compiles any input ctxgc reads (a Python value or JSON/JSONL text) and returns the
    report ``ctxgc compile --json`` prints, with the compiled ``output`` as text."""

def receipt(
    input: Any,
    id: str,
    *,
    preset: Preset = "default",
    format: InputFormat | None = None,
    tokenizer: TokenizerName = "o200k_base",
) -> dict[str, Any]:
    """``{"id", "original", "decision"}``: the original of item ``id``, byte for byte."""

def compact_events(
    events: Sequence[Event] | Mapping[str, Any] | str,
    *,
    protect_importance: float = 8.0,
    protect_tags: Sequence[str] | None = None,
    allow_unknown: bool = False,
    tokenizer: TokenizerName = "o200k_base",
) -> dict[str, Any]:
    """Compacts a whole event trace. Returns ``prompt``, ``tokens_before``,
    ``tokens_after``, ``pruned_ids``, ``receipts`` (each with the original ``event``),
    ``compact_events``, ``protected_ids``, ``decisions`` and ``warnings``."""

class Chat:
    """A chat history kept compiled between requests: ``append``/``extend`` messages as they
    happen, ``compiled()`` before each request; or ``compile(history)`` with the whole list,
    which recognises the list it saw last with messages added. Each call costs what was
    added. Results equal ``compile_messages`` of the whole history; the telemetry holds the
    counts and retired turns (``report()`` gives the full one). The options are those of
    ``compile_messages``. Message dicts in results are shared
    with later results: copy one before changing it.

    >>> chat = Chat([{"role": "user", "content": "hi"}])
    >>> chat.append({"role": "assistant", "content": "Hello!"})
    >>> [m["role"] for m in chat.compiled()[0]]
    ['user', 'assistant']
    """

    def __init__(
        self,
        messages: Sequence[Message] | None = None,
        preset: Preset = "default",
        schema: Mapping[str, Any] | str | os.PathLike[str] | None = None,
        *,
        system: str | Sequence[Mapping[str, Any]] | None = None,
        format: ChatFormat | None = None,
        to: ChatFormat | None = None,
        tokenizer: TokenizerName = "o200k_base",
        schema_policy: Literal["flag", "reject", "off"] = "flag",
        keep_tools: Sequence[str] | None = None,
        expand_tool: str | None = None,
        max_rows: int | None = None,
        keep_rows: int | None = None,
        max_lines: int | None = None,
        safety_words: Sequence[str] | None = None,
        max_keys: int = 64,
        max_value_chars: int = 256,
    ) -> None: ...
    def append(self, message: Message) -> None: ...
    def extend(self, messages: Sequence[Message]) -> None: ...
    def compiled(self) -> tuple[list[Any], dict[str, Any]]: ...
    def compile(
        self, messages: Sequence[Message], *, system: str | Sequence[Mapping[str, Any]] | None = None
    ) -> tuple[list[Any], dict[str, Any]]: ...
    def report(self) -> dict[str, Any]: ...
    def __len__(self) -> int: ...

class TraceGC:
    """An agent's event history: ``add_event`` as events happen, ``compact()`` on demand.
    In memory by default; ``db="ctxgc.db"`` or ``db="postgres://..."`` stores it."""

    def __init__(
        self,
        db: str | os.PathLike[str] | None = None,
        context_id: str | None = None,
        *,
        protect_importance: float = 8.0,
        protect_tags: Sequence[str] | None = None,
        allow_unknown: bool = False,
        tokenizer: TokenizerName = "o200k_base",
    ) -> None: ...
    def add_event(self, event: Event | str) -> None: ...
    def add_events(self, events: Sequence[Event | str]) -> None: ...
    def compact(self) -> dict[str, Any]: ...
    def get_receipt(self, id: str, *, raw: bool = False) -> Any: ...
    def decision(self, id: str) -> dict[str, Any]: ...
    @property
    def events(self) -> list[dict[str, Any]]: ...
    @property
    def context_id(self) -> str: ...
    @property
    def db(self) -> str | None: ...
    def __len__(self) -> int: ...

class Projection:
    """A learned projection: per tool, the fields kept and dropped."""

    @staticmethod
    def from_json(text: str) -> Projection: ...
    @staticmethod
    def load(path: str | os.PathLike[str]) -> Projection: ...
    def to_json(self) -> str: ...
    def save(self, path: str | os.PathLike[str]) -> None: ...
    def apply(self, tool: str, output: Any, *, error: bool = False) -> str: ...
    def trim(self, tool: str, output: Any, *, error: bool = False) -> dict[str, Any]: ...
    def to_dict(self) -> dict[str, Any]: ...
    @property
    def trimmed_tools(self) -> list[str]: ...

def learn(
    traces: Trace | Sequence[Trace],
    *,
    format: InputFormat | None = None,
    tokenizer: TokenizerName = "o200k_base",
    min_calls: int | None = None,
    min_runs: int | None = None,
    max_used_share: float = 0.0,
    min_saving_tokens: int | None = None,
    keep_identifying: bool = True,
    drop_whole_text: bool = False,
    tables: bool = False,
    count_known_values: bool = False,
) -> Projection: ...
def measure(
    traces: Trace | Sequence[Trace],
    *,
    format: InputFormat | None = None,
    tokenizer: TokenizerName = "o200k_base",
    min_calls: int | None = None,
    min_runs: int | None = None,
    max_used_share: float = 0.0,
    min_saving_tokens: int | None = None,
    keep_identifying: bool = True,
    drop_whole_text: bool = False,
    tables: bool = False,
    count_known_values: bool = False,
) -> dict[str, Any]: ...
def report(
    traces: Trace | Sequence[Trace],
    *,
    title: str | None = None,
    html: str | os.PathLike[str] | None = None,
    format: InputFormat | None = None,
    tokenizer: TokenizerName = "o200k_base",
) -> dict[str, Any]: ...
def trim(
    projection: Projection | str | os.PathLike[str],
    tool: str,
    output: Any,
    *,
    error: bool = False,
) -> dict[str, Any]: ...

class AutoTrim:
    """Automatic mode: observe the first runs, learn, then trim; ``expand`` gives back."""

    def __init__(
        self,
        workdir: str | os.PathLike[str] | None = None,
        *,
        min_runs: int = 5,
        max_expand_share: float = 0.25,
        min_trimmed_to_judge: int = 4,
        tokenizer: TokenizerName = "o200k_base",
    ) -> None: ...
    def output(self, tool: str, *args: Any, turn: int | None = None) -> str:
        """``output(tool, result)`` or ``output(tool, arguments, result)``."""
    def expand(self, reference: str | Mapping[str, Any], fields: Sequence[str] | None = None) -> str: ...
    def done(self, answer: str) -> dict[str, Any]: ...
    def end_without_answer(self) -> dict[str, Any]: ...
    def prompt(self, text: str) -> None: ...
    def user(self, text: str) -> None: ...
    def message(self, text: str) -> None: ...
    @property
    def expand_tool(self) -> dict[str, Any]: ...
    @property
    def report(self) -> dict[str, Any]: ...
    def report_html(self) -> str: ...
    @property
    def is_trimming(self) -> bool: ...
    @property
    def runs_learned(self) -> int: ...
    @property
    def projection(self) -> Projection | None: ...
    @property
    def disabled_tools(self) -> dict[str, str]: ...
    @property
    def tool_stats(self) -> dict[str, Any]: ...
    def state_json(self) -> str: ...
    @property
    def workdir(self) -> str | None: ...
