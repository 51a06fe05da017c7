"""A graph of nodes over a shared state, as built with LangGraph's StateGraph."""

from typing import Any, TypedDict

import requests
from langgraph.graph import END, START, StateGraph


class State(TypedDict):
    messages: list[str]
    approved: bool


def call_model(state: State) -> State:
    # changes the checkpointed state in place instead of returning an update
    state["messages"].append("model reply")  # expect: PK005
    return state


def notify(state: State) -> dict[str, Any]:
    # posted again whenever this step is replayed
    requests.post("https://hooks.example/notify", json=state["messages"])  # expect: PK003
    return {}


def route(state: State) -> str:
    return "notify" if state["approved"] else END


builder = StateGraph(State)
builder.add_node("call_model", call_model)
builder.add_node(notify)
builder.add_edge(START, "call_model")
builder.add_conditional_edges("call_model", route)
graph = builder.compile()
