"""Deprecation warnings under LangGraph's class names, so code that filters or
tests for them (``pytest.warns(LangGraphDeprecatedSinceV10)``,
``warnings.simplefilter("error", LangGraphDeprecationWarning)``) works
unchanged. Each is a ``DeprecationWarning``."""

from __future__ import annotations

__all__ = [
    "LangGraphDeprecatedSinceV05",
    "LangGraphDeprecatedSinceV10",
    "LangGraphDeprecatedSinceV11",
    "LangGraphDeprecationWarning",
]


class LangGraphDeprecationWarning(DeprecationWarning):
    """Something that still works but will go: ``since`` is the LangGraph
    version that deprecated it, ``expected_removal`` the one that removes it
    (the next major one unless said)."""

    message: str
    since: tuple[int, int]
    expected_removal: tuple[int, int]

    def __init__(
        self,
        message: str,
        *args: object,
        since: tuple[int, int],
        expected_removal: tuple[int, int] | None = None,
    ) -> None:
        super().__init__(message, *args)
        self.message = message.rstrip(".")
        self.since = since
        self.expected_removal = expected_removal or (since[0] + 1, 0)

    def __str__(self) -> str:
        (since_major, since_minor), (gone_major, gone_minor) = self.since, self.expected_removal
        return (
            f"{self.message}. Deprecated in LangGraph V{since_major}.{since_minor} "
            f"to be removed in V{gone_major}.{gone_minor}."
        )


class LangGraphDeprecatedSinceV05(LangGraphDeprecationWarning):
    """Deprecated since LangGraph 0.5; goes in 2.0."""

    def __init__(self, message: str, *args: object) -> None:
        super().__init__(message, *args, since=(0, 5), expected_removal=(2, 0))


class LangGraphDeprecatedSinceV10(LangGraphDeprecationWarning):
    """Deprecated since LangGraph 1.0; goes in 2.0."""

    def __init__(self, message: str, *args: object) -> None:
        super().__init__(message, *args, since=(1, 0), expected_removal=(2, 0))


class LangGraphDeprecatedSinceV11(LangGraphDeprecationWarning):
    """Deprecated since LangGraph 1.1; goes in 3.0."""

    def __init__(self, message: str, *args: object) -> None:
        super().__init__(message, *args, since=(1, 1), expected_removal=(3, 0))
