# A stand-in for python:3.11-slim-bookworm made from Debian's packages (Debian 12's python3 is
# 3.11), for machines that reach a Debian mirror but no image registry. Built by base-images.sh.
ARG DEBIAN_IMAGE=local/bookworm:base
FROM ${DEBIAN_IMAGE}
RUN apt-get update \
    && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
        python3 python3-venv python-is-python3 ca-certificates \
    && rm -rf /var/lib/apt/lists/* \
    && ln -s /usr/bin/python3 /usr/local/bin/python
ENV LANG=C.UTF-8
CMD ["python3"]
