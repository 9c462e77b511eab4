import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "cudaweb.settings")
application = get_wsgi_application()

# Load the playbooks, the knowledge tables and the similarity index when the web process starts, not in the
# first request that shows a run page or a triage (~0.4 s: bench/run_page_evidence.py).
from cudaweb.playbooks.matcher import warm_up  # noqa: E402

warm_up()
