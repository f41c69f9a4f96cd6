"""The Labels section of the Try it tab: how many class names the model has, the sets the
serving version offers in one click (ImageNet-1k, names in the ONNX file), and the upload.

The section is a partial (``registry/_try_labels.html``): the tab includes it, and a click on
an offer posts here (htmx) and gets it back, the count and the buttons brought up to date.
"""

from __future__ import annotations

from typing import Any

from django.http import HttpResponse
from django.shortcuts import get_object_or_404, render
from django.utils.translation import gettext
from django.views.decorators.http import require_http_methods

from model_store.inference import LabelOffer, label_offers, offered_labels
from model_store.inference.class_names import IMAGENET_1K
from webapp.accounts.roles import Role, require_role, role_of
from webapp.errors import HubError
from webapp.http import HubRequest
from webapp.registry.catalogue.models import Model, Version
from webapp.registry.tryit.actions import settings as try_actions


def labels_context(model: Model, serving: Version | None, *, can_operate: bool) -> dict[str, Any]:
    """What ``_try_labels.html`` shows: the count and one entry per offer, each with the text
    of its button (or ``in_use`` when the model has exactly those names already). The section
    starts open for an operator when the model has no labels but some are offered."""
    offers = label_offers(serving.signature, serving.onnx_summary) if serving else []
    count = len(model.labels)
    return {
        "model": model,
        "can_operate": can_operate,
        "labels_count": count,
        "label_offers": [_offer(o, model, serving, count) for o in offers if serving],
        "labels_open": can_operate and not count and bool(offers),
    }


def _offer(offer: LabelOffer, model: Model, serving: Version, count: int) -> dict[str, Any]:
    if offer.source == IMAGENET_1K:
        what, instead = gettext("ImageNet-1k labels"), "ImageNet-1k"
        size = (
            gettext("%(count)s classes, background first") % {"count": offer.count}
            if offer.count == 1001
            else gettext("1000 classes")
        )
    else:
        what = gettext("the labels in the model file")
        instead = gettext("those in the model file")
        size = gettext("key %(key)s, %(count)s classes") % {"key": offer.key, "count": offer.count}
    in_use = bool(count) and model.labels == offered_labels(
        offer.source, serving.signature, serving.onnx_summary
    )
    replace = gettext("Replace the labels with %(labels)s (%(size)s)")
    use = gettext("Use %(labels)s (%(size)s)")
    return {
        "source": offer.source,
        "in_use": in_use,
        "text": replace % {"labels": instead, "size": size}
        if count
        else use % {"labels": what, "size": size},
        "what": gettext("%(labels)s (%(size)s)") % {"labels": what, "size": size},
    }


@require_http_methods(["GET", "POST"])
def model_try_labels(request: HubRequest, name: str) -> HttpResponse:
    """GET: the section as it is (after an upload); POST ``source``: use that offer
    (operators), then the section, saying what changed or why not."""
    model = get_object_or_404(Model, name=name)
    serving = (
        model.versions.filter(number=model.serving_version).first()
        if model.serving_version
        else None
    )
    extra: dict[str, Any] = {"labels_open": True}
    status = 200
    if request.method == "POST":
        require_role(request.user, Role.OPERATOR)
        try:
            try_actions.use_offered_labels(
                model=model,
                source=request.POST.get("source", ""),
                user=request.user,  # type: ignore[arg-type]
            )
            extra["labels_message"] = gettext(
                "%(count)s class names saved; the next run shows them."
            ) % {"count": len(model.labels)}
        except HubError as exc:
            extra["labels_error"] = exc.message
            status = exc.status
    can_operate = role_of(request.user) >= Role.OPERATOR
    context = labels_context(model, serving, can_operate=can_operate) | extra
    return render(request, "registry/_try_labels.html", context, status=status)
