from django.apps import AppConfig


class SsoConfig(AppConfig):
    name = "webapp.sso"
    label = "sso"
    verbose_name = "Single sign-on"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # A deployment with a sign-in setting it cannot use stops here, saying which.
        from webapp.sso.settings import checked_settings

        checked_settings()
