# One image for web, worker and beat. No torch: no process in this image runs the agent's GPU work (the worker
# ships the agent to each GPU host, which runs it with its own interpreter; triage, drift and the pages are plain
# Python), so the image needs nothing from the PyTorch download site.
#
# Builds without internet: Python packages come only from the wheelhouse `make image` fills on the build host
# (var/wheelhouse, with the host's own pip settings: its index mirror, its CA); the only other download is the base
# distribution's own packages (python3 and venv, when the base has no Python of its own).
#   make image                                      # on python:3.11-slim-bookworm
#   make image BASE=registry.example.org/debian:bookworm   # a site's own base image (Debian 12 or later)
ARG BASE=python:3.11-slim-bookworm

FROM ${BASE} AS python
ENV PYTHONUNBUFFERED=1 PIP_DISABLE_PIP_VERSION_CHECK=1 LANG=C.UTF-8
# The public python image has its own Python; a plain Debian base gets Debian's (3.11 on bookworm).
RUN if ! command -v python3 >/dev/null || ! python3 -c "import ensurepip" 2>/dev/null; then \
      apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends python3 python3-venv \
      && rm -rf /var/lib/apt/lists/*; \
    fi

# The virtual environment is built in a stage of its own, so that the wheelhouse is not a layer of the image.
FROM python AS venv
COPY var/wheelhouse /wheelhouse
COPY requirements.txt /requirements.txt
RUN python3 -m venv /opt/venv \
 && /opt/venv/bin/pip install --no-cache-dir --no-index --find-links /wheelhouse -r /requirements.txt

FROM python
COPY --from=venv /opt/venv /opt/venv
ENV PATH=/opt/venv/bin:$PATH
WORKDIR /app
COPY manage.py ./
COPY cudaweb cudaweb
COPY agents agents
COPY templates templates
COPY static static
# collectstatic runs as root before USER: the cudaweb user owns only what it writes at run time (var/).
RUN useradd --create-home --uid 1000 cudaweb \
 && SECRET_KEY=build-only python manage.py collectstatic --noinput -v 0 \
 && mkdir -p /app/var && chown cudaweb /app/var
USER cudaweb
EXPOSE 8000
CMD ["gunicorn", "cudaweb.wsgi", "--bind", "0.0.0.0:8000", "--workers", "3"]
