"""What every state-changing dashboard form goes through before it acts.

An action is a form POST under `/ui` (`ACTION` marks its route): it needs a session like
any page, its CSRF token must match the browser's cookie (a form another site's page
posts carries none), and DASHBOARD_READ_ONLY refuses it whatever it asks. A refusal is
raised, and rendered as the dashboard's error page (`errors.py`).
"""

from __future__ import annotations

from typing import Any, Final

from litestar import Request
from litestar.datastructures import FormMultiDict
from litestar.exceptions import ClientException, PermissionDeniedException

from jobqueue.entrypoints.http.middleware import DASHBOARD, FORM
from jobqueue.entrypoints.http.ui.frame import DashboardAccess
from jobqueue.entrypoints.http.ui.session import CSRF_COOKIE, CSRF_FIELD, csrf_matches

# A route's `opt` for an action: signed in like every page; a form's body, not JSON.
ACTION: Final = {DASHBOARD: True, FORM: True}

READ_ONLY: Final = "The dashboard is read-only here (DASHBOARD_READ_ONLY): nothing was changed."
EXPIRED: Final = "The form had expired or came from another page: nothing was changed. Try again."
NOT_TEXT: Final = "A dashboard form holds text only, not files: nothing was changed."


async def action_form(request: Request[Any, Any, Any], access: DashboardAccess) -> FormMultiDict:
    """The action's form, once it may act; else a 403 saying why nothing was done."""
    if access.read_only:
        raise PermissionDeniedException(detail=READ_ONLY)
    form = await request.form()
    # The dashboard's forms hold text only; a file where text belongs is no form of ours.
    if any(not isinstance(value, str) for _, value in form.multi_items()):
        raise ClientException(detail=NOT_TEXT)
    if not csrf_matches(request.cookies.get(CSRF_COOKIE), form.get(CSRF_FIELD)):
        raise PermissionDeniedException(detail=EXPIRED)
    return form
