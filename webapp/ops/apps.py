from django.apps import AppConfig


class OpsConfig(AppConfig):
    name = "webapp.ops"
    label = "ops"
    verbose_name = "Server and health"
