"""The dashboard: the web application the API listener serves at ``/``, a client of the v4 API like any other.

It is plain HTML, CSS and JavaScript modules that the browser loads as they are (``static/``, package data): no
framework, no bundler, no build step, nothing fetched from elsewhere. A fresh machine without internet serves it as
installed, a reader finds each page in one module of ``static/pages/``, and what the browser runs is what is in the
repository. Every rule and validation stays in the API; the pages only show what it answers (``docs/dashboard.md``).
"""

from edgeplane.dashboard.assets import ASSETS, dashboard_assets

__all__ = ["ASSETS", "dashboard_assets"]
