# PostgreSQL from Debian's packages (15 in bookworm; upstream's compose default is the official
# postgres:17 image), for hosts without a registry (make compose-images). It keeps the official
# image's contract where docker-compose.yml relies on it: POSTGRES_USER, POSTGRES_PASSWORD and
# POSTGRES_DB make the cluster on first start, the data lives in /var/lib/postgresql/data, it
# listens on 5432 for the compose network with password authentication, and pg_isready works.
ARG BASE_IMAGE=triton-model-hub/debian:bookworm
FROM ${BASE_IMAGE}

RUN apt-get update \
    && apt-get install -y --no-install-recommends postgresql-15 \
    && rm -rf /var/lib/apt/lists/*

ENV PATH=/usr/lib/postgresql/15/bin:$PATH \
    PGDATA=/var/lib/postgresql/data \
    LANG=C.UTF-8
RUN mkdir -p "$PGDATA" /run/postgresql \
    && chown -R postgres:postgres /var/lib/postgresql /run/postgresql \
    && chmod 0700 "$PGDATA"
COPY postgres-entrypoint.sh /usr/local/bin/hub-postgres-entrypoint
VOLUME /var/lib/postgresql/data
EXPOSE 5432
STOPSIGNAL SIGINT
ENTRYPOINT ["/bin/sh", "/usr/local/bin/hub-postgres-entrypoint"]
CMD ["postgres"]
