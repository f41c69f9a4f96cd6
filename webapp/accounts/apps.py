from django.apps import AppConfig


class AccountsConfig(AppConfig):
    name = "webapp.accounts"
    label = "accounts"
    verbose_name = "Accounts and roles"

    def ready(self) -> None:
        from django.contrib.auth import get_user_model

        from webapp import access_epoch
        from webapp.accounts import language  # noqa: F401 (connects its sign-in receiver)
        from webapp.accounts.models import ApiToken
        from webapp.registry.capture.models import CapturePolicy
        from webapp.registry.catalogue.models import Model
        from webapp.registry.serving.models import NodeServing

        # Who may do what depends on these rows (and the fast path keeps each model's capture
        # rate): a change to any of them moves the epoch.
        user = get_user_model()
        access_epoch.connect(
            (ApiToken, user, Model, NodeServing, CapturePolicy), user.groups.through
        )
