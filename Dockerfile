# One image for web, worker and beat. torch is the CPU build here: the dashboard never runs the agent's GPU work
# itself; GPU hosts run the agent with their own interpreter.
FROM python:3.11-slim-bookworm
ENV PYTHONUNBUFFERED=1 PIP_DISABLE_PIP_VERSION_CHECK=1
RUN apt-get update && apt-get install -y --no-install-recommends openssh-client && rm -rf /var/lib/apt/lists/*
WORKDIR /app
COPY requirements.txt .
RUN pip install --no-cache-dir -r requirements.txt \
 && pip install --no-cache-dir torch==2.13.0 --index-url https://download.pytorch.org/whl/cpu
COPY . .
RUN useradd --create-home cudaweb && mkdir -p /app/var && chown cudaweb /app/var
USER cudaweb
RUN SECRET_KEY=build-only python manage.py collectstatic --noinput
EXPOSE 8000
CMD ["gunicorn", "cudaweb.wsgi", "--bind", "0.0.0.0:8000", "--workers", "3"]
