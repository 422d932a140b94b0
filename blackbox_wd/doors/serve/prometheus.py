"""The server's Prometheus metrics, in a registry of its own (several apps can live in one process)."""

from __future__ import annotations

from dataclasses import dataclass

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Gauge, Histogram, generate_latest

# Stages timed per request: the target's answer, the K scoring samples, the wait in the teacher
# queue, exact OT and the whole request; "teacher" is timed per pass.
STAGES = ("answer", "sample", "queue", "teacher", "transport", "request")
SECONDS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0)
BATCH = (1, 2, 4, 8, 16, 32, 64, 128)


@dataclass
class Metrics:
    """Requests by route and status, errors by kind, stage latencies, teacher batch sizes, queue depth."""

    registry: CollectorRegistry
    requests: Counter
    errors: Counter
    stage_seconds: Histogram
    teacher_batch: Histogram
    queue_depth: Gauge

    @classmethod
    def create(cls) -> Metrics:
        """Fresh metrics in a new registry."""
        reg = CollectorRegistry()
        return cls(
            registry=reg,
            requests=Counter(
                "bbwd_requests", "HTTP requests answered, by route and status.", ["route", "status"], registry=reg
            ),
            errors=Counter("bbwd_errors", "Failed requests by kind of error.", ["kind"], registry=reg),
            stage_seconds=Histogram(
                "bbwd_stage_seconds",
                "Seconds per stage (teacher: per pass; others: per request).",
                ["stage"],
                buckets=SECONDS,
                registry=reg,
            ),
            teacher_batch=Histogram(
                "bbwd_teacher_batch_requests", "Requests scored by one teacher pass.", buckets=BATCH, registry=reg
            ),
            queue_depth=Gauge("bbwd_queue_depth", "Requests waiting for a teacher pass.", registry=reg),
        )

    def observe(self, stage: str, seconds: float) -> None:
        """Record the seconds one stage took."""
        self.stage_seconds.labels(stage).observe(seconds)

    def render(self) -> tuple[bytes, str]:
        """The text exposition format and its content type."""
        return generate_latest(self.registry), CONTENT_TYPE_LATEST
