"""The Models list, as the page and ``GET /api/v1/models`` read it: filter, sort, paginate.

One query for the page's rows (with their creator, owner and who retired them), one for their
tags and one for the total, however many models there are; the Triton index (one call) only
when the state filter needs it. Bad parameters are a HubError 400 naming the parameter.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from math import ceil

from django.db.models import Q, QuerySet
from django.utils.translation import gettext

from webapp.errors import HubError
from webapp.registry.catalogue.models import Model, ModelTag
from webapp.registry.catalogue.rules import Target
from webapp.registry.serving.state import ModelState, triton_states

#: ``sort``: a field, newest or last first with a leading "-"; the name breaks ties.
SORTS = {
    "name": ("name", "pk"),
    "-name": ("-name", "-pk"),
    "updated": ("updated", "name"),
    "-updated": ("-updated", "name"),
    "created": ("created", "name"),
    "-created": ("-created", "name"),
}
#: ``state``: serving (the hub serves a version), not_served, failing (the hub serves a
#: version but Triton does not hold it READY, LOADING or UNLOADING, or cannot be asked).
STATES = ("serving", "not_served", "failing")
HEALTHY = ("READY", "LOADING", "UNLOADING")
MAX_PER_PAGE = 1000


@dataclass(frozen=True)
class CatalogueQuery:
    q: str = ""
    target: str = ""
    state: str = ""
    tag: str = ""
    owner: str = ""
    sort: str = "name"
    retired: bool = False
    page: int = 1
    per_page: int = 50

    def checked(self) -> CatalogueQuery:
        """This query, or HubError 400 naming the parameter that is wrong."""
        if self.target and self.target not in Target.values:
            raise _bad("target", self.target, Target.values)
        if self.state and self.state not in STATES:
            raise _bad("state", self.state, STATES)
        if self.sort not in SORTS:
            raise _bad("sort", self.sort, SORTS)
        if self.page < 1:
            raise HubError(gettext("page starts at 1."), "invalid_page")
        if not 1 <= self.per_page <= MAX_PER_PAGE:
            raise HubError(
                gettext("per_page is from 1 to %(max)s.") % {"max": MAX_PER_PAGE}, "invalid_page"
            )
        if len(self.q) > 100 or len(self.tag) > 100 or len(self.owner) > 150:
            raise HubError(gettext("A search term is too long."), "invalid_query")
        return self

    def params(self, default_per_page: int, **changes: object) -> dict[str, str]:
        """The query string of this query with ``changes``, leaving out the defaults."""
        data = asdict(self) | changes
        defaults = asdict(CatalogueQuery(per_page=default_per_page))
        return {
            key: "true" if value is True else str(value)
            for key, value in data.items()
            if value != defaults[key]
        }


@dataclass
class CataloguePage:
    query: CatalogueQuery
    models: list[Model]
    total: int
    states: dict[str, ModelState] = field(default_factory=dict)
    triton_error: str = ""

    @property
    def pages(self) -> int:
        return max(1, ceil(self.total / self.query.per_page))

    @property
    def has_next(self) -> bool:
        return self.query.page < self.pages

    @property
    def has_previous(self) -> bool:
        return self.query.page > 1

    @property
    def first_index(self) -> int:
        return (self.query.page - 1) * self.query.per_page + 1 if self.models else 0

    @property
    def last_index(self) -> int:
        return self.first_index + len(self.models) - 1 if self.models else 0

    def rows(self) -> list[tuple[Model, ModelState | None]]:
        return [(m, self.states.get(m.name)) for m in self.models]


def find_models(query: CatalogueQuery, *, with_states: bool = False) -> CataloguePage:
    """One page of the catalogue; ``with_states``: ask Triton for every model's state."""
    query = query.checked()
    states: dict[str, ModelState] = {}
    triton_error = ""
    if with_states or query.state == "failing":
        states, triton_error = triton_states()
    rows = _filtered(query, states)
    total = rows.count()
    start = (query.page - 1) * query.per_page
    page = list(
        rows.select_related("created_by", "owner", "retired_by")
        .prefetch_related("tags")
        .order_by(*SORTS[query.sort])[start : start + query.per_page]
    )
    return CataloguePage(query, page, total, states, triton_error)


def _filtered(query: CatalogueQuery, states: dict[str, ModelState]) -> QuerySet[Model]:
    rows = Model.all_objects.filter(retired_at__isnull=not query.retired)
    if query.q:
        rows = rows.filter(Q(name__icontains=query.q) | Q(description__icontains=query.q))
    if query.target:
        rows = rows.filter(target=query.target)
    if query.tag:
        rows = rows.filter(tags__label=query.tag.strip().lower())
    if query.owner:
        rows = rows.filter(owner__username=query.owner)
    if query.state == "serving":
        rows = rows.exclude(serving_version=None)
    elif query.state == "not_served":
        rows = rows.filter(serving_version=None)
    elif query.state == "failing":
        healthy = [name for name, s in states.items() if s.state in HEALTHY]
        rows = rows.exclude(serving_version=None).exclude(name__in=healthy)
    return rows


def known_tags(limit: int = 200) -> list[str]:
    """Tags in use on live models, for the filter's suggestions (one query)."""
    labels = ModelTag.objects.filter(model__retired_at=None).values_list("label", flat=True)
    return list(labels.distinct().order_by("label")[:limit])


def _bad(name: str, value: str, allowed: Iterable[str]) -> HubError:
    # ``name`` is the query parameter's name (target, state, sort), kept as it is.
    message = gettext("Unknown %(parameter)s %(value)s; use one of %(allowed)s.")
    shown = {"parameter": name, "value": repr(value[:40]), "allowed": ", ".join(allowed)}
    return HubError(message % shown, f"invalid_{name}")
