"""Stand-ins for prometheus-client's ``Counter`` and ``Gauge`` where it is not installed
(it comes with the ``serve`` extra, whose ``/metrics`` exports them): they take the same
calls and keep nothing."""

from __future__ import annotations

from typing import Any


class _Metric:
    def __init__(self, name: str, documentation: str, labelnames: Any = (),
                 **_options: Any) -> None:
        self._name = name

    def labels(self, *_values: Any, **_labels: Any) -> _Metric:
        return self

    def inc(self, amount: float = 1) -> None:
        pass

    def dec(self, amount: float = 1) -> None:
        pass

    def set(self, value: float) -> None:
        pass

    def collect(self) -> list[Any]:
        return []


Counter = _Metric
Gauge = _Metric
