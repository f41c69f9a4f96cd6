from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import include, path, re_path
from django.views.generic import RedirectView

from webapp import gateway
from webapp.accounts import language
from webapp.accounts import views as account_views
from webapp.accounts.auth import role_not_required
from webapp.nodes import views as node_views
from webapp.ops import metrics_views
from webapp.ops import prometheus as ops_prometheus
from webapp.ops import views as ops_views
from webapp.registry.capture import views as capture_views
from webapp.registry.catalogue.views import adopt as adopt_views
from webapp.registry.catalogue.views import demo as demo_views
from webapp.registry.catalogue.views import pages as registry_views
from webapp.registry.jobs import views as job_views
from webapp.registry.performance.views import perf as perf_views
from webapp.registry.performance.views import revise as revise_views
from webapp.registry.performance.views import tune as tune_views
from webapp.registry.quantize import views as quantize_views
from webapp.registry.serving.views import canary as canary_views
from webapp.registry.serving.views import placement as placement_views
from webapp.registry.serving.views import switch as switch_views
from webapp.registry.tryit.views import labels as labels_views
from webapp.registry.tryit.views import page as try_views
from webapp.registry.tryit.views import partials as try_partial_views
from webapp.sso import forms as sso_forms
from webapp.sso import views as sso_views

handler404 = "webapp.api.views.not_found"
handler500 = "webapp.api.views.server_error"

urlpatterns = [
    path("", RedirectView.as_view(pattern_name="models", permanent=False)),
    path("login/", sso_forms.SignInView.as_view(), name="login"),
    # Signing out is the one thing a user without a role may do (see webapp.accounts.auth).
    path("sso/oidc/", sso_views.oidc_start, name="sso-oidc-start"),
    path("sso/oidc/callback/", sso_views.oidc_callback, name="sso-oidc-callback"),
    path("logout/", role_not_required(auth_views.LogoutView.as_view()), name="logout"),
    # The header's language switcher and the scripts' translations (docs/i18n.md); both are
    # reached from the sign-in page too.
    path("language/", language.set_language, name="set-language"),
    path("jsi18n/", language.javascript_catalog, name="javascript-catalog"),
    path("models/", registry_views.model_list, name="models"),
    path("models/new/", registry_views.model_new, name="model-new"),
    path("models/retired/<int:pk>/", registry_views.retired_model, name="model-retired"),
    path("models/<str:name>/", registry_views.model_detail, name="model"),
    path("models/<str:name>/try/", try_views.model_try, name="model-try"),
    path("models/<str:name>/try/run/", try_partial_views.model_try_run, name="model-try-run"),
    path("models/<str:name>/try/image/", try_views.model_try_image, name="model-try-image"),
    path("models/<str:name>/try/labels/", labels_views.model_try_labels, name="model-try-labels"),
    path(
        "models/<str:name>/try/examples/",
        try_partial_views.model_try_example_save,
        name="model-try-examples",
    ),
    path(
        "models/<str:name>/try/examples/<int:example_id>/delete/",
        try_partial_views.model_try_example_delete,
        name="model-try-example-delete",
    ),
    path("models/<str:name>/perf/", perf_views.model_perf, name="model-perf"),
    path("models/<str:name>/sweep/", perf_views.model_sweep, name="model-sweep"),
    path("models/<str:name>/tune/", tune_views.model_tune_panel, name="model-tune-panel"),
    path("models/<str:name>/tune/start/", tune_views.model_tune_start, name="model-tune-start"),
    path(
        "models/<str:name>/tune/<int:run_id>/revise/",
        tune_views.model_tune_revise,
        name="model-tune-revise",
    ),
    path("models/<str:name>/metrics/", metrics_views.model_metrics_page, name="model-metrics"),
    path("models/<str:name>/captures/", capture_views.model_captures, name="model-captures"),
    path(
        "models/<str:name>/captures/settings/",
        capture_views.model_capture_settings,
        name="model-capture-settings",
    ),
    path(
        "models/<str:name>/captures/purge/",
        capture_views.model_captures_purge,
        name="model-captures-purge",
    ),
    path(
        "models/<str:name>/captures/<int:capture_id>/image.png",
        capture_views.model_capture_image,
        name="model-capture-image",
    ),
    path(
        "models/<str:name>/captures/<int:capture_id>/delete/",
        capture_views.model_capture_delete,
        name="model-capture-delete",
    ),
    path(
        "models/<str:name>/captures/<int:capture_id>/example/",
        capture_views.model_capture_example,
        name="model-capture-example",
    ),
    path("demo/add/", demo_views.demo_add, name="demo-add"),
    path("models/<str:name>/versions/new/", registry_views.version_new, name="version-new"),
    path("models/<str:name>/serve/", switch_views.model_serve, name="model-serve"),
    path("models/<str:name>/rollback/", switch_views.model_rollback, name="model-rollback"),
    path("models/<str:name>/unload/", switch_views.model_unload, name="model-unload"),
    path("models/<str:name>/load/", switch_views.model_load, name="model-load"),
    path("models/<str:name>/placement/", placement_views.model_placement, name="model-placement"),
    path("models/<str:name>/canary/", canary_views.model_canary, name="model-canary"),
    path(
        "models/<str:name>/canary/start/",
        canary_views.model_canary_start,
        name="model-canary-start",
    ),
    path(
        "models/<str:name>/canary/promote/",
        canary_views.model_canary_promote,
        name="model-canary-promote",
    ),
    path(
        "models/<str:name>/canary/abort/",
        canary_views.model_canary_abort,
        name="model-canary-abort",
    ),
    path("models/<str:name>/edit/", registry_views.model_edit, name="model-edit"),
    path("models/<str:name>/retire/", registry_views.model_retire, name="model-retire"),
    path(
        "models/<str:name>/versions/<int:number>/delete/",
        registry_views.version_delete,
        name="version-delete",
    ),
    path("audit/", job_views.audit, name="audit"),
    path("account/tokens/", account_views.account_tokens, name="account-tokens"),
    path(
        "account/tokens/<int:token_id>/revoke/",
        account_views.token_revoke,
        name="account-token-revoke",
    ),
    path(
        "account/tokens/<int:token_id>/expiry/",
        account_views.token_expiry,
        name="account-token-expiry",
    ),
    path("models/<str:name>/versions/<int:number>/", registry_views.version_detail, name="version"),
    path(
        "models/<str:name>/versions/<int:number>/revise/",
        revise_views.version_revise,
        name="version-revise",
    ),
    path(
        "models/<str:name>/versions/<int:number>/quantize/",
        quantize_views.quantize_page,
        name="version-quantize",
    ),
    path(
        "models/<str:name>/versions/<int:number>/override/",
        registry_views.version_override,
        name="version-override",
    ),
    path(
        "models/<str:name>/versions/<int:number>/download/<str:what>/",
        registry_views.version_download,
        name="version-download",
    ),
    path("jobs/", job_views.job_list, name="jobs"),
    path("jobs/<str:job_id>/", job_views.job_detail, name="job"),
    path("jobs/<str:job_id>/log.txt", job_views.job_log, name="job-log"),
    path("jobs/<str:job_id>/cancel/", job_views.job_cancel, name="job-cancel"),
    path("server/", ops_views.server, name="server"),
    path("nodes/", ops_views.server, name="nodes"),
    path("nodes/<str:name>/drain/", node_views.node_drain, name="node-drain"),
    path("nodes/<str:name>/revoke/", node_views.node_revoke, name="node-revoke"),
    path("nodes/<str:name>/remove/", node_views.node_remove, name="node-remove"),
    path("diagnostics/", ops_views.diagnostics, name="diagnostics"),
    path("server/adopt/", adopt_views.adopt_page, name="adopt"),
    path("metrics", ops_prometheus.metrics, name="metrics"),
    path("api/v1/", include("webapp.api.urls")),
    # Triton's own HTTP protocol, read-only and authenticated (webapp/gateway.py).
    path("v2", gateway.v2, name="v2-gateway"),
    re_path(r"^v2/(?P<rest>.*)$", gateway.v2),
    path("admin/", admin.site.urls),
]
