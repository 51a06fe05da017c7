"""The default cache key: the pickled input, hashed by the caller."""

from __future__ import annotations

import pickle
from typing import Any


def default_cache_key(*args: Any, **kwargs: Any) -> bytes:
    """Bytes that identify a call's arguments; equal arguments give equal bytes."""
    payload = (args, kwargs)
    try:
        return pickle.dumps(payload, protocol=5)
    except Exception:
        import cloudpickle  # only for arguments plain pickle refuses (lambdas, local classes)

        data: bytes = cloudpickle.dumps(payload, protocol=5)
        return data
