# A stand-in for postgres:16-bookworm made from Debian's PostgreSQL 15, with the same contract
# for docker-compose.yml: POSTGRES_USER / POSTGRES_PASSWORD / POSTGRES_DB create the superuser
# and the database on first start, the data lives in /var/lib/postgresql/data, pg_isready is on
# PATH. Built by base-images.sh when no registry answers.
ARG DEBIAN_IMAGE=local/bookworm:base
FROM ${DEBIAN_IMAGE}
RUN apt-get update \
    && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends postgresql-15 \
    && rm -rf /var/lib/apt/lists/* \
    && mkdir -p /var/lib/postgresql/data /var/run/postgresql \
    && chown -R postgres:postgres /var/lib/postgresql /var/run/postgresql \
    && chmod 700 /var/lib/postgresql/data
COPY postgres-entrypoint.sh /usr/local/bin/postgres-entrypoint.sh
ENV PATH=/usr/lib/postgresql/15/bin:$PATH \
    PGDATA=/var/lib/postgresql/data
USER postgres
# a fast shutdown (as the official image): SIGTERM would wait for every client to leave
STOPSIGNAL SIGINT
EXPOSE 5432
ENTRYPOINT ["/usr/local/bin/postgres-entrypoint.sh"]
