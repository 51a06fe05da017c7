"""An exchange rate is fetched, then an invoice is converted with it."""

from typing import Any

import httpx

from pregelkit.checkpoint.memory import InMemorySaver
from pregelkit.func import entrypoint, task


@task
def fetch_invoice(invoice_id: str) -> dict[str, Any]:
    return httpx.get(f"https://billing.example/invoices/{invoice_id}").json()


@entrypoint(checkpointer=InMemorySaver())
def convert(invoice_id: str) -> float:
    invoice = fetch_invoice(invoice_id).result()
    # fetched again on every replay: the rate moves between the runs
    rate = httpx.get("https://rates.example/EUR").json()["rate"]  # expect: PK003
    return float(invoice["amount"]) * float(rate)
