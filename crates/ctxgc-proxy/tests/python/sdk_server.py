"""An MCP server written with the official Python SDK (FastMCP), as most servers are.

Every annotated tool gets an output schema from the SDK:
- ``search_flights -> str``: ``{"result": string}``; the string is JSON text;
- ``find_hotels -> dict[str, Any]``: an open object schema;
- ``get_order -> Order``: a pydantic model's schema, every field required.
Outputs are bulky (fare rules, descriptions, audit trails) and deterministic: the same
arguments give the same bytes.
"""

import hashlib
import json
from typing import Any

from mcp.server.fastmcp import FastMCP
from pydantic import BaseModel

app = FastMCP("python-sdk-travel")

AIRLINES = ["Aer Lingus", "TAP", "Iberia", "SAS", "KLM", "Lufthansa"]
BOILERPLATE = (
    "Changes are permitted up to 24 hours before departure against a fee and any fare "
    "difference; refunds are issued to the original form of payment within 30 days; "
    "no-shows forfeit the full fare; taxes are refundable on request."
)


def seed(*parts: str) -> int:
    return int(hashlib.sha256("|".join(parts).encode()).hexdigest()[:8], 16)


@app.tool()
def search_flights(origin: str, destination: str) -> str:
    """Search flights between two airports; returns JSON text."""
    s = seed(origin, destination)
    flights = []
    for i in range(8):
        n = (s >> i) % 97
        flights.append(
            {
                "id": f"{origin}{destination}{100 + n + i}",
                "airline": AIRLINES[(s + i) % len(AIRLINES)],
                "departure": f"2026-05-{1 + (n % 28):02d}T{6 + i:02d}:15",
                "price": {"amount": f"{89 + n * 3 + i}.00", "currency": "EUR"},
                "fare_rules": f"Fare {i}: {BOILERPLATE}",
                "baggage": {"cabin": "1 x 8kg", "hold": f"{i % 2} x 23kg", "policy": BOILERPLATE},
                "emissions": {"kg_co2": 80 + n, "note": "estimate per passenger, economy"},
            }
        )
    return json.dumps({"origin": origin, "destination": destination, "flights": flights})


@app.tool()
def find_hotels(city: str) -> dict[str, Any]:
    """Find hotels in a city."""
    s = seed(city)
    return {
        "city": city,
        "hotels": [
            {
                "name": f"Hotel {city} {i}",
                "stars": 2 + (s + i) % 4,
                "rate": {"amount": 70 + (s >> i) % 150, "currency": "EUR"},
                "description": f"A hotel in {city}. " + BOILERPLATE,
                "amenities": ["wifi", "breakfast", "gym", "spa", "parking"][: 2 + i % 4],
                "cancellation": BOILERPLATE,
            }
            for i in range(6)
        ],
    }


class Line(BaseModel):
    sku: str
    quantity: int
    unit_price: float
    description: str


class Order(BaseModel):
    order_id: str
    status: str
    total: float
    lines: list[Line]
    audit_trail: list[str]
    terms: str


@app.tool()
def get_order(order_id: str) -> Order:
    """Fetch an order."""
    s = seed(order_id)
    lines = [
        Line(
            sku=f"SKU-{(s >> i) % 1000:03d}",
            quantity=1 + i,
            unit_price=round(9.5 + ((s >> i) % 40), 2),
            description=f"Item {i}. " + BOILERPLATE,
        )
        for i in range(5)
    ]
    return Order(
        order_id=order_id,
        status=["open", "shipped", "delivered"][s % 3],
        total=round(sum(line.unit_price * line.quantity for line in lines), 2),
        lines=lines,
        audit_trail=[f"event {i}: " + BOILERPLATE for i in range(6)],
        terms=BOILERPLATE,
    )


if __name__ == "__main__":
    app.run("stdio")
