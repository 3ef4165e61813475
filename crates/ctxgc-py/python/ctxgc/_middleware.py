"""Client middleware: histories compiled before they are sent, for the official OpenAI and
Anthropic SDKs (sync, async and streaming), and TraceGC-style one-call helpers.

Neither SDK is a dependency: nothing here imports ``openai`` or ``anthropic`` until a helper
that creates a client is called, and :func:`wrap` recognises clients by their type alone.
"""

from __future__ import annotations

import asyncio
import os
import threading
from collections import OrderedDict
from typing import Any, Callable

from ._native import Chat, compile_messages

__all__ = ["wrap", "call_openai_with_compaction", "call_anthropic_with_compaction"]

#: The keyword that turns compilation off for one request: ``create(..., ctxgc=False)``.
BYPASS = "ctxgc"


#: Conversations a wrapped client keeps compiled at once (the least recently used goes first).
LIVE_CONVERSATIONS = 32


class _Compiler:
    """Compiles the history of one request and remembers the last telemetry.

    Each conversation is kept compiled in a :class:`ctxgc.Chat`, found by the first message
    object of its history: a loop that appends to its history and sends it again pays for
    the new messages only."""

    def __init__(self, preset: str, options: dict[str, Any], on_compile: Callable[[dict], None] | None):
        self.preset = preset
        self.options = options
        self.on_compile = on_compile
        self.last_telemetry: dict[str, Any] | None = None
        self._chats: OrderedDict[tuple[str, int], Chat] = OrderedDict()
        self._lock = threading.Lock()

    def _compile(self, messages: list, fmt: str, system: Any = None) -> tuple[Any, dict[str, Any]]:
        key = (fmt, id(messages[0]))
        with self._lock:
            chat = self._chats.pop(key, None)
            if chat is None:
                chat = Chat(preset=self.preset, format=fmt, **self.options)
            self._chats[key] = chat
            while len(self._chats) > LIVE_CONVERSATIONS:
                self._chats.popitem(last=False)
            # Chat.compile() checks that the list is the one it saw with messages added;
            # any other list (an id reused, a history edited) is compiled afresh.
            return chat.compile(messages, system=system)

    def _done(self, telemetry: dict[str, Any]) -> None:
        self.last_telemetry = telemetry
        if self.on_compile is not None:
            self.on_compile(telemetry)

    def openai_chat(self, kwargs: dict[str, Any]) -> dict[str, Any]:
        if not kwargs.pop(BYPASS, True):
            return kwargs
        messages = kwargs.get("messages")
        if isinstance(messages, (list, tuple)) and messages:
            compiled, telemetry = self._compile(list(messages), "openai-chat")
            kwargs["messages"] = compiled
            self._done(telemetry)
        return kwargs

    def openai_responses(self, kwargs: dict[str, Any]) -> dict[str, Any]:
        if not kwargs.pop(BYPASS, True):
            return kwargs
        items = kwargs.get("input")
        if isinstance(items, (list, tuple)) and items:
            compiled, telemetry = self._compile(list(items), "responses")
            kwargs["input"] = compiled
            self._done(telemetry)
        return kwargs

    def anthropic(self, kwargs: dict[str, Any]) -> dict[str, Any]:
        if not kwargs.pop(BYPASS, True):
            return kwargs
        messages = kwargs.get("messages")
        if not (isinstance(messages, (list, tuple)) and messages):
            return kwargs
        system = kwargs.get("system")
        if not isinstance(system, (str, list, tuple)):
            system = None  # absent, or the SDK's NOT_GIVEN sentinel
        compiled, telemetry = self._compile(list(messages), "anthropic", system)
        kwargs["messages"] = compiled
        if "system" in telemetry:
            # The register is a block of the top-level system prompt.
            kwargs["system"] = telemetry["system"]
        self._done(telemetry)
        return kwargs


class _Proxy:
    """Forwards every attribute it does not define to the wrapped object."""

    def __init__(self, target: Any) -> None:
        object.__setattr__(self, "_target", target)

    def __getattr__(self, name: str) -> Any:
        return getattr(object.__getattribute__(self, "_target"), name)

    def __repr__(self) -> str:
        return f"ctxgc.wrap({object.__getattribute__(self, '_target')!r})"


class _Endpoint(_Proxy):
    """A resource whose ``create``/``stream``/``parse`` take a history: each compiles it first."""

    def __init__(self, target: Any, rewrite: Callable[[dict], dict], is_async: bool) -> None:
        super().__init__(target)
        object.__setattr__(self, "_rewrite", rewrite)
        object.__setattr__(self, "_is_async", is_async)

    def _call(self, method: str, args: tuple, kwargs: dict) -> Any:
        original = getattr(object.__getattribute__(self, "_target"), method)
        rewrite = object.__getattribute__(self, "_rewrite")
        if object.__getattribute__(self, "_is_async") and method != "stream":
            async def compiled_call() -> Any:
                # Compiling releases the GIL: in a worker thread it leaves the loop running.
                new_kwargs = await asyncio.to_thread(rewrite, dict(kwargs))
                return await original(*args, **new_kwargs)

            return compiled_call()
        # `stream()` returns a context manager (async or not), so it compiles right away.
        return original(*args, **rewrite(dict(kwargs)))

    def create(self, *args: Any, **kwargs: Any) -> Any:
        """The SDK's ``create``, with the history compiled first (``ctxgc=False`` skips it)."""
        return self._call("create", args, kwargs)

    def stream(self, *args: Any, **kwargs: Any) -> Any:
        """The SDK's ``stream`` helper, with the history compiled first."""
        return self._call("stream", args, kwargs)

    def parse(self, *args: Any, **kwargs: Any) -> Any:
        """The SDK's ``parse`` (structured outputs), with the history compiled first."""
        return self._call("parse", args, kwargs)


class _Namespace(_Proxy):
    """``client.chat`` or ``client.beta``: gives wrapped endpoints for named children."""

    def __init__(self, target: Any, children: dict[str, Callable[[Any], Any]]) -> None:
        super().__init__(target)
        object.__setattr__(self, "_children", children)

    def __getattr__(self, name: str) -> Any:
        value = getattr(object.__getattribute__(self, "_target"), name)
        child = object.__getattribute__(self, "_children").get(name)
        return child(value) if child is not None else value


class WrappedClient(_Proxy):
    """An OpenAI or Anthropic client whose requests carry compiled histories. Everything
    else is the client's own; ``last_telemetry`` is the report of the latest compile."""

    def __init__(self, client: Any, compiler: _Compiler, provider: str) -> None:
        super().__init__(client)
        object.__setattr__(self, "_compiler", compiler)
        object.__setattr__(self, "_provider", provider)
        is_async = type(client).__name__.startswith("Async")
        if provider == "openai":
            chat = lambda c: _Namespace(c, {"completions": lambda e: _Endpoint(e, compiler.openai_chat, is_async)})
            children = {
                "chat": chat,
                "responses": lambda e: _Endpoint(e, compiler.openai_responses, is_async),
                "beta": lambda b: _Namespace(b, {"chat": chat}),
            }
        else:
            messages = lambda e: _Endpoint(e, compiler.anthropic, is_async)
            children = {"messages": messages, "beta": lambda b: _Namespace(b, {"messages": messages})}
        object.__setattr__(self, "_children", children)

    def __getattr__(self, name: str) -> Any:
        value = getattr(object.__getattribute__(self, "_target"), name)
        child = object.__getattribute__(self, "_children").get(name)
        return child(value) if child is not None else value

    @property
    def last_telemetry(self) -> dict[str, Any] | None:
        """The telemetry of the latest compiled request (None before the first)."""
        return object.__getattribute__(self, "_compiler").last_telemetry

    @property
    def unwrapped(self) -> Any:
        """The client as it was given."""
        return object.__getattribute__(self, "_target")

    def with_options(self, *args: Any, **kwargs: Any) -> "WrappedClient":
        """The client's ``with_options``, still wrapped."""
        client = object.__getattribute__(self, "_target").with_options(*args, **kwargs)
        return WrappedClient(
            client, object.__getattribute__(self, "_compiler"), object.__getattribute__(self, "_provider")
        )


def _provider_of(client: Any) -> str | None:
    for cls in type(client).__mro__:
        root = cls.__module__.split(".")[0]
        if root in ("openai", "anthropic"):
            return root
    return None


def wrap(
    client: Any,
    preset: str = "cache-stable",
    *,
    on_compile: Callable[[dict[str, Any]], None] | None = None,
    **options: Any,
) -> WrappedClient:
    """Returns ``client`` with every request's history compiled before it is sent.

    Works with ``openai.OpenAI`` / ``AsyncOpenAI`` (``chat.completions.create``, ``stream``
    and ``parse``, ``responses.create``) and ``anthropic.Anthropic`` / ``AsyncAnthropic``
    (``messages.create`` and ``messages.stream``); streaming passes through unchanged. The
    client itself is not modified. ``options`` are those of :func:`ctxgc.compile_messages`
    (``schema``, ``keep_tools``, ``expand_tool``, ...); ``create(..., ctxgc=False)`` sends
    one request as it is. The telemetry of the latest compile is ``last_telemetry``, and
    ``on_compile(telemetry)`` is called after each compile. Each conversation stays
    compiled between requests (a :class:`ctxgc.Chat` per history, up to
    ``LIVE_CONVERSATIONS``), so a request costs what its history added; its telemetry holds
    the counts and retired turns (``Chat.report()`` has the decisions). As the gateway does,
    it compiles ``cache-stable`` unless ``preset`` says otherwise: what was sent stays a
    byte-identical prefix of the next request, and history is compacted only in steps that
    pay for themselves under the provider's prompt cache, so turning it on never makes a
    request's history cost more; ``preset="default"`` takes every decision at once.

    Example::

        import openai, ctxgc
        client = ctxgc.wrap(openai.OpenAI())
        reply = client.chat.completions.create(model="gpt-4o-mini", messages=history)
        print(client.last_telemetry["tokens_saved"])
    """
    provider = _provider_of(client)
    if provider is None:
        raise TypeError(
            f"wrap() takes an openai or anthropic client, not {type(client).__module__}.{type(client).__name__}"
        )
    # Bad options (an unknown preset, a schema that does not parse) fail here, not mid-loop.
    compile_messages([{"role": "user", "content": "."}], preset, format="openai-chat", **options)
    return WrappedClient(client, _Compiler(preset, options, on_compile), provider)


def _metrics(compaction: dict[str, Any], input_tokens: int | None, output_tokens: int | None) -> dict[str, Any]:
    return {
        "input_tokens": input_tokens,
        "output_tokens": output_tokens,
        "tokens_before": compaction["tokens_before"],
        "tokens_after": compaction["tokens_after"],
    }


def call_openai_with_compaction(
    tracegc: Any,
    model: str,
    user_message: str,
    api_key: str | None = None,
    *,
    client: Any = None,
    base_url: str | None = None,
    **create_options: Any,
) -> dict[str, Any]:
    """Compacts ``tracegc`` (a :class:`ctxgc.TraceGC`) and asks an OpenAI chat model, with
    the compacted prompt as the system message and ``user_message`` as the user turn.

    Returns ``{"response_text", "metrics": {"input_tokens", "output_tokens",
    "tokens_before", "tokens_after"}, "pruned_ids", "response"}``. ``client`` (an
    ``openai.OpenAI``) is used when given; otherwise one is made from ``api_key`` (else
    ``$OPENAI_API_KEY``) and ``base_url``. ``openai`` is imported only then.
    """
    compaction = tracegc.compact()
    if client is None:
        import openai

        client = openai.OpenAI(api_key=api_key or os.environ.get("OPENAI_API_KEY"), base_url=base_url)
    response = client.chat.completions.create(
        model=model,
        messages=[
            {"role": "system", "content": compaction["prompt"]},
            {"role": "user", "content": user_message},
        ],
        **create_options,
    )
    usage = getattr(response, "usage", None)
    return {
        "response_text": response.choices[0].message.content,
        "metrics": _metrics(
            compaction,
            getattr(usage, "prompt_tokens", None),
            getattr(usage, "completion_tokens", None),
        ),
        "pruned_ids": compaction["pruned_ids"],
        "response": response,
    }


def call_anthropic_with_compaction(
    tracegc: Any,
    model: str,
    user_message: str,
    api_key: str | None = None,
    *,
    client: Any = None,
    base_url: str | None = None,
    max_tokens: int = 1024,
    **create_options: Any,
) -> dict[str, Any]:
    """As :func:`call_openai_with_compaction`, through the Anthropic Messages API (the
    compacted prompt is the ``system`` prompt); ``anthropic`` is imported only when no
    ``client`` is given."""
    compaction = tracegc.compact()
    if client is None:
        import anthropic

        client = anthropic.Anthropic(api_key=api_key or os.environ.get("ANTHROPIC_API_KEY"), base_url=base_url)
    response = client.messages.create(
        model=model,
        max_tokens=max_tokens,
        system=compaction["prompt"],
        messages=[{"role": "user", "content": user_message}],
        **create_options,
    )
    text = "".join(getattr(block, "text", "") for block in response.content)
    usage = getattr(response, "usage", None)
    return {
        "response_text": text,
        "metrics": _metrics(
            compaction,
            getattr(usage, "input_tokens", None),
            getattr(usage, "output_tokens", None),
        ),
        "pruned_ids": compaction["pruned_ids"],
        "response": response,
    }
