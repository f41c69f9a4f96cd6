from django.apps import AppConfig


class RegistryConfig(AppConfig):
    name = "webapp.registry"
    label = "registry"
    verbose_name = "Model registry"

    def ready(self) -> None:
        # Connects the receiver that removes a deleted job's full log file.
        from webapp.registry.jobs import record as jobs  # noqa: F401
