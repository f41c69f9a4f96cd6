from django.apps import AppConfig


class AccountsConfig(AppConfig):
    name = "webapp.accounts"
    label = "accounts"
    verbose_name = "Accounts and roles"

    def ready(self) -> None:
        from webapp import access_epoch
        from webapp.accounts import language  # noqa: F401 (connects its sign-in receiver)

        access_epoch.connect()
