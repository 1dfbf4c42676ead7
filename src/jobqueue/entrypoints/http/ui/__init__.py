"""The dashboard at `/ui`: server-rendered pages (Jinja2, autoescaped) that htmx, served
from the wheel, refreshes in place. A page per module, its templates in `templates/`, its
assets in `static/`."""
