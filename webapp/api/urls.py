from django.urls import path

from webapp.api import diagnostics, metrics, serving, tryit, versions, views
from webapp.api.memory import memory_estimate_view

urlpatterns = [
    path("health", views.health, name="api-health"),
    path("health/live", views.health_live, name="api-health-live"),
    path("server", views.server, name="api-server"),
    path("devices", views.devices, name="api-devices"),
    path("diagnostics", diagnostics.diagnostics, name="api-diagnostics"),
    path("targets", versions.targets, name="api-targets"),
    path("models", views.models, name="api-models"),
    path("models/<str:name>", views.model_detail, name="api-model"),
    path("models/<str:name>/versions", versions.versions, name="api-versions"),
    path("models/<str:name>/versions/<int:number>", versions.version_detail, name="api-version"),
    path(
        "models/<str:name>/versions/<int:number>/override",
        versions.version_override,
        name="api-version-override",
    ),
    path("models/<str:name>/serve", serving.serve, name="api-serve"),
    path("models/<str:name>/rollback", serving.rollback, name="api-rollback"),
    path("models/<str:name>/compare", serving.compare, name="api-compare"),
    path("models/<str:name>/unload", serving.unload, name="api-unload"),
    path("models/<str:name>/load", serving.load, name="api-load"),
    path("models/<str:name>/history", serving.history, name="api-history"),
    path(
        "models/<str:name>/memory-estimate",
        memory_estimate_view,
        name="api-memory-estimate",
    ),
    path("models/<str:name>/metrics", metrics.metrics, name="api-metrics"),
    path("models/<str:name>/infer", tryit.infer, name="api-infer"),
    path("models/<str:name>/examples", tryit.examples, name="api-examples"),
    path(
        "models/<str:name>/examples/<int:example_id>",
        tryit.example_detail,
        name="api-example",
    ),
    path("models/<str:name>/labels", tryit.labels, name="api-labels"),
    path("models/<str:name>/try-settings", tryit.try_settings, name="api-try-settings"),
    path("models/<str:name>/sweeps", tryit.sweeps, name="api-sweeps"),
    path("models/<str:name>/sweeps/<int:run_id>", tryit.sweep_detail, name="api-sweep"),
    path("demo", tryit.demo_model, name="api-demo"),
    path("audit", serving.audit, name="api-audit"),
    path("uploads", versions.upload_create, name="api-uploads"),
    path("uploads/<str:upload_id>", versions.upload_detail, name="api-upload"),
    path("jobs", versions.jobs, name="api-jobs"),
    path("jobs/<str:job_id>", versions.job_detail, name="api-job"),
    path("jobs/<str:job_id>/cancel", versions.job_cancel, name="api-job-cancel"),
    path("jobs/<str:job_id>/log", versions.job_log, name="api-job-log"),
    path("schema", views.schema, name="api-schema"),
]
