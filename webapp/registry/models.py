"""Where Django finds the registry's tables: each room keeps its own models beside its code.

Django loads ``<app>.models`` for each installed app; the rooms' model modules are imported
here so every table registers under the app label ``registry`` (the tables, their names and
the migrations stay as they were). Code imports a model from its room, never from here.
"""

from webapp.registry.capture.models import Capture, CaptureCounters, CapturePolicy
from webapp.registry.catalogue.models import LiveModels, Model, ModelTag, Version
from webapp.registry.jobs.models import Event, Job, JobLogLine
from webapp.registry.performance.models import PerfRun, TuningRun
from webapp.registry.serving.models import Canary, NodeServing, ReconcileReport
from webapp.registry.tryit.models import TryExample

__all__ = [
    "Canary",
    "Capture",
    "CaptureCounters",
    "CapturePolicy",
    "Event",
    "Job",
    "JobLogLine",
    "LiveModels",
    "Model",
    "ModelTag",
    "NodeServing",
    "PerfRun",
    "ReconcileReport",
    "TryExample",
    "TuningRun",
    "Version",
]
