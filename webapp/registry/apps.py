from django.apps import AppConfig


class RegistryConfig(AppConfig):
    name = "webapp.registry"
    label = "registry"
    verbose_name = "Model registry"

    def ready(self) -> None:
        # Connects the receiver that removes a deleted job's full log file.
        from webapp.registry import jobs  # noqa: F401
