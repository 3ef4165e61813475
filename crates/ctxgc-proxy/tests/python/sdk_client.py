"""The agent side, with the official Python SDK's client: it validates every structured
result against the output schema the proxy published, as MCP clients do.

usage: sdk_client.py PROXY_URL TOKEN SERVER_SCRIPT RUNS
Runs RUNS runs through the proxy (three tools each, then the done tool with an answer that
reuses a few fields), expands every trimmed output of the last run, fetches the same outputs
straight from the server, and prints one JSON report on stdout.
"""

import asyncio
import json
import sys

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamablehttp_client

CITIES = ["Lisbon", "Oslo", "Madrid", "Vienna", "Dublin"]
AIRPORTS = ["DUB", "LIS", "MAD", "OSL", "CPH", "VIE"]


def calls(run):
    return [
        ("search_flights", {"origin": AIRPORTS[run % 6], "destination": AIRPORTS[(run + 2) % 6]}),
        ("find_hotels", {"city": CITIES[run % 5]}),
        ("get_order", {"order_id": f"A-{1000 + run}"}),
    ]


def body(text):
    return json.loads(text.split("\n[hidden: ")[0])


def answer(outputs):
    flights = body(outputs[0]["text"])["flights"]
    hotels = body(outputs[1]["text"])["hotels"]
    order = body(outputs[2]["text"])
    # Trimmed outputs hold only what earlier answers used: read with defaults.
    flight, hotel = flights[1], hotels[0]
    return (
        f"Fly {flight.get('id')} with {flight.get('airline')} "
        f"for {flight.get('price', {}).get('amount')} EUR; "
        f"stay at {hotel.get('name')} for {hotel.get('rate', {}).get('amount')} EUR; "
        f"order {order.get('order_id')} totals {order.get('total')}."
    )


def text_of(result):
    return "\n".join(block.text for block in result.content if block.type == "text")


async def through_proxy(url, token, runs):
    report = {"runs": []}
    headers = {"Authorization": f"Bearer {token}"}
    async with streamablehttp_client(url, headers=headers) as (read, write, _):
        async with ClientSession(read, write) as session:
            await session.initialize()
            listed = await session.list_tools()
            report["schemas"] = {tool.name: tool.outputSchema for tool in listed.tools}
            for run in range(runs):
                outputs = []
                for name, arguments in calls(run):
                    # Raises when the structured content breaks the published schema.
                    result = await session.call_tool(name, arguments)
                    if result.isError:
                        raise SystemExit(f"{name} failed: {text_of(result)}")
                    outputs.append(
                        {
                            "tool": name,
                            "arguments": arguments,
                            "text": text_of(result),
                            "structured": result.structuredContent,
                        }
                    )
                done = await session.call_tool("ctxgc_done", {"answer": answer(outputs)})
                if done.isError:
                    raise SystemExit(f"ctxgc_done failed: {text_of(done)}")
                report["runs"].append(outputs)
            for output in report["runs"][-1]:
                text = output["text"]
                if "expand ref \"" in text:
                    reference = text.split("expand ref \"")[1].split('"')[0]
                    expanded = await session.call_tool("expand", {"ref": reference, "fields": ["*"]})
                    output["expanded"] = text_of(expanded)
    return report


async def direct(server, outputs):
    params = StdioServerParameters(command=sys.executable, args=[server])
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write) as session:
            await session.initialize()
            for output in outputs:
                result = await session.call_tool(output["tool"], output["arguments"])
                output["direct_text"] = text_of(result)
                output["direct_structured"] = result.structuredContent


async def main():
    url, token, server, runs = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    report = await through_proxy(url, token, runs)
    await direct(server, report["runs"][-1])
    print(json.dumps(report))


if __name__ == "__main__":
    asyncio.run(main())
