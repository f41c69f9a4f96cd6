from django.urls import path

from webapp.api import views

urlpatterns = [
    path("health", views.health, name="api-health"),
    path("health/live", views.health_live, name="api-health-live"),
    path("server", views.server, name="api-server"),
    path("devices", views.devices, name="api-devices"),
    path("models", views.models, name="api-models"),
    path("models/<str:name>", views.model_detail, name="api-model"),
    path("schema", views.schema, name="api-schema"),
]
