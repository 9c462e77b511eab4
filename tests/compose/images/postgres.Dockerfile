# PostgreSQL from Debian's packages, for `make compose-test` where the registry's postgres image cannot be pulled.
# It reads the official image's variables (POSTGRES_USER, POSTGRES_PASSWORD, POSTGRES_DB) and keeps its data in the
# same place, /var/lib/postgresql/data, so docker-compose.yml runs on it unchanged.
ARG BASE
FROM ${BASE}
RUN apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends postgresql-15 \
 && rm -rf /var/lib/apt/lists/* \
 && mkdir -p /var/lib/postgresql/data /run/postgresql && chown postgres:postgres /var/lib/postgresql/data /run/postgresql
COPY postgres-entrypoint.sh /usr/local/bin/postgres-entrypoint.sh
ENV PATH=/usr/lib/postgresql/15/bin:$PATH PGDATA=/var/lib/postgresql/data
USER postgres
ENTRYPOINT ["/usr/local/bin/postgres-entrypoint.sh"]
CMD ["postgres"]
