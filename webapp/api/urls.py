from django.urls import path

from webapp.api import serving, versions, views

urlpatterns = [
    path("health", views.health, name="api-health"),
    path("health/live", views.health_live, name="api-health-live"),
    path("server", views.server, name="api-server"),
    path("devices", views.devices, name="api-devices"),
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
    path("models/<str:name>/unload", serving.unload, name="api-unload"),
    path("models/<str:name>/load", serving.load, name="api-load"),
    path("models/<str:name>/history", serving.history, name="api-history"),
    path("audit", serving.audit, name="api-audit"),
    path("uploads", versions.upload_create, name="api-uploads"),
    path("uploads/<str:upload_id>", versions.upload_detail, name="api-upload"),
    path("jobs", versions.jobs, name="api-jobs"),
    path("jobs/<str:job_id>", versions.job_detail, name="api-job"),
    path("jobs/<str:job_id>/cancel", versions.job_cancel, name="api-job-cancel"),
    path("schema", views.schema, name="api-schema"),
]
